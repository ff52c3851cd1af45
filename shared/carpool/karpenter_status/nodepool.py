"""A NodePool's `status` as Karpenter v1.14.1 core writes it (kubernetes-sigs/karpenter
`pkg/apis/v1/nodepool_status.go`), one part per controller of `pkg/controllers/nodepool/`:

- `counter`: `resources`, what the pool's nodes hold (Karpenter's `BaseResources` cpu, memory, pods,
  ephemeral-storage and nodes, as 0 when none, plus every other resource they have), and `nodes`. The
  figure is carpool's pool usage (`carpool.state.charges`: a launched claim's instance type capacity, a
  registered node's own `status.capacity`), the very figure `spec.limits` are held against, as Karpenter
  holds its limits against this status.
- `validation`: `ValidationSucceeded`, False (`NodePoolValidationFailed`) with what carpool's judgement of
  the object found (`carpool.api.cluster_config`: Karpenter's CRD schema and carpool's models).
- `readiness`: `NodeClassReady`, the class's `Ready` (False with its reason and message), or False
  `NodeClassNotFound` / `NodeClassTerminating` / `NodeClassReadinessUnknown`.
- `registrationhealth`: `NodeRegistrationHealthy` and `nodeClassObservedGeneration`
  (`carpool.karpenter_status.registration`).

`Ready` is the root over ValidationSucceeded and NodeClassReady (NodeRegistrationHealthy is not one of its
dependents in Karpenter either).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from carpool import quantity
from carpool.karpenter_status import registration
from carpool.karpenter_status.conditions import READY, UNKNOWN, ConditionSet
from carpool.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS

__all__ = [
    "BASE_RESOURCES",
    "DEPENDENTS",
    "NODECLASS_READY",
    "VALIDATION_SUCCEEDED",
    "NodePoolFacts",
    "NodePoolStatus",
    "nodepool_status",
    "resource_list",
]

VALIDATION_SUCCEEDED: Final = "ValidationSucceeded"
NODECLASS_READY: Final = "NodeClassReady"
#: what `Ready` is computed from (`NodePool.StatusConditions`)
DEPENDENTS: Final = (VALIDATION_SUCCEEDED, NODECLASS_READY)
NODES: Final = "nodes"
#: the counter's `BaseResources`: always listed, 0 when the pool has none
BASE_RESOURCES: Final = (CPU, MEMORY, PODS, EPHEMERAL_STORAGE, NODES)
#: resources counted in bytes (shown with binary suffixes, as the kubelet reports them)
_BYTES: Final = frozenset({MEMORY, EPHEMERAL_STORAGE})


@dataclass(frozen=True)
class NodePoolFacts:
    """What a NodePool's status is built from."""

    #: the pool's usage (carpool's units: cpu millicores, bytes, counts), `nodes` among them
    usage: Mapping[str, int] = field(default_factory=dict)
    #: the object's own problems (empty: valid)
    problems: Sequence[str] = ()
    #: its EC2NodeClass as it stands after this run's status (None: the cluster has none of that name)
    nodeclass: Mapping[str, Any] | None = None
    #: the registration ring this process keeps for the pool (None: none yet, filled from the condition)
    ring: tuple[bool, ...] | None = None
    #: the pool's claims that registered or were given up since the last run, oldest first
    outcomes: Sequence[registration.Outcome] = ()


@dataclass(frozen=True)
class NodePoolStatus:
    status: dict[str, Any]
    #: the registration ring to keep for the next run
    ring: tuple[bool, ...]


def nodepool_status(obj: Mapping[str, Any], facts: NodePoolFacts, now: datetime) -> NodePoolStatus:
    """The status the NodePool `obj` (as read) should have, and the registration ring after it."""
    before = obj.get("status") or {}
    conditions = ConditionSet(obj, DEPENDENTS, now)
    if facts.problems:
        conditions.set_false(VALIDATION_SUCCEEDED, "NodePoolValidationFailed", "; ".join(facts.problems))
    else:
        conditions.set_true(VALIDATION_SUCCEEDED)
    _nodeclass_ready(conditions, facts.nodeclass)
    status: dict[str, Any] = {"resources": resource_list(facts.usage), "nodes": max(0, int(facts.usage.get(NODES, 0)))}
    ring = facts.ring if facts.ring is not None else registration.hydrated(
        conditions.get(registration.NODE_REGISTRATION_HEALTHY))
    if facts.nodeclass is not None:  # Karpenter's registrationhealth controller waits for the class
        class_generation = int((facts.nodeclass.get("metadata") or {}).get("generation") or 0)
        ring = _registration_health(conditions, before, class_generation, ring, facts.outcomes)
        if class_generation:
            status["nodeClassObservedGeneration"] = class_generation
    elif before.get("nodeClassObservedGeneration"):
        status["nodeClassObservedGeneration"] = before["nodeClassObservedGeneration"]
    status["conditions"] = conditions.conditions()
    return NodePoolStatus(status, ring)


def _nodeclass_ready(conditions: ConditionSet, nodeclass: Mapping[str, Any] | None) -> None:
    """`pkg/controllers/nodepool/readiness/controller.go`."""
    if nodeclass is None:
        conditions.set_false(NODECLASS_READY, "NodeClassNotFound", "NodeClass not found on cluster")
        return
    if (nodeclass.get("metadata") or {}).get("deletionTimestamp"):
        conditions.set_false(NODECLASS_READY, "NodeClassTerminating", "NodeClass is Terminating")
        return
    ready = next((c for c in ((nodeclass.get("status") or {}).get("conditions") or ()) if c.get("type") == READY), None)
    if ready is None or ready.get("status") == UNKNOWN:
        conditions.set_false(NODECLASS_READY, "NodeClassReadinessUnknown", "Node Class Readiness Unknown")
    elif ready.get("status") == "False":
        conditions.set_false(NODECLASS_READY, str(ready.get("reason") or "NodeClassNotReady"), str(ready.get("message") or ""))
    else:
        conditions.set_true(NODECLASS_READY)


def _registration_health(conditions: ConditionSet, before: Mapping[str, Any], class_generation: int,
                         ring: tuple[bool, ...], outcomes: Sequence[registration.Outcome]) -> tuple[bool, ...]:
    """`pkg/controllers/nodepool/registrationhealth/controller.go`: an edit of the pool or its class
    starts over (Unknown, empty ring); then this run's outcomes."""
    current = conditions.get(registration.NODE_REGISTRATION_HEALTHY)
    if (current is None or before.get("nodeClassObservedGeneration") != class_generation
            or current.get("observedGeneration") != conditions.generation):
        conditions.set_unknown(registration.NODE_REGISTRATION_HEALTHY)
        ring = ()
    return registration.apply(conditions, ring, outcomes)


def resource_list(usage: Mapping[str, int]) -> dict[str, str]:
    """carpool's usage as a Kubernetes `ResourceList`: cpu in cores or millicores, bytes with binary
    suffixes, counts as they are; the base resources always present."""
    merged = dict.fromkeys(BASE_RESOURCES, 0)
    merged.update(usage)
    return {name: _quantity(name, value) for name, value in sorted(merged.items())}


def _quantity(name: str, value: int) -> str:
    if name == CPU:
        return quantity.format_cpu(value)
    if name in _BYTES or name.startswith("hugepages-"):
        return quantity.format_bytes(value)
    return str(value)
