"""Karpenter's NodePool hash as carpool computes it (`carpool.karpenter_hash`): the figure Karpenter wrote
on a real NodePool, and what the hash must and must not follow (hashstructure's `hash:"ignore"` fields,
sets, zero values)."""

from __future__ import annotations

import copy
from typing import Any

from carpool.karpenter_hash import nodepool_hash

#: EKS Auto Mode's `general-purpose` NodePool as `kubectl get nodepool -o yaml` shows it (Karpenter v1,
#: hash version v3), with the hash Karpenter's hash controller wrote on it: `karpenter.sh/nodepool-hash:
#: "4012513481623584108"` (AWS's EKS Auto Mode workshop and documentation print the same object)
GENERAL_PURPOSE: dict[str, Any] = {"spec": {"template": {"metadata": {}, "spec": {
    "expireAfter": "336h",
    "nodeClassRef": {"group": "eks.amazonaws.com", "kind": "NodeClass", "name": "default"},
    "requirements": [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "eks.amazonaws.com/instance-category", "operator": "In", "values": ["c", "m", "r"]},
        {"key": "eks.amazonaws.com/instance-generation", "operator": "Gt", "values": ["4"]},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}],
    "terminationGracePeriod": "24h0m0s"}}}}


def edited(**spec: Any) -> dict[str, Any]:
    out = copy.deepcopy(GENERAL_PURPOSE)
    out["spec"]["template"]["spec"].update(spec)
    return out


def test_the_hash_karpenter_wrote_on_a_real_nodepool() -> None:
    assert nodepool_hash(GENERAL_PURPOSE) == "4012513481623584108"
    assert nodepool_hash(edited(terminationGracePeriod="24h")) == "4012513481623584108"  # the same duration


def test_requirements_are_not_hashed_but_what_a_node_is_launched_with_is() -> None:
    assert nodepool_hash(edited(requirements=[])) == nodepool_hash(GENERAL_PURPOSE)  # hash:"ignore"
    for change in ({"expireAfter": "720h"}, {"expireAfter": "Never"}, {"terminationGracePeriod": "48h"},
                   {"taints": [{"key": "team", "effect": "NoSchedule"}]},
                   {"nodeClassRef": {"group": "eks.amazonaws.com", "kind": "NodeClass", "name": "other"}}):
        assert nodepool_hash(edited(**change)) != nodepool_hash(GENERAL_PURPOSE), change
    labelled = copy.deepcopy(GENERAL_PURPOSE)
    labelled["spec"]["template"]["metadata"] = {"labels": {"team": "a"}}
    assert nodepool_hash(labelled) != nodepool_hash(GENERAL_PURPOSE)


def test_taints_are_a_set_and_labels_a_map() -> None:
    a, b = {"key": "a", "effect": "NoSchedule"}, {"key": "b", "value": "1", "effect": "NoExecute"}
    assert nodepool_hash(edited(taints=[a, b])) == nodepool_hash(edited(taints=[b, a]))
    assert nodepool_hash(edited(taints=[a])) != nodepool_hash(edited(startupTaints=[a]))
    one, other = copy.deepcopy(GENERAL_PURPOSE), copy.deepcopy(GENERAL_PURPOSE)
    one["spec"]["template"]["metadata"] = {"labels": {"x": "1", "y": "2"}}
    other["spec"]["template"]["metadata"] = {"labels": {"y": "2", "x": "1"}}
    assert nodepool_hash(one) == nodepool_hash(other)


def test_what_this_walk_cannot_reproduce_has_no_hash() -> None:
    assert nodepool_hash(edited(taints=[{"key": "a", "effect": "NoSchedule", "timeAdded": "2026-01-01T00:00:00Z"}])) is None
    assert nodepool_hash(edited(expireAfter="1.5h")) is None
