"""The watcher: turns the cluster's state into carpool events on the bus.

Level-triggered on purpose: every run starts with a resync and publishes every pod that is still
pending, so an event lost anywhere downstream only delays a pod by one watcher period. Pods
nominated to a live claim (their node is booting) are the exception: the provisioner would only confirm
the nomination, so publishing them again costs events, queue traffic and invocations for nothing (a
10,000-pod burst waits a minute or two for its nodes). Once the nomination expires or its claim is gone,
the pod is published again.

Which pods await their node is read from the claims the run already has (`ledger.active()`), not from
the nominations (for a burst, 10,000 keys a minute): a pod awaits its node iff a claim lists it in
`pods`, still holds its nominations (`holds_nominations`) and its `nominated_until` (the earliest expiry
of its nominations) is still ahead. Why that is safe: a claim's nominations can only be taken over once
they expired, once the claim is gone or registered past its hold (exactly what the rule excludes), or
by a claim replacing a registered one (interruption, consolidation), which then lists the pod too. A
pod wrongly published costs nothing but an event: the provisioner confirms every pod against the
nominations with consistent reads and drops those nominated. And since index reads are eventually
consistent, a stale claim list delays a pod by one period at most. The one claim listing pods it does
not hold is a reservation of more than one transaction cut short between them (`DynamoLedger`); the pods
it never nominated wait until it is reaped or its `nominated_until` passes.

Given a watch period, a run then follows the API's watch stream for that long; everything the run found
is published when it ends (the deployed watcher does not watch: `carpool.delivery.WATCH_SECONDS` says
why).

What a run reads is sized by what can need carpool, not by the cluster: the resync lists unbound Pending
pods only (server-side field selector `spec.nodeName=,status.phase=Pending`) and every node (a node's
registration step needs its labels, taints and conditions); the pod watch follows the same selection from
that list's resource version, with bookmarks. Bound pods are never read (see docs/design.md, "API reads
at scale").

Nodes go to the registrar (`Node Registered`) while their life needs a step from it, at any readiness: a
node that still waits for registration (Karpenter registers as soon as the Node exists: the unregistered
taint must go whether or not the node is Ready), a Ready node whose claim is not marked registered yet,
and a registered node not yet initialized (it may have become Ready, lost its startup taints or reported
its GPUs since). A node the ledger cannot match by instance but that still carries the unregistered
taint is published too: its claim may never have learned its instance, and the registrar asks EC2.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from carpool import labels, lifecycle, observability
from carpool.api import events
from carpool.api.k8s import Node, Pod
from carpool.app.wiring import Dependencies
from carpool.state.models import Claim, ClaimStatus, holds_nominations

log = logging.getLogger(__name__)


@dataclass
class WatchSummary:
    pending_pods: int = 0
    registered_nodes: int = 0
    deleted_nodes: int = 0
    awaiting_nodes: int = 0  # pending but nominated to a live claim: not published
    published: int = 0
    failed: int = 0
    watch_events: int = 0
    resource_versions: dict[str, str] = field(default_factory=dict)
    oldest_pending_seconds: float = 0.0


def owned(node: Node, cluster: str) -> bool:
    """carpool only ever touches nodes it launched (Cluster Autoscaler coexistence)."""
    return node.labels.get(labels.OWNED_BY) == cluster


class _ClaimIndex:
    """The run's live claims by instance id and name: matching nodes costs no ledger read per node."""

    def __init__(self, claims: list[Claim]) -> None:
        self.by_instance = {c.instance_id: c for c in claims if c.instance_id}
        self.by_name = {c.name: c for c in claims}

    def of(self, node: Node) -> Claim | None:
        instance_id = node.instance_id()
        if instance_id:
            return self.by_instance.get(instance_id)
        return self.by_name.get(node.labels.get(labels.CLAIM, ""))


def needs_registrar(node: Node, cluster: str, claim: Claim | None) -> bool:
    """Whether the registrar has a step to take for `node` (see the module docstring)."""
    owner = node.labels.get(labels.OWNED_BY)
    if owner not in (None, cluster):
        return False
    if claim is None:
        return lifecycle.has_unregistered_taint(node)
    if not lifecycle.is_registered(node) or node.labels.get(labels.CLAIM) != claim.name:
        return True
    if node.is_ready() and (claim.status != ClaimStatus.REGISTERED or claim.node_name != node.name):
        return True
    return not lifecycle.is_initialized(node)


def run(deps: Dependencies, watch_seconds: float = 0.0) -> WatchSummary:
    """One watcher period: resync, publish, then follow changes for `watch_seconds`."""
    cluster, now = deps.settings.cluster_name, deps.clock()
    summary = WatchSummary()
    claims = deps.ledger.active()
    index = _ClaimIndex(claims)
    found = list(_resync(deps, summary, now, claims, index))
    if watch_seconds > 0:
        found.extend(_follow(deps, summary, now, watch_seconds, index))
    entries = _without_awaiting(_unique(found), _awaiting_nodes(claims, now), summary)
    _emit_gauges(deps, now)
    observability.seconds("PodsUnboundSeconds", summary.oldest_pending_seconds)
    summary.published = len(entries)
    summary.failed = deps.publisher.put_events(entries) if entries else 0
    log.info("watcher published %d events for cluster %s (%d failed; %d pending pods await nominated nodes)",
             summary.published, cluster, summary.failed, summary.awaiting_nodes)
    return summary


#: An event the run found: (detail-type, object key), and how to build its PutEvents entry. Entries are
#: built only for what is published: in a burst most pending pods await their nodes, and encoding each
#: one's event every minute only to drop it would be most of the run's work.
_Found = tuple[tuple[str, str], Callable[[], dict[str, Any]]]


def _resync(deps: Dependencies, summary: WatchSummary, now: datetime, claims: list[Claim],
            index: _ClaimIndex) -> Iterable[_Found]:
    bus, cluster = deps.settings.event_bus, deps.settings.cluster_name
    for pod in deps.cluster.pending_pods():
        if pod.is_provisionable():
            summary.pending_pods += 1
            summary.oldest_pending_seconds = max(summary.oldest_pending_seconds, _age(pod, now))
            yield _pod_found(cluster, pod, now, bus)
    nodes = {n.name: n for n in deps.cluster.list_nodes()}
    by_node = {c.node_name: c for c in claims if c.node_name}
    for node in nodes.values():
        if needs_registrar(node, cluster, index.of(node)):
            summary.registered_nodes += 1
            yield _registered_found(cluster, node, now, bus)
    for name, claim in by_node.items():
        if name not in nodes and claim.status == ClaimStatus.REGISTERED:
            summary.deleted_nodes += 1
            yield _deleted_found(cluster, name, None, now, bus)


def _pod_found(cluster: str, pod: Pod, now: datetime, bus: str) -> _Found:
    return (events.POD_UNSCHEDULABLE, pod.key), lambda: events.pod_unschedulable_entry(cluster, pod, now, bus)


def _registered_found(cluster: str, node: Node, now: datetime, bus: str) -> _Found:
    return (events.NODE_REGISTERED, node.name), lambda: events.node_registered_entry(cluster, node, now, bus)


def _deleted_found(cluster: str, name: str, provider_id: str | None, now: datetime, bus: str) -> _Found:
    return (events.NODE_DELETED, name), lambda: events.node_deleted_entry(cluster, name, provider_id, now, bus)


def _follow(deps: Dependencies, summary: WatchSummary, now: datetime, seconds: float,
            index: _ClaimIndex) -> Iterable[_Found]:
    """Watch from the resync's list versions. A version too old to resume from ends the watch quietly:
    the next run's resync covers the gap (level-triggered)."""
    bus, cluster = deps.settings.event_bus, deps.settings.cluster_name
    summary.resource_versions.update(getattr(deps.cluster, "resource_versions", {}) or {})
    try:
        yield from _changes(deps, summary, now, seconds, bus, cluster, index)
    except Exception as exc:  # WatchExpired (HTTP 410) or a dropped stream
        log.warning("watch ended early (%s); the next run resyncs", exc)


def _changes(deps: Dependencies, summary: WatchSummary, now: datetime, seconds: float, bus: str,
             cluster: str, index: _ClaimIndex) -> Iterable[_Found]:
    for change in deps.cluster.watch(dict(summary.resource_versions), seconds):
        summary.watch_events += 1
        if change.resource_version:
            summary.resource_versions[change.kind] = change.resource_version
        obj = change.obj
        if isinstance(obj, Pod) and change.type != "DELETED" and obj.is_provisionable():
            yield _pod_found(cluster, obj, now, bus)
        elif isinstance(obj, Node):
            claim = index.of(obj)
            if change.type == "DELETED":
                if owned(obj, cluster) or claim is not None:
                    yield _deleted_found(cluster, obj.name, obj.provider_id, now, bus)
            elif needs_registrar(obj, cluster, claim):
                yield _registered_found(cluster, obj, now, bus)


def _unique(found: list[_Found]) -> list[_Found]:
    """One event per object and detail-type per run: the watch replays what the resync already found
    (the first finding of an object is kept)."""
    seen: set[tuple[str, str]] = set()
    out = []
    for mark, build in found:
        if mark not in seen:
            seen.add(mark)
            out.append((mark, build))
    return out


def _awaiting_nodes(claims: list[Claim], now: datetime) -> set[str]:
    """The pods whose nominations `claims` still hold at `now` (see the module docstring). A claim written
    before `nominated_until` existed holds none here: its pods are published and the provisioner judges."""
    held: set[str] = set()
    for claim in claims:
        until = claim.nominated_until
        if until is not None and until > now and holds_nominations(claim.status, claim.registered_at, now):
            held.update(claim.pods)
    return held


def _without_awaiting(marked: list[_Found], awaiting: set[str], summary: WatchSummary) -> list[dict[str, Any]]:
    """The entries to publish: every finding but the Pod Unschedulable events of pods awaiting their
    node, which are counted."""
    out = []
    for (kind, key), build in marked:
        if kind == events.POD_UNSCHEDULABLE and key in awaiting:
            summary.awaiting_nodes += 1
        else:
            out.append(build())
    return out


def _age(pod: Pod, now: datetime) -> float:
    created = pod.metadata.creation_timestamp
    return max(0.0, (now - created).total_seconds()) if created else 0.0


def _emit_gauges(deps: Dependencies, now: datetime) -> None:
    """Once a minute, what Karpenter exports continuously: each pool's usage of every resource it limits.
    The limits themselves are the deployed config's: the pool alarms and the dashboard read them from it,
    so they are not a series of their own (`carpool.observability`)."""
    usage = deps.ledger.usage()
    for pool in deps.config.load().nodepools:
        used = usage.get(pool.name, {})
        for resource in pool.limits() or {}:
            observability.emit("NodePoolUsage", float(used.get(resource, 0)), nodepool=pool.name, resource=resource)
