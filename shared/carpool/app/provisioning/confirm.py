"""A `Pod Unschedulable` event is a claim about the past; the cluster says whether it still holds.

Events are delivered at least once and late (SQS redelivery, a watcher resync racing a bind, a batch
retried after the node it asked for registered), so the provisioner never launches for the pod in the
event. It reads the cluster's unbound Pending pods once per batch (`Cluster.pending_pods`) and keeps an
event only when its pod:

- still exists as an unbound Pending pod (absent from that read: deleted, bound, Succeeded or Failed
  since the event was observed, i.e. the event is older than the pod's binding);
- is the same pod (same uid: a pod deleted and re-created under the same name is another pod, with an
  event of its own);
- is not being deleted, not a DaemonSet or static pod (those follow nodes, they do not ask for them),
  not waiting for a preemption (`status.nominatedNodeName`);
- is still `PodScheduled=False` with reason `Unschedulable` (the kube-scheduler found no node for it).

Pods nominated to a live claim (its node is coming, or registered moments ago) are dropped next, by the
ledger (`carpool.app.provisioning.pending`). Everything dropped is logged and counted with its reason. The pod that goes
on to scheduling is the cluster's, not the event's: it is the newer of the two.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from carpool.api.k8s import Pod


@dataclass
class Confirmed:
    """Pods still worth launching for, by key, and the dropped events' reasons, by pod key."""

    pods: dict[str, Pod] = field(default_factory=dict)
    dropped: dict[str, str] = field(default_factory=dict)


def verdict(event_pod: Pod, live: Pod | None, observed_at: datetime | None = None) -> str | None:
    """Why the event for `event_pod` no longer calls for capacity, or None when it still does."""
    when = f" (event observed at {observed_at.isoformat()})" if observed_at is not None else ""
    if live is None:
        return f"no longer an unbound Pending pod: deleted, bound or finished since the event{when}"
    if event_pod.metadata.uid and live.metadata.uid and event_pod.metadata.uid != live.metadata.uid:
        return f"replaced: the event is for uid {event_pod.metadata.uid}, the cluster's pod is {live.metadata.uid}"
    if live.spec.node_name:
        return f"bound to node {live.spec.node_name} after the event{when}"
    if live.is_terminal():
        return f"finished (phase {live.status.phase})"
    if live.is_terminating():
        return "being deleted"
    if live.is_daemonset_pod():
        return "a DaemonSet pod (it follows nodes, it does not ask for one)"
    if live.is_static_pod():
        return "a static pod (it belongs to its node)"
    if live.status.nominated_node_name:
        return f"waiting for a preemption on node {live.status.nominated_node_name}"
    if not live.is_unschedulable():
        cond = live.condition("PodScheduled")
        seen = f"PodScheduled={cond.status}/{cond.reason or '-'}" if cond else "no PodScheduled condition"
        return f"not marked Unschedulable by the kube-scheduler ({seen})"
    return None


def speaking(events: Mapping[tuple[str, str], tuple[Pod, datetime | None]],
             live: Mapping[str, Pod]) -> dict[str, tuple[Pod, datetime | None]]:
    """One event per pod key, from the newest event of each (pod key, uid): the newest about the pod the
    cluster has under that name (its uid), else the newest of all. A deleted predecessor's event, however
    late it was stamped, never hides the live pod's own."""
    out: dict[str, tuple[Pod, datetime | None]] = {}
    for (key, uid), (pod, observed) in events.items():
        current = live.get(key)
        own = current is not None and bool(uid) and uid == (current.metadata.uid or "")
        seen = out.get(key)
        if seen is None or own or not _is_own(seen[0], current) and _newer(observed, seen[1]):
            out[key] = (pod, observed)
    return out


def _is_own(pod: Pod, live: Pod | None) -> bool:
    return live is not None and bool(pod.metadata.uid) and pod.metadata.uid == live.metadata.uid


def _newer(observed: datetime | None, than: datetime | None) -> bool:
    return than is None or (observed is not None and observed >= than)


def confirm(events: Mapping[str, tuple[Pod, datetime | None]], live: Mapping[str, Pod]) -> Confirmed:
    """`events`: pod key -> (the event's pod, when it was observed); `live`: the cluster's unbound
    Pending pods by key."""
    out = Confirmed()
    for key, (event_pod, observed_at) in events.items():
        current = live.get(key)
        reason = verdict(event_pod, current, observed_at)
        if reason is None and current is not None:
            out.pods[key] = current
        else:
            out.dropped[key] = reason or "unknown"
    return out
