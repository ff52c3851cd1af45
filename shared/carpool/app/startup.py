"""How long capacity took to come, as the functions see it: Karpenter's pod startup and node registration
durations (`karpenter_pods_startup_duration_seconds`, the nodeclaim registration histograms), cut at the
two points carpool itself acts on.

- `PodPendingToLaunchSeconds` (provisioner): from the kube-scheduler marking a pod Unschedulable (its `PodScheduled` condition's `lastTransitionTime`, on the cluster's copy of the pod the
  provisioner confirmed) to the CreateFleet answer that launched its claim's instance: the watcher's
  period, the bus and queue, the batch window and carpool's own work.
- `NodeRegistrationSeconds` (registrar): from the Node object's `creationTimestamp` (the kubelet joined) to the write that lifted `karpenter.sh/unregistered`: the watcher noticing the node, the queue
  and the registrar's write.

EC2's boot and the kubelet's start-up lie between the two and are no autoscaler's to shorten. Each is one
series for the cluster; the nodepool is a property of the log document (`observability.PROPERTIES`), as
a pool, pod or node dimension would be one more billed series each.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from carpool import lifecycle, observability
from carpool.api.k8s import Node, Pod
from carpool.state.models import Claim


def pending_since(pod: Pod) -> datetime | None:
    """When the kube-scheduler marked `pod` Unschedulable, or None when it is not (a running pod a
    replacement is launched for) or the time is not known."""
    cond = pod.condition("PodScheduled")
    if cond is None or not pod.is_unschedulable():
        return None
    return cond.last_transition_time


def pending_to_launch(pods: Iterable[Pod], claims: Iterable[Claim], launched_at: Mapping[str, datetime]) -> None:
    """`PodPendingToLaunchSeconds` of every pending pod of the launched `claims`, each claim's pods from
    when its CreateFleet answered (`launched_at` by claim name): one data point per pool with all its
    pods' values (EMF carries a hundred values a document)."""
    by_key = {p.key: p for p in pods}
    waited: dict[str, list[float]] = {}
    for claim in claims:
        answered = launched_at.get(claim.name)
        if answered is None:
            continue
        for key in claim.pods:
            since = pending_since(by_key[key]) if key in by_key else None
            if since is not None:
                waited.setdefault(claim.nodepool, []).append(max(0.0, (answered - since).total_seconds()))
    for pool, values in sorted(waited.items()):
        observability.durations("PodPendingToLaunchSeconds", values, nodepool=pool)


def node_registered(before: Node, after: Node, nodepool: str, lifted_at: datetime) -> None:
    """`NodeRegistrationSeconds` when the registrar's write took the unregistered taint off (a node that
    joined without it, or a repeated registration, is not a registration)."""
    created = before.metadata.creation_timestamp
    if created is None or not lifecycle.has_unregistered_taint(before) or lifecycle.has_unregistered_taint(after):
        return
    observability.seconds("NodeRegistrationSeconds", max(0.0, (lifted_at - created).total_seconds()),
                          nodepool=nodepool)
