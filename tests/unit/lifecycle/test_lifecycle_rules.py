"""Registration and initialization rules (`carpool.lifecycle`) and the node patch every `Cluster` applies
(`carpool.ports.NodePatch`), as plain data."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from carpool import labels, lifecycle
from carpool.api.k8s import Node
from carpool.api.nodepool import NodePool
from carpool.ports import NodePatch
from carpool.state.models import Claim, ClaimStatus
from carpool.taints import Taint

NOW = datetime(2026, 5, 1, tzinfo=UTC)
POOL = NodePool.model_validate({
    "metadata": {"name": "gpu"},
    "spec": {"template": {
        "metadata": {"labels": {"team": "ml"}, "annotations": {"example.com/a": "1"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": [], "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
                 "startupTaints": [{"key": "example.com/agent", "effect": "NoSchedule"}]}}},
})


def claim(**kw: Any) -> Claim:
    base: dict[str, Any] = dict(name="gpu-1", nodepool="gpu", nodeclass="default", created_at=NOW,
                                status=ClaimStatus.LAUNCHED, instance_id="i-1", instance_type="g5.xlarge",
                                zone="us-east-1a", capacity_type="on-demand", image_id="ami-1",
                                requested={"cpu": 1000, "pods": 1, "nvidia.com/gpu": 1},
                                labels={"app": "train", "carpool.dev/disruption": "Drifted"})
    return Claim(**{**base, **kw})


def node(*, ready: bool = True, taints: list[dict[str, str]] | None = None, node_labels: dict[str, str] | None = None,
         allocatable: dict[str, str] | None = None) -> Node:
    return Node.model_validate({
        "metadata": {"name": "n", "labels": node_labels or {}},
        "spec": {"providerID": "aws:///us-east-1a/i-1", "taints": taints or []},
        "status": {"allocatable": allocatable or {"cpu": "3", "memory": "14Gi", "pods": "58", "nvidia.com/gpu": "1"},
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    })


# -- NodePatch --------------------------------------------------------------------------------------------
def test_patch_changes_only_what_differs() -> None:
    patch = NodePatch(labels={"a": "1"}, labels_if_absent={"b": "2", "c": "3"}, annotations_if_absent={"x": "y"},
                      remove_taint_keys=frozenset({"gone"}), add_taints=(Taint("t", "NoSchedule", "v"),))
    change = patch.change({"a": "0", "c": "kept"}, {}, [{"key": "gone", "effect": "NoExecute"},
                                                          {"key": "other", "effect": "NoSchedule"}])
    assert change.labels == {"a": "1", "b": "2"}
    assert change.annotations == {"x": "y"}
    assert change.taints == [{"key": "other", "effect": "NoSchedule"}, {"key": "t", "effect": "NoSchedule", "value": "v"}]


def test_patch_already_applied_changes_nothing() -> None:
    patch = NodePatch(labels={"a": "1"}, labels_if_absent={"b": "x"}, remove_taint_keys=frozenset({"gone"}),
                      add_taints=(Taint("t", "NoSchedule"),))
    change = patch.change({"a": "1", "b": "2"}, {}, [{"key": "t", "effect": "NoSchedule", "value": "other"}])
    assert not change and change.taints is None  # a taint matches by key and effect, whatever its value


def test_patch_keeps_what_it_does_not_name_in_the_taint_list() -> None:
    time_added = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "2026-05-01T00:00:00Z"}
    change = NodePatch(add_taints=(Taint("t", "NoSchedule"),)).change({}, {}, [time_added])
    assert change.taints == [time_added, {"key": "t", "effect": "NoSchedule"}]


# -- registration -----------------------------------------------------------------------------------------
def test_registration_patch_lifts_the_unregistered_taint_and_brings_what_the_claim_and_pool_promise() -> None:
    n = node(taints=[{"key": labels.UNREGISTERED_TAINT, "effect": "NoExecute"},
                     {"key": "example.com/agent", "effect": "NoSchedule"}])
    patch = lifecycle.registration_patch(n, claim(), "demo", POOL, {labels.INSTANCE_GPU_COUNT: "1"})
    change = patch.change(n.labels, {}, [t.model_dump(by_alias=True, exclude_none=True) for t in n.spec.taints])
    assert change.labels[labels.REGISTERED] == "true" and change.labels[labels.CLAIM] == "gpu-1"
    assert change.labels[labels.OWNED_BY] == "demo" and change.labels["team"] == "ml" and change.labels["app"] == "train"
    assert change.labels[labels.INSTANCE_GPU_COUNT] == "1" and change.labels[labels.CAPACITY_TYPE] == "on-demand"
    assert not any(k.startswith("carpool.dev/disruption") for k in change.labels)
    assert change.annotations == {"example.com/a": "1"}
    assert change.taints is not None
    assert [(t["key"], t["effect"]) for t in change.taints] == [
        ("example.com/agent", "NoSchedule"), ("nvidia.com/gpu", "NoSchedule")]


def test_startup_taints_are_never_added_back() -> None:
    n = node(taints=[{"key": labels.UNREGISTERED_TAINT, "effect": "NoExecute"}])  # the agent already lifted its taint
    patch = lifecycle.registration_patch(n, claim(), "demo", POOL)
    assert [t.key for t in patch.add_taints] == ["nvidia.com/gpu"]


def test_without_its_nodepool_the_node_is_still_registered() -> None:
    n = node(taints=[{"key": labels.UNREGISTERED_TAINT, "effect": "NoExecute"}])
    patch = lifecycle.registration_patch(n, claim(), "demo", None)
    assert patch.remove_taint_keys == {labels.UNREGISTERED_TAINT} and patch.add_taints == ()
    assert lifecycle.is_registered(node(node_labels={labels.REGISTERED: "true"}))
    assert not lifecycle.is_registered(node(node_labels={labels.REGISTERED: "true"},
                                            taints=[{"key": labels.UNREGISTERED_TAINT, "effect": "NoExecute"}]))


# -- initialization ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("n", "why"), [
    (node(ready=False), "node is not Ready"),
    (node(taints=[{"key": "example.com/agent", "effect": "NoSchedule", "value": "x"}]),
     "startup taint example.com/agent=x:NoSchedule still exists"),
    (node(taints=[{"key": labels.NOT_READY_TAINT, "effect": "NoExecute"}]),
     f"known ephemeral taint {labels.NOT_READY_TAINT}:NoExecute still exists"),
    (node(allocatable={"cpu": "3", "memory": "14Gi", "pods": "58", "nvidia.com/gpu": "0"}),
     "resource nvidia.com/gpu was requested but is not reported by the node yet"),
    (node(), None),
    (node(taints=[{"key": "example.com/agent", "effect": "NoExecute"}]), None),  # another effect: not the startup taint
    (node(taints=[{"key": labels.UNREACHABLE_TAINT, "effect": "NoExecute"}]), None),  # only NoSchedule is ephemeral
])
def test_initialization_checks_in_karpenters_order(n: Node, why: str | None) -> None:
    assert lifecycle.initialization_blocker(n, claim(), POOL.startup_taints()) == why


def test_a_claim_without_extended_requests_does_not_wait_for_devices() -> None:
    n = node(allocatable={"cpu": "3", "memory": "14Gi", "pods": "58"})
    assert lifecycle.initialization_blocker(n, claim(requested={"cpu": 1000, "pods": 1}), []) is None
