"""The Kubernetes Events carpool writes, with Karpenter's reasons and wording, on the objects they concern:
what a Karpenter user sees in `kubectl describe pod` and `kubectl describe node`.

Karpenter writes `Nominated` ("Pod should schedule on: nodeclaim/<name>") and `FailedScheduling` ("Failed to
schedule pod, <why per NodePool>") on pods (kubernetes-sigs/karpenter
`pkg/controllers/provisioning/scheduling/events.go`). carpool writes the same.

An event's name is derived from what it says (object, reason, message), not random as client-go's are:
carpool runs as short-lived functions with no recorder that outlives an invocation, so the same event
written again by the next invocation must find the first and bump its `count` and `lastTimestamp`, as
Kubernetes' event correlator aggregates repeats, instead of piling up a new object each minute.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

NORMAL: Final = "Normal"
WARNING: Final = "Warning"
#: the `source.component` / `reportingComponent` of carpool's events
COMPONENT: Final = "carpool"
#: the API server refuses longer messages (`validation.ValidateEvent`: 1 KiB for events.k8s.io/v1 notes)
MESSAGE_MAX: Final = 1024


@dataclass(frozen=True)
class InvolvedObject:
    kind: str
    name: str
    namespace: str = ""
    uid: str = ""
    api_version: str = "v1"


@dataclass(frozen=True)
class KubeEvent:
    """One event on one object; `name` is stable for what it says (see the module docstring)."""

    involved: InvolvedObject
    type: str
    reason: str
    message: str

    @property
    def namespace(self) -> str:
        """Events live in their object's namespace; a cluster-scoped object's in `default`, as kubectl's."""
        return self.involved.namespace or "default"

    @property
    def name(self) -> str:
        o = self.involved
        digest = hashlib.sha256("\0".join((o.kind, o.namespace, o.name, o.uid, self.reason, self.message))
                                .encode()).hexdigest()[:16]
        return f"{o.name[:200]}.{digest}"


def pod(key: str, uid: str = "") -> InvolvedObject:
    namespace, _, name = key.partition("/")
    return InvolvedObject("Pod", name, namespace, uid)


def nominated(pod_key: str, uid: str, claim: str) -> KubeEvent:
    """Karpenter's `Nominated`: the pod will run on the node coming for this claim."""
    return KubeEvent(pod(pod_key, uid), NORMAL, "Nominated", f"Pod should schedule on: nodeclaim/{claim}")


def failed_scheduling(pod_key: str, uid: str, reasons: Mapping[str, str]) -> KubeEvent:
    """Karpenter's `FailedScheduling`: no NodePool can launch for the pod, with each pool's reason."""
    parts = [why if pool == "*" else f'incompatible with nodepool "{pool}", {why}' for pool, why in sorted(reasons.items())]
    return KubeEvent(pod(pod_key, uid), WARNING, "FailedScheduling", "Failed to schedule pod, " + "; ".join(parts))


def karpenter_controller_active(namespace: str, name: str, uid: str, holder: str) -> KubeEvent:
    """On Karpenter's leader-election Lease while its controller holds it: carpool does nothing until the
    controller stops (`carpool.app.standstill`). Stable for one holder, so repeats bump its `count`."""
    lease = InvolvedObject("Lease", name, namespace, uid, "coordination.k8s.io/v1")
    return KubeEvent(lease, WARNING, "KarpenterControllerActive",
                     f"Karpenter's controller {holder} holds this Lease: carpool launches, registers, drains and "
                     f"terminates nothing while it runs; scale Karpenter's Deployment to 0 "
                     f"(kubectl scale deployment karpenter --namespace {namespace} --replicas 0) to hand over")


def manifest(event: KubeEvent, now: datetime) -> dict[str, Any]:
    """The core/v1 Event to create (count 1, first and last seen now)."""
    o, stamp = event.involved, now.isoformat().replace("+00:00", "Z")
    involved = {"kind": o.kind, "name": o.name, "apiVersion": o.api_version, **({"namespace": o.namespace} if o.namespace else {}),
                **({"uid": o.uid} if o.uid else {})}
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": event.name, "namespace": event.namespace},
        "involvedObject": involved, "type": event.type, "reason": event.reason,
        "message": event.message[:MESSAGE_MAX], "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT, "reportingInstance": COMPONENT,
        "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
    }


def repeated(count: int, now: datetime) -> dict[str, Any]:
    """The merge patch that records one more occurrence of an existing event."""
    return {"count": count + 1, "lastTimestamp": now.isoformat().replace("+00:00", "Z")}


def node(name: str) -> InvolvedObject:
    """A node as events name it: `kubectl describe node` looks events up with the node's *name* as
    `involvedObject.uid` (`ref.UID = types.UID(ref.Name)` in kubectl's node describer, the convention of the
    kubelet's own node events), so that is what carpool writes."""
    return InvolvedObject("Node", name, "", name)


def launched(node_name: str, claim: str, instance: str, instance_type: str, at: datetime | None) -> KubeEvent:
    """The claim's launch, said on its node once the node exists (before, there is no object to say it on:
    carpool has no NodeClaim objects): which instance, of which type, when."""
    when = f" at {at.isoformat().replace('+00:00', 'Z')}" if at is not None else ""
    return KubeEvent(node(node_name), NORMAL, "Launched",
                     f"Status condition transitioned, Type: Launched, Status: True, nodeclaim/{claim} "
                     f"({instance_type}, {instance}){when}")


def registered(node_name: str, claim: str, instance: str, instance_type: str) -> KubeEvent:
    """The node joined for its claim and carpool registered it (unregistered taint lifted, labels synced)."""
    return KubeEvent(node(node_name), NORMAL, "Registered",
                     f"Status condition transitioned, Type: Registered, Status: True, nodeclaim/{claim} "
                     f"({instance_type}, {instance})")


def initialized(node_name: str, claim: str) -> KubeEvent:
    """The node is Ready, its startup taints gone and its resources reported: pods of its claim can run."""
    return KubeEvent(node(node_name), NORMAL, "Initialized",
                     f"Status condition transitioned, Type: Initialized, Status: True, nodeclaim/{claim}")


def disruption_blocked(node_name: str, why: str) -> KubeEvent:
    """Karpenter's `DisruptionBlocked`: a rule applies to the node but it stays, and why (a budget, a
    PodDisruptionBudget, a do-not-disrupt annotation, no room for its pods)."""
    return KubeEvent(node(node_name), NORMAL, "DisruptionBlocked", f"Cannot disrupt Node: {why}")


def disrupting(node_name: str, reason: str, decision: str) -> KubeEvent:
    """The node is being disrupted (Karpenter's `DisruptionTerminating`), with the rule and the decision."""
    return KubeEvent(node(node_name), NORMAL, "DisruptionTerminating", f"Disrupting Node: {reason}: {decision}")


def insufficient_capacity(pod_key: str, uid: str, claim: str, offerings: list[tuple[str, str, str]]) -> KubeEvent:
    """Karpenter's `InsufficientCapacityError` (written on its NodeClaim; carpool has no NodeClaim object,
    so on the pods the claim was for): EC2 had no capacity for the offerings tried, others are tried next."""
    shown = ", ".join(f"{t} ({ct}, {z})" for t, z, ct in sorted(offerings)[:5])
    more = f" and {len(offerings) - 5} more" if len(offerings) > 5 else ""
    return KubeEvent(pod(pod_key, uid), WARNING, "InsufficientCapacityError",
                     f"nodeclaim/{claim}: insufficient capacity for {shown}{more}; launching from other offerings")


def unconsolidatable(node_name: str, why: str) -> KubeEvent:
    """Karpenter's `Unconsolidatable`: the node was looked at for consolidation and is kept, with why (its
    pods fit nowhere cheaper, no cheaper replacement exists...)."""
    return KubeEvent(node(node_name), NORMAL, "Unconsolidatable", why)


def failed_draining(node_name: str, waiting: int) -> KubeEvent:
    """Karpenter's `FailedDraining` (`terminator/events`: `NodeFailedToDrain`): a deleted node's drain left
    pods (a PodDisruptionBudget refused, do-not-disrupt, still terminating); it is tried again."""
    return KubeEvent(node(node_name), WARNING, "FailedDraining",
                     f"Failed to drain node, {waiting} pods are waiting to be evicted")


def termination_grace_period_expiring(node_name: str, deadline: datetime) -> KubeEvent:
    """Karpenter's `TerminationGracePeriodExpiring` on a deleted node whose NodeClaim has a
    terminationGracePeriod: whatever still runs then is deleted, budgets and do-not-disrupt notwithstanding."""
    return KubeEvent(node(node_name), WARNING, "TerminationGracePeriodExpiring",
                     f"All pods will be deleted by {deadline.isoformat().replace('+00:00', 'Z')}")
