"""A simulated node registers as a real one would: from its launch template's user data, with only the
labels the kubelet and the cloud controller set, and never lifts a karpenter.sh taint."""

from __future__ import annotations

import base64
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest

from carpool import labels as L
from carpool import quantity
from carpool.launch import userdata as render
from carpool.launch.userdata.bootstrap import NodeBootstrap
from carpool.sim.clock import SimClock
from carpool.sim.cluster.agents import Agents
from carpool.sim.cluster.kubelet import InstanceFacts, Kubelets, memory_capacity_mib, node_resources
from carpool.sim.cluster.nodeboot import NodeKubelet
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.sim.cluster.specs import Agent, KubeletFault, Truth
from carpool.sim.localaws.in_process import moto_in_process
from carpool.taints import Taint

CLUSTER = "sim"
CILIUM = "node.cilium.io/agent-not-ready"
TRUTH = Truth(boot_seconds=10, registration_seconds=10, memory_overhead_percent={"al2023": 6.0})
BOOT = NodeBootstrap(
    cluster_name=CLUSTER, endpoint="https://sim.eks", ca_bundle="Q0E=", cluster_cidr="10.100.0.0/16",
    max_pods=58, kube_reserved={"cpu": 80, "memory": 893 * 2**20, "ephemeral-storage": 2**30},
    labels={L.NODEPOOL: "web", L.CAPACITY_TYPE: "on-demand", "team": "a"},
    taints=(Taint("karpenter.sh/disrupted", "NoSchedule"),), startup_taints=(Taint(CILIUM, "NoExecute"),),
)
KUBELET_AND_CLOUD_LABELS = {
    L.HOSTNAME, L.OS, L.ARCH, "beta.kubernetes.io/os", "beta.kubernetes.io/arch", L.INSTANCE_TYPE,
    "beta.kubernetes.io/instance-type", L.ZONE, "failure-domain.beta.kubernetes.io/zone", L.REGION,
    "failure-domain.beta.kubernetes.io/region", "topology.k8s.aws/zone-id",
}


@dataclass
class World:
    ec2: Any
    clock: SimClock
    cluster: SimulatedCluster
    subnet: str
    image: str

    def launch(self, boot: NodeBootstrap = BOOT, pool: str = "web", instance_type: str = "c5.xlarge") -> str:
        name = f"carpool-sim-{abs(hash((boot.fingerprint(), instance_type))) % 10**8}"
        self.ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData={
            "ImageId": self.image, "UserData": render.encode(render.render("al2023", boot)),
            "BlockDeviceMappings": [{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 40}}]})
        tags = [{"Key": L.TAG_MANAGED_BY, "Value": CLUSTER}, {"Key": L.NODEPOOL, "Value": pool}]
        answer = self.ec2.create_fleet(
            Type="instant", TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "on-demand"},
            LaunchTemplateConfigs=[{"LaunchTemplateSpecification": {"LaunchTemplateName": name, "Version": "$Latest"},
                                    "Overrides": [{"InstanceType": instance_type, "SubnetId": self.subnet,
                                                   "AvailabilityZone": "us-east-1a"}]}],
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])
        return answer["Instances"][0]["InstanceIds"][0]

    def kubelets(self, *faults: KubeletFault, agents: tuple[Agent, ...] = ()) -> Kubelets:
        elapsed = lambda: self.clock.elapsed  # noqa: E731
        return Kubelets(self.ec2, self.cluster, CLUSTER, "us-east-1", TRUTH, elapsed, faults=faults,
                        agents=Agents(self.cluster, agents, elapsed))

    def run(self, kubelets: Kubelets, until: float) -> None:
        while self.clock.elapsed <= until:
            kubelets.tick()
            self.clock.advance(5)


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    # only the image registered here exists, as in the simulation's local EC2 (moto's ~2,600 default
    # AMIs would cost a second per test and are never looked at)
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    with moto_in_process(fleets_as_ec2=True):
        ec2 = boto3.client("ec2", region_name="us-east-1")
        image = ec2.register_image(Name="amazon-eks-node-al2023-x86_64-standard-1.32-v20250115",
                                   Architecture="x86_64", RootDeviceName="/dev/xvda")["ImageId"]
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/20", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
        clock = SimClock()
        yield World(ec2, clock, SimulatedCluster(clock, elapsed=lambda: clock.elapsed), subnet, image)


def node_of(world: World, kubelets: Kubelets, iid: str) -> dict[str, Any]:
    raw = world.cluster.node_raw(kubelets.registered[iid])
    assert raw is not None
    return raw


def taint_keys(node: dict[str, Any]) -> set[str]:
    return {t["key"] for t in node["spec"].get("taints") or []}


def test_registers_with_only_user_data_kubelet_and_cloud_controller_labels(world):
    iid = world.launch()
    kubelets = world.kubelets()
    world.run(kubelets, 10)
    node = node_of(world, kubelets, iid)
    labels = node["metadata"]["labels"]
    assert set(labels) == KUBELET_AND_CLOUD_LABELS | set(BOOT.labels)
    assert labels[L.INSTANCE_TYPE] == "c5.xlarge" and labels[L.ZONE] == "us-east-1a" and labels["team"] == "a"
    assert not any(k.startswith("karpenter.k8s.aws/") for k in labels)
    assert node["spec"]["providerID"] == f"aws:///us-east-1a/{iid}"
    assert taint_keys(node) == {L.UNREGISTERED_TAINT, "karpenter.sh/disrupted", CILIUM, "node.kubernetes.io/not-ready"}


def test_ready_lifts_only_not_ready_and_karpenter_taints_stay_forever(world):
    iid = world.launch()
    kubelets = world.kubelets()
    world.run(kubelets, 600)
    node = node_of(world, kubelets, iid)
    assert node["status"]["conditions"][0]["status"] == "True"
    assert taint_keys(node) == {L.UNREGISTERED_TAINT, "karpenter.sh/disrupted", CILIUM}


def test_a_declared_agent_lifts_its_startup_taint_after_its_delay(world):
    iid = world.launch()
    kubelets = world.kubelets(agents=(Agent(name="cilium", removes_taint=CILIUM, delay_seconds=20),))
    world.run(kubelets, 25)
    assert CILIUM in taint_keys(node_of(world, kubelets, iid))  # registered at 10, due at 30
    world.run(kubelets, 30)
    node = node_of(world, kubelets, iid)
    assert CILIUM not in taint_keys(node) and L.UNREGISTERED_TAINT in taint_keys(node)
    assert kubelets.agents is not None and kubelets.agents.removed[0][1:] == (node["metadata"]["name"], "cilium", CILIUM)


def test_an_agent_only_runs_on_the_nodes_it_selects(world):
    iid = world.launch()
    agent = Agent.model_validate({"name": "x", "removesTaint": CILIUM, "delaySeconds": 0, "nodes": {"nodePool": "gpu"}})
    kubelets = world.kubelets(agents=(agent,))
    world.run(kubelets, 100)
    assert CILIUM in taint_keys(node_of(world, kubelets, iid))


def test_node_reports_what_the_user_data_reserves_from_its_real_capacity(world):
    iid = world.launch()
    kubelets = world.kubelets()
    world.run(kubelets, 10)
    node = node_of(world, kubelets, iid)
    facts = kubelets.facts("c5.xlarge")
    memory = memory_capacity_mib(facts, "al2023", TRUTH)
    assert node["status"]["capacity"]["memory"] == f"{memory * 1024}Ki"
    assert node["status"]["capacity"]["pods"] == node["status"]["allocatable"]["pods"] == "58"
    # 4 vCPUs - 80m; memory - 893Mi kube-reserved - 100Mi eviction (nodeadm default)
    assert node["status"]["allocatable"]["cpu"] == "3920m"
    assert node["status"]["allocatable"]["memory"] == f"{(memory - 893 - 100) * 1024}Ki"
    # the launch template's 40 GiB root volume, less the filesystem's share, less 1Gi and 10 %
    disk = quantity.resource_value("ephemeral-storage", node["status"]["capacity"]["ephemeral-storage"])
    assert 40 * 2**30 * 0.99 < disk < 40 * 2**30
    allocatable = quantity.resource_value("ephemeral-storage", node["status"]["allocatable"]["ephemeral-storage"])
    assert allocatable == disk - 2**30 - math.ceil(disk / 10)


def test_the_launch_template_user_data_wins_over_a_changed_instance_attribute(world):
    iid = world.launch()
    world.ec2.stop_instances(InstanceIds=[iid])
    world.ec2.modify_instance_attribute(InstanceId=iid, UserData={"Value": base64.b64encode(b"#!/bin/bash\necho nothing\n")})
    world.ec2.start_instances(InstanceIds=[iid])
    kubelets = world.kubelets()
    world.run(kubelets, 10)
    assert kubelets.boots[iid].no_join == ""
    assert node_of(world, kubelets, iid)["status"]["capacity"]["pods"] == "58"


def test_faults_fail_to_join_join_late_and_report_less_memory(world):
    lost = world.launch(pool="batch", instance_type="m5.large")
    late = world.launch(instance_type="c5.2xlarge")
    short = world.launch(instance_type="c5.xlarge")
    kubelets = world.kubelets(
        KubeletFault(node_pool="batch", fail_to_join=True),
        KubeletFault(instance_type="c5.2*", extra_join_seconds=60),
        KubeletFault.model_validate({"instanceType": "c5.xlarge", "memoryShortMiB": 512}))
    world.run(kubelets, 30)
    assert set(kubelets.registered) == {short}
    # the late one joins at 70 s (10 s boot + 60 s late); the lost one, were it joining, at 10 s
    world.run(kubelets, 150)
    assert set(kubelets.registered) == {short, late}
    assert lost in kubelets.launched and "fails to join" in kubelets.boots[lost].no_join
    facts = kubelets.facts("c5.xlarge")
    reported = node_of(world, kubelets, short)["status"]["capacity"]["memory"]
    assert reported == f"{(memory_capacity_mib(facts, 'al2023', TRUTH) - 512) * 1024}Ki"


def test_a_fault_with_a_count_hits_only_that_many_instances(world):
    first, second = world.launch(), world.launch(instance_type="c5.2xlarge")
    kubelets = world.kubelets(KubeletFault(fail_to_join=True, count=1))
    world.run(kubelets, 100)
    assert len(kubelets.registered) == 1 and {first, second} <= set(kubelets.launched)


def test_unreadable_user_data_never_joins(world):
    world.ec2.create_launch_template(LaunchTemplateName="carpool-sim-custom", LaunchTemplateData={
        "ImageId": world.image, "UserData": render.encode("#!/bin/bash\necho hello\n")})
    iid = world.ec2.create_fleet(
        Type="instant", TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "on-demand"},
        LaunchTemplateConfigs=[{"LaunchTemplateSpecification": {"LaunchTemplateName": "carpool-sim-custom"},
                                "Overrides": [{"InstanceType": "m5.large", "SubnetId": world.subnet}]}],
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": L.TAG_MANAGED_BY, "Value": CLUSTER}]}],
    )["Instances"][0]["InstanceIds"][0]
    kubelets = world.kubelets()
    world.run(kubelets, 100)
    assert iid in kubelets.launched and not kubelets.registered and kubelets.boots[iid].no_join


def test_terminated_instances_lose_their_node_and_are_still_recorded(world):
    iid = world.launch()
    kubelets = world.kubelets()
    world.run(kubelets, 10)
    world.ec2.terminate_instances(InstanceIds=[iid])
    world.run(kubelets, 20)
    assert iid in kubelets.terminated and world.cluster.node_raw(kubelets.registered[iid]) is None


def test_allocatable_never_goes_below_zero():
    tiny = InstanceFacts("t3.nano", 2, 512, "amd64", 2, 2)
    kubelet = NodeKubelet("al2023", 4, None, {"memory": "1Gi"}, {}, {"memory.available": "100Mi"})
    _, allocatable = node_resources(tiny, kubelet, 400)
    assert allocatable["memory"] == "0Ki"


def test_pods_per_core_caps_pod_capacity():
    facts = InstanceFacts("m5.large", 2, 8192, "amd64", 3, 10)
    kubelet = NodeKubelet("al2023", 29, 4, {}, {}, {})
    capacity, _ = node_resources(facts, kubelet, 7000)
    assert capacity["pods"] == "8"
