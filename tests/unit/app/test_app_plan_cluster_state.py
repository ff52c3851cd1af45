"""`carpool plan` reads the cluster as Karpenter's state does: a node still coming up ignores the taints that
will go, bound DaemonSet pods use their node's room, a node being deleted takes no pods, and synthetic
instance types may carry multi-valued or absent labels and extended resources."""

from __future__ import annotations

from typing import Any

from carpool.api.loader import load
from carpool.app.offline_planning import assemble, plan, synthetic_options
from carpool.scheduling.scheduler import ScheduleOptions

NODECLASS = {
    "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
    "spec": {"role": "R", "amiSelectorTerms": [{"alias": "al2023@latest"}],
             "subnetSelectorTerms": [{"tags": {"k": "v"}}], "securityGroupSelectorTerms": [{"tags": {"k": "v"}}]},
}
TYPES = [{"name": "m.large", "cpu": 4, "memoryMiB": 8192, "pods": 20,
          "offerings": [{"zone": "zone-a", "capacityType": "on-demand", "price": 0.2}]}]


def pool(**template_spec: Any) -> dict[str, Any]:
    spec = {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [], **template_spec}
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"template": {"spec": spec}}}


def node(name: str, labels: dict[str, str], taints: list[dict[str, str]] | None = None,
         cpu: str = "4", **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels, **meta},
            "spec": {"taints": taints or []},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "20"}}}


def pod(name: str, cpu: str = "100m", node_name: str | None = None, owner: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": "o", "uid": "u", "controller": True}]
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def where(docs: list[dict[str, Any]], key: str = "default/p") -> str:
    result = plan(assemble(load(docs), synthetic=TYPES), ScheduleOptions(max_instance_types=None))
    placement = result.placements.get(key)
    assert placement is not None, result.unschedulable
    return placement.target if placement.kind != "claim" else "new claim"


NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}
STARTUP = {"key": "example.com/agent", "value": "starting", "effect": "NoSchedule"}


def test_an_uninitialized_node_of_a_pool_ignores_its_ephemeral_taints() -> None:
    docs = [NODECLASS, pool(), node("n1", {"karpenter.sh/nodepool": "default"}, [NOT_READY]), pod("p")]
    assert where(docs) == "n1"


def test_an_initialized_node_keeps_its_ephemeral_taints() -> None:
    labels = {"karpenter.sh/nodepool": "default", "karpenter.sh/initialized": "true"}
    docs = [NODECLASS, pool(), node("n1", labels, [NOT_READY]), pod("p")]
    assert where(docs) == "new claim"


def test_an_unmanaged_node_keeps_its_taints() -> None:
    docs = [NODECLASS, pool(), node("n1", {}, [NOT_READY]), pod("p")]
    assert where(docs) == "new claim"


def test_an_uninitialized_node_ignores_its_pools_startup_taints_but_not_others() -> None:
    labels = {"karpenter.sh/nodepool": "default"}
    other = {"key": "example.com/other", "value": "x", "effect": "NoSchedule"}
    assert where([NODECLASS, pool(startupTaints=[STARTUP]), node("n1", labels, [STARTUP]), pod("p")]) == "n1"
    assert where([NODECLASS, pool(startupTaints=[STARTUP]), node("n1", labels, [other]), pod("p")]) == "new claim"


def test_a_bound_daemonset_pod_uses_its_nodes_room() -> None:
    docs = [NODECLASS, pool(), node("n1", {}, cpu="2"), pod("ds-1", cpu="1500m", node_name="n1", owner="DaemonSet"),
            pod("p", cpu="1")]
    assert where(docs) == "new claim"
    assert where(docs[:2] + [node("n1", {}, cpu="2"), pod("p", cpu="1")]) == "n1"


def test_a_node_being_deleted_takes_no_pods() -> None:
    deleting = node("n1", {}, deletionTimestamp="2030-01-01T00:00:00Z", finalizers=["karpenter.sh/termination"])
    assert where([NODECLASS, pool(), deleting, pod("p")]) == "new claim"


def test_synthetic_types_take_requirements_and_extended_resources() -> None:
    [option] = synthetic_options([{
        **TYPES[0], "labels": {"size": "large"},
        "requirements": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux", "windows"]},
                         {"key": "gpu", "operator": "DoesNotExist"}],
        "resources": {"example.com/fpga": "2"},
    }])
    os_req = option.requirements["kubernetes.io/os"]
    assert os_req.has("linux") and os_req.has("windows")
    assert option.requirements["gpu"].allows_absent() and not option.requirements["gpu"].has("a100")
    assert option.requirements["size"].has("large")
    assert option.allocatable["example.com/fpga"] == 2 and option.limit_capacity["example.com/fpga"] == 2


def test_a_type_without_a_label_matches_a_pod_that_requires_it_absent() -> None:
    types = [{**TYPES[0], "requirements": [{"key": "example.com/gpu-name", "operator": "DoesNotExist"}]}]
    doc = pod("p")
    doc["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "example.com/gpu-name", "operator": "DoesNotExist"}]}]}}}
    result = plan(assemble(load([NODECLASS, pool(), doc]), synthetic=types))
    assert "default/p" in result.placements, result.unschedulable
