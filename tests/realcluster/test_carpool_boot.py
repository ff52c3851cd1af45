"""An instance's boot from carpool's own user data, read by the real nodeadm (AL2023) and by Bottlerocket's
template (`carpool_boot`), and compared with the simulation's reading of the same bytes
(`carpool.sim.cluster.userdata` + `nodeboot`): where they differ, the simulation is wrong.

The nodeadm tests need the real nodeadm's source and Go: `MIRROR=<git dir of awslabs/amazon-eks-ami>
/work/shared/nodeadm/build.sh` (the Go overlay in `nodeadm_kubelet/` is then built in seconds)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from tests.realcluster import carpool_boot as cb
from tests.realcluster.node_spec import Taint

from carpool.launch.userdata import NodeBootstrap, render
from carpool.sim.cluster import nodeboot, userdata
from carpool.sim.cluster.kubelet import InstanceFacts
from carpool.sim.localaws.in_process import ec2_instance_types
from carpool.sim.localaws.server import LocalAws
from carpool.taints import Taint as SimTaint

INSTANCE_TYPES = ec2_instance_types()

_MIB = 2**20
BARE = NodeBootstrap(cluster_name="demo", endpoint="https://127.0.0.1:6443", ca_bundle="Q0E=",
                     cluster_cidr="10.100.0.0/16")
NODEADM_MISSING = cb.nodeadm_available()
needs_nodeadm = pytest.mark.skipif(bool(NODEADM_MISSING), reason=NODEADM_MISSING)


def instance(instance_type: str, iid: str = "i-0123456789abcdef0") -> dict[str, Any]:
    return {"InstanceId": iid, "InstanceType": instance_type, "Placement": {"AvailabilityZone": "us-west-2b"},
            "PrivateDnsName": "ip-10-0-7-9.us-west-2.compute.internal", "PrivateIpAddress": "10.0.7.9",
            "RootDeviceName": "/dev/xvda"}


def carpool_sized(b: NodeBootstrap, instance_type: str, max_pods: int) -> NodeBootstrap:
    """What carpool's launch writes: max pods and the kube-reserved it sized the node with."""
    it = INSTANCE_TYPES[instance_type]
    cpu = nodeboot.kube_reserved_cpu_millis(int(it["VCpuInfo"]["DefaultVCpus"]))
    return replace(b, max_pods=max_pods, kube_reserved={"cpu": cpu, "memory": (11 * max_pods + 255) * _MIB,
                                                         "ephemeral-storage": 2**30})


#: user data shapes carpool writes: (name, instance type, bootstrap)
SHAPES = [
    ("bare", "m5.large", BARE),
    ("eni-limited", "m5.xlarge", carpool_sized(BARE, "m5.xlarge", 58)),
    ("prefix-delegation", "m5.large", carpool_sized(BARE, "m5.large", 110)),
    ("custom-kubelet", "c5.2xlarge", replace(
        carpool_sized(BARE, "c5.2xlarge", 58), system_reserved={"cpu": 100, "memory": 200 * _MIB},
        eviction_hard={"memory.available": "5%", "nodefs.available": "12%"},
        eviction_soft={"memory.available": "10%"}, eviction_soft_grace_period={"memory.available": "1m0s"},
        eviction_max_pod_grace_period=60, image_gc_high_threshold_percent=80, image_gc_low_threshold_percent=60,
        cluster_dns="10.100.0.53", labels={"team": "a", "karpenter.sh/nodepool": "general"},
        taints=(SimTaint("dedicated", "NoSchedule", "batch"),),
        startup_taints=(SimTaint("node.cilium.io/agent-not-ready", "NoExecute", "true"),))),
    ("gpu", "g4dn.xlarge", replace(carpool_sized(BARE, "g4dn.xlarge", 29),
                                   taints=(SimTaint("nvidia.com/gpu", "NoSchedule", "true"),))),
    ("arm64", "c6g.large", replace(carpool_sized(BARE, "c6g.large", 29), labels={"kubernetes.io/arch": "arm64"})),
    ("user-nodeconfig", "m5.large", replace(BARE, user_data=(
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n"
        "    maxPodsExpression: (default_enis - 1) * (ips_per_eni - 1) + 2\n"
        "    config:\n      systemReserved:\n        memory: 300Mi\n"
        "    flags:\n    - --node-labels=from-user=yes\n"))),
]


def _as(taints: Any) -> set[tuple[str, str, str]]:
    return {(t.key, t.value, t.effect) for t in taints}


def sim_kubelet(family: str, text: str, instance_type: str) -> nodeboot.NodeKubelet:
    facts = InstanceFacts.from_ec2(INSTANCE_TYPES[instance_type])
    boot = userdata.parse(text)
    assert boot.family == family and not boot.refusal
    return nodeboot.resolve(boot, family, facts.vcpus, facts.max_enis, facts.ipv4_per_eni)


def assert_same_kubelet(sim: nodeboot.NodeKubelet, spec: Any) -> None:
    """Field by field, the simulation's kubelet against the real boot's."""
    config = spec.kubelet_config
    assert sim.max_pods == config["maxPods"]
    assert sim.kube_reserved == config["kubeReserved"]
    assert sim.system_reserved == config.get("systemReserved", {})
    assert sim.eviction_hard == config.get("evictionHard", cb.KUBELET_DEFAULT_EVICTION)
    assert sim.pods_per_core == config.get("podsPerCore")
    assert sim.labels == spec.node_labels
    assert _as(sim.taints) == _as(spec.register_with_taints)
    for field, value in sim.settings.items():
        assert config.get(field) == value, field


@needs_nodeadm
@pytest.mark.parametrize(("name", "instance_type", "boot"), SHAPES, ids=[s[0] for s in SHAPES])
def test_the_simulation_reads_carpools_al2023_user_data_as_the_real_nodeadm(name, instance_type, boot):
    text = render("al2023", boot)
    spec = cb.node_spec(instance(instance_type), text.encode(), INSTANCE_TYPES[instance_type])
    assert_same_kubelet(sim_kubelet("al2023", text, instance_type), spec)


@pytest.mark.parametrize(("name", "instance_type", "boot"),
                         [s for s in SHAPES if s[0] != "user-nodeconfig"], ids=[s[0] for s in SHAPES[:-1]])
def test_the_simulation_reads_carpools_bottlerocket_settings_as_bottlerocket(name, instance_type, boot):
    text = render("bottlerocket", boot)
    spec = cb.node_spec(instance(instance_type), text.encode(), INSTANCE_TYPES[instance_type])
    assert_same_kubelet(sim_kubelet("bottlerocket", text, instance_type), spec)


@needs_nodeadm
def test_nodeadm_gives_the_node_its_identity_from_the_instance():
    spec = cb.node_spec(instance("m5.xlarge"), render("al2023", carpool_sized(BARE, "m5.xlarge", 58)).encode(),
                        INSTANCE_TYPES["m5.xlarge"], volume_gib={"/dev/xvda": 80})
    assert spec.name == "ip-10-0-7-9.us-west-2.compute.internal" and spec.node_ip == "10.0.7.9"
    assert spec.provider_id == spec.kubelet_config["providerID"] == "aws:///us-west-2b/i-0123456789abcdef0"
    assert spec.kubelet_config["clusterDNS"] == ["10.100.0.10"]  # the tenth address of the service CIDR
    assert spec.machine.cpu_millis == 4000 and spec.machine.ephemeral_storage_bytes == 80 * 2**30
    assert spec.machine.memory_bytes == (16384 - 984) * _MIB  # 6 % of 16 GiB (rounded up) to the kernel
    assert Taint("karpenter.sh/unregistered", "", "NoExecute") in spec.register_with_taints


@needs_nodeadm
def test_nodeadms_instance_id_naming_gate_names_the_node_by_its_instance():
    boot = replace(BARE, user_data=("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n"
                                    "  featureGates:\n    InstanceIdNodeName: true\n"))
    text = render("al2023", boot)
    spec = cb.node_spec(instance("m5.large"), text.encode(), INSTANCE_TYPES["m5.large"])
    assert spec.name == "i-0123456789abcdef0" and spec.node_ip == "10.0.7.9"
    # the simulation named such a node by its private DNS name
    assert sim_kubelet("al2023", text, "m5.large").name_by_instance_id
    assert not sim_kubelet("al2023", render("al2023", BARE), "m5.large").name_by_instance_id


@needs_nodeadm
def test_nodeadm_reserves_memory_for_its_own_max_pods_when_the_user_data_sets_only_max_pods():
    text = ("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: demo\n"
            "    apiServerEndpoint: https://127.0.0.1:6443\n    certificateAuthority: Q0E=\n"
            "    cidr: 10.100.0.0/16\n  kubelet:\n    config:\n      maxPods: 110\n")
    spec = cb.node_spec(instance("m5.large"), text.encode(), INSTANCE_TYPES["m5.large"])
    assert spec.kubelet_config["maxPods"] == 110 and spec.kubelet_config["kubeReserved"]["memory"] == "574Mi"
    assert_same_kubelet(sim_kubelet("al2023", text, "m5.large"), spec)


@needs_nodeadm
def test_nodeadm_refuses_a_node_config_without_a_cluster():
    text = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      maxPods: 9\n"
    with pytest.raises(cb.BootError, match="nodeadm validation"):
        cb.node_spec(instance("m5.large"), text.encode(), INSTANCE_TYPES["m5.large"])


@needs_nodeadm
def test_user_flags_come_after_nodeadms_and_win():
    boot = replace(BARE, user_data=("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n"
                                    "    flags:\n    - --max-pods=17\n    - --kube-reserved=cpu=1\n"))
    spec = cb.node_spec(instance("m5.large"), render("al2023", boot).encode(), INSTANCE_TYPES["m5.large"])
    assert spec.kubelet_config["maxPods"] == 17
    assert spec.kubelet_config["kubeReserved"] == {"cpu": "1"}  # a map flag replaces the file's map


# -- the kubelet's merge rules and the machine, without nodeadm ------------------------------------------
def test_drop_ins_merge_maps_per_key_and_replace_lists():
    merged = cb.json_merge({"evictionHard": {"a": "1", "b": "2"}, "clusterDNS": ["x", "y"], "maxPods": 5},
                           {"evictionHard": {"b": "3"}, "clusterDNS": ["z"]})
    assert merged == {"evictionHard": {"a": "1", "b": "3"}, "clusterDNS": ["z"], "maxPods": 5}


def test_repeated_map_flags_merge_and_repeated_taint_flags_keep_the_last():
    config: dict[str, Any] = {"kubeReserved": {"cpu": "80m", "memory": "1Gi"}}
    labels, identity = cb.apply_flags(config, ["--node-labels=a=1", "--kube-reserved=cpu=1", "--node-labels", "b=2",
                                     "--kube-reserved=memory=2Gi", "--register-with-taints=x=y:NoSchedule",
                                     "--register-with-taints=z:NoExecute", "--max-pods=3",
                                     "--hostname-override=n1", "--hostname-override=n2"])
    assert labels == {"a": "1", "b": "2"} and identity == {"hostname-override": "n2"}
    assert config["kubeReserved"] == {"cpu": "1", "memory": "2Gi"}
    assert config["registerWithTaints"] == [{"key": "z", "effect": "NoExecute"}] and config["maxPods"] == 3


def test_bottlerocket_reserves_cpu_as_schnauzer_does():
    assert [cb.bottlerocket_cpu_reserved(n) for n in (1, 2, 3, 4, 5, 6, 47, 48)] == \
        ["60m", "70m", "75m", "80m", "82m", "85m", "187m", "190m"]


def test_bottlerocket_without_eviction_hard_leaves_the_kubelets_defaults():
    spec = cb.node_spec(instance("m5.large"), render("bottlerocket", BARE).encode(), INSTANCE_TYPES["m5.large"],
                        volume_gib={"/dev/xvda": 4, "/dev/xvdb": 50})
    assert "evictionHard" not in spec.kubelet_config and spec.kubelet_config["maxPods"] == 29
    assert spec.machine.ephemeral_storage_bytes == 50 * 2**30  # the data volume, not the 4 GiB root


def test_bottlerocket_refuses_a_reserved_key_it_does_not_model():
    text = render("bottlerocket", BARE) + '\n[settings.kubernetes.system-reserved]\npid = "100"\n'
    with pytest.raises(cb.BootError, match="pid"):
        cb.node_spec(instance("m5.large"), text.encode(), INSTANCE_TYPES["m5.large"])


def test_arm64_memory_loses_the_cma_area_and_the_kernels_share():
    m = cb.machine(INSTANCE_TYPES["c6g.large"], "bottlerocket", 20)
    assert m.memory_bytes == (4096 - 64 - 384) * _MIB  # ceil(9.5 % of 4032) and m.cpu_millis == 2000


def test_user_data_of_no_known_format_stops_the_boot():
    with pytest.raises(cb.BootError):
        cb.user_data_family(b"#!/bin/bash\necho hello\n")


# -- across instance types ---------------------------------------------------------------------------------
def _nodeadm_table() -> set[str]:
    path = cb.NODEADM_HOME / "src" / "nodeadm" / "internal" / "kubelet" / "instance-info.jsonl"
    return {json.loads(line)["instanceType"] for line in path.read_text().splitlines() if line.strip()} \
        if path.exists() else set()


#: every 40th instance type local EC2 knows (about 35, all families and sizes), and one of each GPU maker
SAMPLE = sorted(INSTANCE_TYPES)[::40] + ["p4d.24xlarge", "inf2.xlarge", "g5g.xlarge", "trn1.2xlarge"]


@needs_nodeadm
@pytest.mark.parametrize("instance_type", SAMPLE)
def test_the_simulation_sizes_each_instance_type_as_the_real_nodeadm(instance_type):
    """The ENI-limited max pods, nodeadm's cpu bands and its memory reservation, with nothing set."""
    text = render("al2023", BARE)
    spec = cb.node_spec(instance(instance_type), text.encode(), INSTANCE_TYPES[instance_type])
    assert_same_kubelet(sim_kubelet("al2023", text, instance_type), spec)


@needs_nodeadm
def test_nodeadm_asks_local_ec2_for_a_type_its_table_lacks():
    """nodeadm's embedded table lags EC2: for a newer type it calls DescribeInstanceTypes, and so reaches
    the same ENI formula the simulation applies to EC2's record."""
    missing = sorted(set(INSTANCE_TYPES) - _nodeadm_table())
    if not missing:
        pytest.skip("nodeadm's table holds every instance type local EC2 knows")
    instance_type = missing[0]
    text = render("al2023", BARE)
    with LocalAws(export=False) as aws:
        spec = cb.node_spec(instance(instance_type), text.encode(), INSTANCE_TYPES[instance_type],
                            ec2_endpoint=aws.endpoint)
    assert spec.kubelet_config["maxPods"] == cb.eni_max_pods(INSTANCE_TYPES[instance_type])
    assert_same_kubelet(sim_kubelet("al2023", text, instance_type), spec)
    offline = cb.node_spec(instance(instance_type), text.encode(), INSTANCE_TYPES[instance_type])
    assert offline.kubelet_config["maxPods"] == 110  # nodeadm's fallback when EC2 does not answer


_CLUSTER = {"name": "demo", "apiServerEndpoint": "https://127.0.0.1:6443", "certificateAuthority": "Q0E=",
            "cidr": "10.100.0.0/16"}


@needs_nodeadm
@pytest.mark.parametrize("missing", ["name", "apiServerEndpoint", "certificateAuthority", "cidr"])
def test_the_simulation_refuses_the_node_configs_nodeadm_refuses(missing):
    """nodeadm init validates the merged NodeConfig before it configures the kubelet: without the cluster's
    name, endpoint, CA or service CIDR the node never joins. (The simulation let such a node join.)"""
    cluster = "".join(f"    {k}: {v}\n" for k, v in _CLUSTER.items() if k != missing)
    text = f"apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n{cluster}"
    with pytest.raises(cb.BootError, match="nodeadm validation") as real:
        cb.node_spec(instance("m5.large"), text.encode(), INSTANCE_TYPES["m5.large"])
    sim = userdata.parse(text).refusal
    assert sim and sim.removeprefix("nodeadm: ") in str(real.value)
