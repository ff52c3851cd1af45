"""Hollow kubelets booted from a NodeSpec, on a real API server (Node,RBAC + NodeRestriction) and the real
node lifecycle controller. Each test skips, naming what to build, when the binaries are absent:
`tests/realcluster/patches/` (PATCH_DIR of ../shared/kube-control-plane/build.sh) for the patched kubemark, `../shared/kube-*/build.sh` for the control plane."""

from __future__ import annotations

import json
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tests.realcluster import kubelets
from tests.realcluster.controlplane import ControlPlane, require_binaries
from tests.realcluster.kubelets import HollowKubelets, WholeCoresOnly
from tests.realcluster.node_spec import Machine, NodeSpec, Taint

from carpool import quantity

GIB = 2**30
#: short, so a stopped kubelet's Node goes Unknown within the test; twice the lease renewal (10 s) so a
#: running one on a busy 2-core machine does not
GRACE_SECONDS = 20.0
REGISTER_SECONDS = 90.0

#: an m5.xlarge as AL2023's nodeadm would boot it for carpool (maxPods and kubeReserved by EKS's formulas)
CONFIG: dict[str, Any] = {
    "maxPods": 58,
    "kubeReserved": {"cpu": "80m", "memory": "893Mi", "ephemeral-storage": "1Gi"},
    "systemReserved": {"cpu": "100m", "memory": "100Mi"},
    "evictionHard": {"memory.available": "100Mi", "nodefs.available": "10%"},
    "clusterDNS": ["10.100.0.10"], "clusterDomain": "cluster.local", "cgroupDriver": "systemd",
}


def spec(name: str, ip: str, **changes: Any) -> NodeSpec:
    base: dict[str, Any] = dict(
        name=name, provider_id=f"aws:///us-east-1a/i-0{abs(hash(name)) % 16**16:016x}", node_ip=ip,
        machine=Machine(cpu_millis=4000, memory_bytes=16 * GIB, ephemeral_storage_bytes=20 * GIB),
        kubelet_config=CONFIG,
        node_labels={"karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": "m5.xlarge",
                     "topology.kubernetes.io/zone": "us-east-1a"},
        register_with_taints=(Taint("karpenter.sh/unregistered", "", "NoExecute"),))
    return NodeSpec(**{**base, **changes})


# --- the formula, as the kubelet documents it -----------------------------------------------------------


def threshold(value: str, capacity: int) -> int:
    """An eviction threshold in base units: a quantity, or a percentage of capacity. The kubelet keeps the
    percentage as a float32 (`evictionapi.ThresholdValue.Percentage`) and truncates the product."""
    if value.endswith("%"):
        (fraction,) = struct.unpack("f", struct.pack("f", float(value[:-1]) / 100))
        return int(capacity * fraction)
    return quantity.to_int(value)


def expected_allocatable(node_spec: NodeSpec) -> dict[str, int]:
    """Allocatable = capacity - kubeReserved - systemReserved - hard eviction thresholds
    (kubernetes.io/docs/tasks/administer-cluster/reserve-compute-resources/); cpu in millicores."""
    cfg, m = node_spec.kubelet_config, node_spec.machine
    capacity = {"cpu": m.cpu_millis, "memory": m.memory_bytes, "ephemeral-storage": m.ephemeral_storage_bytes}
    signals = {"memory": "memory.available", "ephemeral-storage": "nodefs.available"}
    result = {}
    for name, cap in capacity.items():
        reserved = sum(quantity.resource_value(name, cfg.get(part, {}).get(name, "0"))
                       for part in ("kubeReserved", "systemReserved"))
        evict = cfg.get("evictionHard", {}).get(signals.get(name, ""), "0")
        result[name] = cap - reserved - (threshold(evict, cap) if name in signals else 0)
    return result


def values(resources: dict[str, str]) -> dict[str, int]:
    return {name: quantity.resource_value(name, text) for name, text in resources.items()}


# --- fixtures -------------------------------------------------------------------------------------------


def require_kubelets() -> None:
    require_binaries(("etcd", "kube-apiserver", "kube-controller-manager"))
    reason = kubelets.skip_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    """The API server and the controller manager (its node lifecycle controller); no scheduler needed."""
    require_kubelets()
    with ControlPlane(scheduler=False, node_monitor_grace_seconds=GRACE_SECONDS) as control_plane:
        yield control_plane


@pytest.fixture
def nodes(plane: ControlPlane, tmp_path: Any) -> Iterator[HollowKubelets]:
    with HollowKubelets(plane.endpoint, plane.ca_file, plane.ca_key, run_dir=tmp_path) as started:
        yield started


def wait_for(what: str, probe: Callable[[], Any], timeout: float, log: Callable[[], str] = str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}\n{log()[-kubelets.LOG_TAIL_CHARS:]}")


def get_node(plane: ControlPlane, name: str) -> dict[str, Any] | None:
    response = plane.request("GET", f"/api/v1/nodes/{name}")
    return response.json() if response.status_code == 200 else None


def ready_status(node: dict[str, Any]) -> str:
    return next((c["status"] for c in node["status"].get("conditions", []) if c["type"] == "Ready"), "")


# --- tests ----------------------------------------------------------------------------------------------


def test_node_registers_as_the_instance(plane: ControlPlane, nodes: HollowKubelets) -> None:
    node_spec = spec("ip-10-0-1-2.ec2.internal", "10.0.1.2")
    kubelet = nodes.start(node_spec)
    node = wait_for("the Node", lambda: get_node(plane, node_spec.name), REGISTER_SECONDS, kubelet.log)

    status = node["status"]
    m = node_spec.machine
    assert values(status["capacity"]) == {"cpu": m.cpu_millis, "memory": m.memory_bytes,
                                          "ephemeral-storage": m.ephemeral_storage_bytes, "pods": 58}
    assert values(status["allocatable"]) == {**expected_allocatable(node_spec), "pods": 58}
    assert node["spec"]["providerID"] == node_spec.provider_id
    assert {"type": "InternalIP", "address": "10.0.1.2"} in status["addresses"]
    assert {"type": "Hostname", "address": node_spec.name} in status["addresses"]
    labels = node["metadata"]["labels"]
    assert {k: labels.get(k) for k in node_spec.node_labels} == node_spec.node_labels
    assert labels["kubernetes.io/hostname"] == node_spec.name
    assert {"key": "karpenter.sh/unregistered", "effect": "NoExecute"} in node["spec"]["taints"]
    assert nodes.names == [node_spec.name]


def test_config_file_values_are_the_kubelets(plane: ControlPlane, nodes: HollowKubelets) -> None:
    """maxPods and registerWithTaints from the file alone (no flags), percentages of memory too."""
    config = {**CONFIG, "maxPods": 17, "evictionHard": {"memory.available": "5%"},
              "registerWithTaints": [{"key": "example.com/boot", "value": "x", "effect": "NoSchedule"}]}
    node_spec = spec("ip-10-0-1-3.ec2.internal", "10.0.1.3", kubelet_config=config, register_with_taints=(),
                     machine=Machine(cpu_millis=2000, memory_bytes=8 * GIB, ephemeral_storage_bytes=80 * GIB))
    kubelet = nodes.start(node_spec)
    node = wait_for("the Node", lambda: get_node(plane, node_spec.name), REGISTER_SECONDS, kubelet.log)
    assert values(node["status"]["allocatable"]) == {**expected_allocatable(node_spec), "pods": 17}
    assert {"key": "example.com/boot", "value": "x", "effect": "NoSchedule"} in node["spec"]["taints"]


#: the KubeletConfiguration AL2023's nodeadm writes (`internal/kubelet/config.go` defaultKubeletSubConfig,
#: with the per-instance fields it adds): fields newer than this kubelet (containerRuntimeEndpoint) are
#: dropped by its lenient decoding, as a v1.24 kubelet would
NODEADM_CONFIG: dict[str, Any] = {
    "address": "0.0.0.0",
    "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True, "cacheTTL": "2m0s"},
                       "x509": {"clientCAFile": "/etc/kubernetes/pki/ca.crt"}},
    "authorization": {"mode": "Webhook", "webhook": {"cacheAuthorizedTTL": "5m0s", "cacheUnauthorizedTTL": "30s"}},
    "cgroupDriver": "systemd", "cgroupRoot": "/", "clusterDomain": "cluster.local", "clusterDNS": ["10.100.0.10"],
    "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
    "evictionHard": {"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%"},
    "featureGates": {"RotateKubeletServerCertificate": True}, "hairpinMode": "hairpin-veth",
    "protectKernelDefaults": True, "readOnlyPort": 0, "logging": {"verbosity": 2},
    "serializeImagePulls": False, "serverTLSBootstrap": True,
    "tlsCipherSuites": ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_RSA_WITH_AES_256_GCM_SHA384"],
    "kubeReserved": {"cpu": "70m", "ephemeral-storage": "1Gi", "memory": "442Mi"},
    "kubeReservedCgroup": "/runtime", "systemReservedCgroup": "/system", "maxPods": 17,
    "providerID": "aws:///us-east-1b/i-0fedcba9876543210",
    "shutdownGracePeriod": "2m30s", "shutdownGracePeriodCriticalPods": "30s",
}


def test_nodeadm_configuration_boots(plane: ControlPlane, nodes: HollowKubelets) -> None:
    node_spec = spec("ip-10-0-2-9.ec2.internal", "10.0.2.9", kubelet_config=NODEADM_CONFIG,
                     provider_id=NODEADM_CONFIG["providerID"],
                     machine=Machine(cpu_millis=2000, memory_bytes=8 * GIB, ephemeral_storage_bytes=20 * GIB))
    kubelet = nodes.start(node_spec)
    node = wait_for("the Node", lambda: get_node(plane, node_spec.name), REGISTER_SECONDS, kubelet.log)
    assert values(node["status"]["allocatable"]) == {**expected_allocatable(node_spec), "pods": 17}
    assert node["spec"]["providerID"] == NODEADM_CONFIG["providerID"]


def test_restricted_label_is_refused_at_start_up(plane: ControlPlane, nodes: HollowKubelets) -> None:
    """The real kubelet refuses kubernetes.io labels outside its allowed set before it registers."""
    node_spec = spec("ip-10-0-1-4.ec2.internal", "10.0.1.4",
                     node_labels={"node-role.kubernetes.io/worker": "", "karpenter.sh/nodepool": "default"})
    kubelet = nodes.start(node_spec)
    assert kubelet.wait_exit(60) not in (None, 0), kubelet.log()[-2000:]
    assert "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels" in kubelet.log()
    assert "node-role.kubernetes.io/worker" in kubelet.log()
    assert get_node(plane, node_spec.name) is None
    assert nodes.names == []


def test_invalid_configuration_is_refused(plane: ControlPlane, nodes: HollowKubelets) -> None:
    """The kubelet's validation of its configuration file, and the container manager's refusal of
    reservations beyond the machine's capacity, both end the kubelet as on a real node."""
    invalid = nodes.start(spec("ip-10-0-1-5.ec2.internal", "10.0.1.5",
                               kubelet_config={**CONFIG, "nodeLeaseDurationSeconds": -1}))
    too_big = nodes.start(spec("ip-10-0-1-6.ec2.internal", "10.0.1.6",
                               kubelet_config={**CONFIG, "kubeReserved": {"memory": "17Gi"}}))
    assert invalid.wait_exit(60) not in (None, 0), invalid.log()[-2000:]
    assert "nodeLeaseDurationSeconds must be greater than 0" in invalid.log()
    assert too_big.wait_exit(90) not in (None, 0), too_big.log()[-2000:]
    assert "invalid Node Allocatable configuration" in too_big.log()


def test_node_identity_is_held_to_node_restriction(plane: ControlPlane, nodes: HollowKubelets) -> None:
    """The kubelet's credentials are `system:node:NAME`: the API server lets it change only its own Node,
    and not restricted labels on it (NodeRestriction, as on EKS)."""
    node_spec = spec("ip-10-0-1-7.ec2.internal", "10.0.1.7")
    kubelet = nodes.start(node_spec)
    wait_for("the Node", lambda: get_node(plane, node_spec.name), REGISTER_SECONDS, kubelet.log)
    other = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ip-10-0-9-9.ec2.internal"}}
    assert plane.request("POST", "/api/v1/nodes", other).status_code == 201

    def label(node: str, label_text: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["kubectl", "--kubeconfig", str(kubelet.kubeconfig), "label", "node", node,
                               label_text], capture_output=True, text=True, timeout=60)

    own = label(node_spec.name, "node-restriction.kubernetes.io/tier=x")
    assert own.returncode != 0 and "forbidden" in own.stderr.lower(), own.stderr
    foreign = label("ip-10-0-9-9.ec2.internal", "example.com/x=y")
    assert foreign.returncode != 0 and "forbidden" in foreign.stderr.lower(), foreign.stderr
    allowed = label(node_spec.name, "example.com/x=y")
    assert allowed.returncode == 0, allowed.stderr


def test_stopped_kubelet_stops_heartbeats(plane: ControlPlane, nodes: HollowKubelets) -> None:
    """A terminated instance: its Lease stops renewing and the node lifecycle controller marks the Node
    Ready=Unknown after the grace period."""
    node_spec = spec("ip-10-0-1-8.ec2.internal", "10.0.1.8")
    kubelet = nodes.start(node_spec)
    wait_for("Ready=True", lambda: (n := get_node(plane, node_spec.name)) and ready_status(n) == "True",
             REGISTER_SECONDS, kubelet.log)
    lease_path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node_spec.name}"
    nodes.stop(node_spec.name)
    assert not kubelet.alive() and nodes.names == []
    renewed = plane.request("GET", lease_path).json()["spec"]["renewTime"]
    node = wait_for("Ready=Unknown", lambda: (n := get_node(plane, node_spec.name)) and
                    ready_status(n) == "Unknown" and n, GRACE_SECONDS + 60)
    assert plane.request("GET", lease_path).json()["spec"]["renewTime"] == renewed
    assert any(t["key"] == "node.kubernetes.io/unreachable" for t in node["spec"].get("taints", [])), node["spec"]


# --- the command line (no binaries needed) ----------------------------------------------------------------


def test_command_line_carries_the_spec(tmp_path: Any) -> None:
    node_spec = spec("ip-10-0-1-2.ec2.internal", "10.0.1.2")
    args = kubelets.kubelet_args(node_spec, binary=tmp_path / "kubemark", kubeconfig=tmp_path / "k",
                                 config_file=tmp_path / "c.json", port=12345)
    assert "--machine-cpu=4" in args and f"--machine-memory={16 * GIB}" in args
    assert f"--provider-id={node_spec.provider_id}" in args and "--node-ip=10.0.1.2" in args
    assert "--register-with-taints=karpenter.sh/unregistered=:NoExecute" in args
    assert ("--node-labels=karpenter.sh/nodepool=default,node.kubernetes.io/instance-type=m5.xlarge,"
            "topology.kubernetes.io/zone=us-east-1a") in args
    assert not any(a.startswith("--max-pods") for a in args)  # the configuration's, not a flag's
    document = json.loads(kubelets.config_document(node_spec))
    assert document["kind"] == "KubeletConfiguration" and document["maxPods"] == 58


def test_fractional_cores_are_refused() -> None:
    with pytest.raises(WholeCoresOnly):
        kubelets.machine_flags(spec("n", "10.0.0.1", machine=Machine(1500, GIB, GIB)))


def test_formula_counts_float32_percentages() -> None:
    """10 % of 20Gi is 2147483680 bytes to the kubelet (float32 0.1), not 2147483648."""
    assert threshold("10%", 20 * GIB) == 2147483680
    assert threshold("100Mi", GIB) == 100 * 2**20
