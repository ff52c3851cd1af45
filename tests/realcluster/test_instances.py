"""Instances that local EC2 runs become kubelets a boot time after launch, from the user data carpool's own
launch code put in their launch template; a terminated instance's kubelet stops.

Local AWS is moto in this process (`carpool.sim.localaws.in_process`, CreateFleet allocating and tagging
instances as the server does); the kubelet side is a recorder (it stands for `kubelets.HollowKubelets`, not
for the bridge). AL2023 cases need the real nodeadm (`/work/shared/nodeadm/build.sh`) and skip without it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from tests.realcluster import carpool_boot
from tests.realcluster.instances import InstanceBridge
from tests.realcluster.node_spec import NodeSpec

from carpool import labels as L
from carpool.adapters.aws.ec2 import Ec2Compute
from carpool.amis import ResolvedAmi, ami_requirements
from carpool.launch.fleet import FleetOverride, build_fleet_request, fleet_tags
from carpool.launch.templates import LaunchSettings, create_launch_template_request, plan_launch_templates
from carpool.launch.userdata import NodeBootstrap
from carpool.sim.localaws.in_process import moto_in_process
from carpool.sim.localaws.server import LocalAws

CLUSTER = "demo"
BOOT_SECONDS = 40.0
NODEADM_MISSING = carpool_boot.nodeadm_available()
needs_nodeadm = pytest.mark.skipif(bool(NODEADM_MISSING), reason=NODEADM_MISSING)


@dataclass
class RecordingKubelets:
    """What the bridge asked of the kubelet side, in order."""

    started: list[NodeSpec] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)

    def start(self, spec: NodeSpec) -> None:
        self.started.append(spec)

    def stop(self, name: str) -> None:
        self.stopped.append(name)


@dataclass
class World:
    ec2: Any
    subnet: str
    images: dict[str, str]
    offset: float = 0.0

    def clock(self) -> float:
        return time.time() + self.offset

    def launch(self, family: str = "al2023", instance_type: str = "m5.xlarge") -> str:
        """One instance through carpool's launch code: its launch template plan, request and CreateFleet."""
        boot = NodeBootstrap(cluster_name=CLUSTER, endpoint="https://127.0.0.1:6443", ca_bundle="Q0E=",
                             cluster_cidr="10.100.0.0/16", max_pods=58,
                             kube_reserved={"cpu": 80, "memory": 893 * 2**20, "ephemeral-storage": 2**30},
                             labels={L.NODEPOOL: "default", L.CAPACITY_TYPE: "on-demand"})
        ami = ResolvedAmi(self.images[family], family, "amd64", "standard", ami_requirements("amd64", "standard"))
        settings = LaunchSettings(security_group_ids=("sg-1",), instance_profile="node",
                                  block_device_mappings=({"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 80}},
                                                         {"DeviceName": "/dev/xvdb", "Ebs": {"VolumeSize": 60}}))
        (spec,) = plan_launch_templates(CLUSTER, family, {instance_type: ami}, lambda _: boot, settings,
                                        [instance_type], "on-demand")
        compute = Ec2Compute(self.ec2)
        compute.ensure_launch_template(create_launch_template_request(spec))
        override = FleetOverride(spec.name, instance_type, self.subnet, "us-east-1a", 0.19)
        request = build_fleet_request("claim-a", "on-demand", [override],
                                      fleet_tags(CLUSTER, "default", "claim-a", "default"))
        answer = compute.create_fleet(request)
        return answer["Instances"][0]["InstanceIds"][0]

    def instance(self, iid: str) -> dict[str, Any]:
        return self.ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    with moto_in_process(fleets_as_ec2=True):
        ec2 = boto3.client("ec2", region_name="us-east-1")
        images = {
            "al2023": ec2.register_image(Name="amazon-eks-node-al2023-x86_64-standard-1.31-v20250115",
                                         Architecture="x86_64", RootDeviceName="/dev/xvda")["ImageId"],
            "bottlerocket": ec2.register_image(Name="bottlerocket-aws-k8s-1.31-x86_64-v1.30.0",
                                               Architecture="x86_64", RootDeviceName="/dev/xvda")["ImageId"],
        }
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/20", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
        yield World(ec2, subnet, images)


def bridge(world: World, kubelets: RecordingKubelets) -> InstanceBridge:
    return InstanceBridge(world.ec2, kubelets, BOOT_SECONDS, clock=world.clock)


@needs_nodeadm
def test_a_carpool_instance_becomes_a_kubelet_a_boot_time_after_launch(world):
    iid = world.launch("al2023")
    kubelets = RecordingKubelets()
    b = bridge(world, kubelets)
    b.poll_once()
    assert kubelets.started == []  # still booting
    world.offset = BOOT_SECONDS + 1
    b.poll_once()
    b.poll_once()  # once only
    (spec,) = kubelets.started
    inst = world.instance(iid)
    assert spec.name == inst["PrivateDnsName"] and spec.node_ip == inst["PrivateIpAddress"]
    assert spec.provider_id == f"aws:///us-east-1a/{iid}"
    assert spec.node_labels == {L.NODEPOOL: "default", L.CAPACITY_TYPE: "on-demand"}
    assert spec.kubelet_config["maxPods"] == 58 and spec.kubelet_config["kubeReserved"]["memory"] == "893Mi"
    assert spec.machine.cpu_millis == 4000 and spec.machine.ephemeral_storage_bytes == 80 * 2**30
    assert b.running == {iid: spec.name}


def test_a_terminated_instance_has_its_kubelet_stopped_once(world):
    iid = world.launch("bottlerocket")
    kubelets = RecordingKubelets()
    b = bridge(world, kubelets)
    world.offset = BOOT_SECONDS + 1
    b.poll_once()
    (spec,) = kubelets.started
    assert spec.machine.ephemeral_storage_bytes == 60 * 2**30  # Bottlerocket's data volume
    world.ec2.terminate_instances(InstanceIds=[iid])
    b.poll_once()
    b.poll_once()
    assert kubelets.stopped == [spec.name] and b.running == {}


def test_an_instance_terminated_while_booting_never_starts_a_kubelet(world):
    iid = world.launch("bottlerocket")
    kubelets = RecordingKubelets()
    b = bridge(world, kubelets)
    b.poll_once()
    world.ec2.terminate_instances(InstanceIds=[iid])
    world.offset = BOOT_SECONDS + 1
    b.poll_once()
    assert kubelets.started == [] and kubelets.stopped == []


def test_user_data_the_image_cannot_read_starts_no_kubelet(world):
    iid = world.ec2.run_instances(ImageId=world.images["al2023"], MinCount=1, MaxCount=1, InstanceType="m5.large",
                                  SubnetId=world.subnet, UserData="#!/bin/bash\necho hi\n")["Instances"][0]["InstanceId"]
    kubelets = RecordingKubelets()
    b = bridge(world, kubelets)
    world.offset = BOOT_SECONDS + 1
    b.poll_once()
    assert kubelets.started == [] and iid in b.failures


def test_the_thread_polls_until_stopped(world):
    world.launch("bottlerocket")
    kubelets = RecordingKubelets()
    b = InstanceBridge(world.ec2, kubelets, 0.0, poll_seconds=0.1)
    b.start()
    try:
        deadline = time.monotonic() + 10
        while not kubelets.started and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        b.stop()
    assert len(kubelets.started) == 1 and b.errors == []


def _wait(condition: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.1)
    return bool(condition())


@needs_nodeadm
def test_on_local_aws_as_the_tier_runs_it_the_wall_clock_and_one_second_polls():
    """The server the tier runs, its own CreateFleet, the bridge's thread: a node 2 s after launch, gone
    within a poll or two of its termination."""
    with LocalAws(export=False) as aws:
        ec2 = aws.client("ec2")
        image = ec2.register_image(Name="amazon-eks-node-al2023-x86_64-standard-1.31-v20250115",
                                   Architecture="x86_64", RootDeviceName="/dev/xvda")["ImageId"]
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/20", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
        world = World(ec2, subnet, {"al2023": image})
        kubelets = RecordingKubelets()
        b = InstanceBridge(ec2, kubelets, 2.0)
        b.start()
        try:
            iid = world.launch("al2023")
            launched = time.time()
            assert _wait(lambda: kubelets.started, 8), b.errors or b.failures
            assert time.time() - launched >= 1.0  # not before its boot time (LaunchTime has whole seconds)
            assert kubelets.started[0].provider_id == f"aws:///us-east-1a/{iid}"
            ec2.terminate_instances(InstanceIds=[iid])
            assert _wait(lambda: kubelets.stopped, 5)
        finally:
            b.stop()
    assert kubelets.stopped == [kubelets.started[0].name] and b.errors == []
