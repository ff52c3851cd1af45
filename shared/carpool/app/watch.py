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

Given a watch period, a run then follows the API's watch stream from the resync's resource versions
until that long after its start, and publishes as it goes, the way Karpenter batches pending pods: the
pods it finds go on the bus after `delivery.POD_BATCH_IDLE_SECONDS` without a new one, or
`POD_BATCH_MAX_SECONDS` after the first; a node that needs the registrar goes at once (its pods cannot
bind before the registrar lifts the unregistered taint). Each object is published once per run and per
step it needs (a node can need registration, then its Ready step, then initialization within one run).
The deployed runs overlap by a few seconds (`carpool.delivery.WATCH_SECONDS` says why), so no moment
goes unwatched; the resync at each run's start is the level-triggered repair.

What a run reads is sized by what can need carpool, not by the cluster: the resync lists unbound Pending
pods only (server-side field selector `spec.nodeName=,status.phase=Pending`), every node's name (a
metadata-only list: a registered claim whose node is gone), and the full objects of the launched nodes
not initialized yet (label selector `karpenter.sh/nodepool,karpenter.sh/initialized!=true`: a node's
registration steps need its labels, taints and conditions, and an initialized node has none left). It
reads them a list page at a time and publishes as it finds (a provisioner batch's worth at once), so it
holds one page and one batch, not the cluster: the function runs in 128 MB (`bench/scale.py` measures
its peak at 5,000 nodes). The pod watch follows the same selection from that list's resource version,
with bookmarks. Bound pods are never read (see docs/design.md, "API reads at scale").

The run watches the config too (NodePool and EC2NodeClass, from the resource versions of the config's
lists: `ClusterConfigSource.resource_versions`). A spec change (ADDED, a MODIFIED whose `generation`
moved, DELETED; a status write moves no generation and is no change) may make a pending pod servable, so
the run publishes every pending pod again, as its resync does, `CONFIG_RECHECK_SECONDS` after the change:
by then every warm environment's cached config has been listed again, so the provisioner that gets the
pods judges them with the change (`kubectl apply` of a NodePool serves its pods within seconds, not at the
next run). Without the config (Karpenter's CRDs not installed: `carpool.app.config_guard`) the run still
publishes, which the other functions refuse, and says why.

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
from datetime import datetime, timedelta
from typing import Any

from carpool import delivery, labels, lifecycle, observability
from carpool.api import events
from carpool.api.k8s import Node, Pod
from carpool.app import config_guard
from carpool.app.cluster_config_source import CONFIG_RECHECK_SECONDS
from carpool.app.wiring import Dependencies
from carpool.karpenter_objects import EC2NODECLASS, NODEPOOL
from carpool.ports import WatchEvent
from carpool.state.models import NOMINATION_HOLD_AFTER_REGISTRATION, Claim, ClaimStatus, holds_nominations

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
    """The run's live claims by instance id and name: matching nodes costs no ledger read per node.

    A run watches for a minute, in which claims launch: a node of carpool's the index does not know is
    looked up again in the ledger, at most every `REFRESH_SECONDS`, so its later steps (Ready,
    initialized) are published within the run and not a run later."""

    REFRESH_SECONDS = 5.0

    def __init__(self, claims: list[Claim]) -> None:
        self._index(claims)
        self._refreshed: datetime | None = None

    def _index(self, claims: list[Claim]) -> None:
        self.by_instance = {c.instance_id: c for c in claims if c.instance_id}
        self.by_name = {c.name: c for c in claims}

    def refreshed(self, deps: Dependencies, node: Node) -> Claim | None:
        """`node`'s claim after re-reading the ledger, if the node is carpool's and the last read is old."""
        if node.labels.get(labels.OWNED_BY) != deps.settings.cluster_name and labels.CLAIM not in node.labels:
            return None
        now = deps.clock()
        if self._refreshed is not None and (now - self._refreshed).total_seconds() < self.REFRESH_SECONDS:
            return None
        self._refreshed = now
        self._index(deps.ledger.active())
        return self.of(node)

    def of(self, node: Node) -> Claim | None:
        instance_id = node.instance_id()
        if instance_id:
            return self.by_instance.get(instance_id)
        return self.by_name.get(node.labels.get(labels.CLAIM, ""))


def registrar_step(node: Node, cluster: str, claim: Claim | None) -> str | None:
    """The registrar's next step for `node`, or None (see the module docstring): "register" (the
    unregistered taint or carpool's labels are missing), "ready" (Ready, but its claim not marked
    registered yet), "initialize" (registered, not initialized)."""
    owner = node.labels.get(labels.OWNED_BY)
    if owner not in (None, cluster):
        return None
    if claim is None:
        return "register" if lifecycle.has_unregistered_taint(node) else None
    if not lifecycle.is_registered(node) or node.labels.get(labels.CLAIM) != claim.name:
        return "register"
    if node.is_ready() and (claim.status != ClaimStatus.REGISTERED or claim.node_name != node.name):
        return "ready"
    return None if lifecycle.is_initialized(node) else "initialize"


def run(deps: Dependencies, watch_seconds: float = 0.0) -> WatchSummary:
    """One watcher period: resync and publish, then follow changes until `watch_seconds` after the start,
    publishing in micro-batches."""
    cluster, started = deps.settings.cluster_name, deps.clock()
    summary = WatchSummary()
    claims = deps.ledger.active()
    batch = _Publisher(deps, summary, _awaiting_nodes(claims, started, _joining(deps)))
    index = _ClaimIndex(claims)
    batch.add(_resync(deps, summary, started, claims, index))
    batch.flush()
    config = _ConfigWatch.of(deps)
    if config is not None:
        _emit_gauges(deps, started)
    observability.seconds("PodsUnboundSeconds", summary.oldest_pending_seconds)
    remaining = watch_seconds - (deps.clock() - started).total_seconds()
    if watch_seconds > 0 and remaining > 0:
        _follow(deps, summary, remaining, index, batch, config)
    batch.flush()
    log.info("watcher published %d events for cluster %s (%d failed; %d pending pods await nominated nodes)",
             summary.published, cluster, summary.failed, summary.awaiting_nodes)
    return summary


#: after a hold passes, the kube-scheduler's last pass over the node is given this long to land
_RECHECK_MARGIN = timedelta(seconds=1)

#: An event the run found: (detail-type, object key), and how to build its PutEvents entry. Entries are
#: built only for what is published: in a burst most pending pods await their nodes, and encoding each
#: one's event every minute only to drop it would be most of the run's work.
_Found = tuple[tuple[str, str], Callable[[], dict[str, Any]]]


def _resync(deps: Dependencies, summary: WatchSummary, now: datetime, claims: list[Claim],
            index: _ClaimIndex) -> Iterable[_Found]:
    """What the cluster holds now, read a list page at a time: what is found is published as it is found
    (`_Publisher`), so the run holds one page of objects and the entries of one batch, not the cluster."""
    bus, cluster = deps.settings.event_bus, deps.settings.cluster_name
    for pods in deps.cluster.pending_pod_pages():
        for pod in pods:
            if pod.is_provisionable():
                summary.pending_pods += 1
                summary.oldest_pending_seconds = max(summary.oldest_pending_seconds, _age(pod, now))
                yield _pod_found(cluster, pod, now, bus)
    names = deps.cluster.node_names()
    for nodes in deps.cluster.uninitialized_node_pages():
        for node in nodes:
            step = registrar_step(node, cluster, index.of(node))
            if step is not None:
                summary.registered_nodes += 1
                yield _registered_found(cluster, node, step, now, bus)
    for name, claim in {c.node_name: c for c in claims if c.node_name}.items():
        if name not in names and claim.status == ClaimStatus.REGISTERED:
            summary.deleted_nodes += 1
            yield _deleted_found(cluster, name, None, now, bus)


def _pod_found(cluster: str, pod: Pod, now: datetime, bus: str) -> _Found:
    return (events.POD_UNSCHEDULABLE, pod.key), lambda: events.pod_unschedulable_entry(cluster, pod, now, bus)


def _registered_found(cluster: str, node: Node, step: str, now: datetime, bus: str) -> _Found:
    return ((events.NODE_REGISTERED, f"{node.name}#{step}"),
            lambda: events.node_registered_entry(cluster, node, now, bus))


def _deleted_found(cluster: str, name: str, provider_id: str | None, now: datetime, bus: str) -> _Found:
    return (events.NODE_DELETED, name), lambda: events.node_deleted_entry(cluster, name, provider_id, now, bus)


def _follow(deps: Dependencies, summary: WatchSummary, seconds: float, index: _ClaimIndex,
            batch: _Publisher, config: _ConfigWatch | None) -> None:
    """Watch from the resync's list versions for `seconds`, publishing as `batch` decides. A watch that
    ends early (the adapter resumes what it can; a version too old to resume from ends it) is logged:
    the next run's resync covers the gap (level-triggered)."""
    summary.resource_versions.update(getattr(deps.cluster, "resource_versions", {}) or {})
    if config is not None:
        summary.resource_versions.update(config.versions)
    # a quiet stream hands back None once the batch's idle time has passed since the last event: when the
    # last event found a pod, that is exactly when its micro-batch is due
    idle = delivery.POD_BATCH_IDLE_SECONDS
    try:
        for change in deps.cluster.watch(dict(summary.resource_versions), seconds, idle_seconds=idle):
            if change is not None:
                summary.watch_events += 1
                if change.resource_version:
                    summary.resource_versions[change.kind] = change.resource_version
                if config is not None and config.changed(change, deps.clock()):
                    log.info("%s %s %s: pending pods are published again in %.0f s", change.kind,
                             _object_name(change), change.type.lower(), CONFIG_RECHECK_SECONDS)
                batch.add(_changed(deps, change, index))
                _note_joining(change, index, batch, deps)
            now = deps.clock()
            if config is not None and config.resync_due(now):
                batch.forget_pods()
                batch.add(_pending_again(deps))
            elif batch.hold_lapsed(now):
                _held_again(deps, batch, now)
            batch.flush_due()
    except Exception as exc:  # WatchExpired (HTTP 410) or a dropped stream
        log.warning("watch ended early (%s); the next run resyncs", exc)


def _pending_again(deps: Dependencies) -> Iterable[_Found]:
    """Every pending pod, read as the resync reads them (after a config change)."""
    bus, cluster, now = deps.settings.event_bus, deps.settings.cluster_name, deps.clock()
    for pods in deps.cluster.pending_pod_pages():
        for pod in pods:
            if pod.is_provisionable():
                yield _pod_found(cluster, pod, now, bus)


def _note_joining(change: WatchEvent, index: _ClaimIndex, batch: _Publisher, deps: Dependencies) -> None:
    """A joining node's step (its claim registered once Ready, then initialized) starts the hold of the
    pods nominated to it: they are looked at again once a registered claim's hold has passed
    (`NOMINATION_HOLD_AFTER_REGISTRATION`), so those the kube-scheduler could not fit there are published
    within the run, not a run later. Only a step does: a heartbeat of a node long joined changes nothing."""
    node = change.obj
    if not isinstance(node, Node) or change.type == "DELETED":
        return
    claim = index.of(node)
    if claim is not None and registrar_step(node, deps.settings.cluster_name, claim) is not None:
        batch.recheck_at(deps.clock() + NOMINATION_HOLD_AFTER_REGISTRATION + _RECHECK_MARGIN)


def _held_again(deps: Dependencies, batch: _Publisher, now: datetime) -> None:
    """The claims as they are now decide which pending pods still await a node; the others are published
    (a registered claim's hold passed: the pods left pending did not fit its node)."""
    batch.hold(_awaiting_nodes(deps.ledger.active(), now, _joining(deps)))
    batch.forget_pods()
    batch.add(_pending_again(deps))


class _ConfigWatch:
    """The config kinds' side of a run: where their watch starts, the generation of each object, and when
    the pending pods are due again after a spec change (see the module docstring)."""

    KINDS = (NODEPOOL.kind, EC2NODECLASS.kind)

    def __init__(self, deps: Dependencies, versions: dict[str, str]) -> None:
        self._deps = deps
        self.versions = versions
        self._generations = {key: v.generation for key, v in deps.config.current().verdicts.items()}
        self._resync_at: datetime | None = None

    @classmethod
    def of(cls, deps: Dependencies) -> _ConfigWatch | None:
        """None when the config cannot be used (said by `config_guard`); a config that is not the
        cluster's (a file's) is not watched."""
        if config_guard.unusable_config(deps, "watcher"):
            return None
        listed = getattr(deps.config, "resource_versions", None)
        versions = {k: v for k, v in (listed() if callable(listed) else {}).items() if v and k in cls.KINDS}
        return cls(deps, versions)

    def changed(self, change: WatchEvent, now: datetime) -> bool:
        """Whether `change` is a spec change of the config (and if so, the pods are due again later)."""
        if change.kind not in self.KINDS or not isinstance(change.obj, dict):
            return False
        meta = change.obj.get("metadata") or {}
        key, generation = (change.kind, str(meta.get("name", ""))), meta.get("generation")
        before = self._generations.get(key)
        if change.type == "DELETED":
            self._generations.pop(key, None)
        else:
            self._generations[key] = generation if isinstance(generation, int) else 0
            if before is not None and before == generation:
                return False  # a status or metadata write, or a replay: what is served did not change
        invalidate = getattr(self._deps.config, "invalidate", None)
        if callable(invalidate):
            invalidate()
        self._resync_at = now + timedelta(seconds=CONFIG_RECHECK_SECONDS)
        return True

    def resync_due(self, now: datetime) -> bool:
        if self._resync_at is None or now < self._resync_at:
            return False
        self._resync_at = None
        return True


def _object_name(change: WatchEvent) -> str:
    return str((change.obj.get("metadata") or {}).get("name", "")) if isinstance(change.obj, dict) else ""


def _changed(deps: Dependencies, change: WatchEvent, index: _ClaimIndex) -> Iterable[_Found]:
    bus, cluster, now = deps.settings.event_bus, deps.settings.cluster_name, deps.clock()
    obj = change.obj
    if isinstance(obj, Pod) and change.type != "DELETED" and obj.is_provisionable():
        yield _pod_found(cluster, obj, now, bus)
    elif isinstance(obj, Node):
        claim = index.of(obj) or index.refreshed(deps, obj)
        if change.type == "DELETED":
            if owned(obj, cluster) or claim is not None:
                yield _deleted_found(cluster, obj.name, obj.provider_id, now, bus)
        else:
            step = registrar_step(obj, cluster, claim)
            if step is not None:
                yield _registered_found(cluster, obj, step, now, bus)


class _Publisher:
    """What the run found and has not published yet, and when to publish it: nodes at once, pending pods
    after `POD_BATCH_IDLE_SECONDS` without a new one or `POD_BATCH_MAX_SECONDS` after the first (Karpenter's
    batcher). Each finding is published once per run (the watch replays what the resync found); pods
    awaiting their nominated node are counted, not published. A provisioner batch's worth is published at
    once, without waiting: its batch is full, and the run then holds no more entries than that."""

    FULL = delivery.PROVISIONER.batch_size

    def __init__(self, deps: Dependencies, summary: WatchSummary, awaiting: dict[str, datetime | None]) -> None:
        self._deps, self._summary = deps, summary
        self._awaiting: dict[str, datetime | None] = {}
        self._recheck: datetime | None = None
        self.hold(awaiting)
        self._seen: set[tuple[str, str]] = set()
        self._entries: list[dict[str, Any]] = []
        self._first_pod: datetime | None = None
        self._last_pod: datetime | None = None
        self._node_waiting = False

    def add(self, found: Iterable[_Found]) -> None:
        for (kind, key), build in found:
            if (kind, key) in self._seen:
                continue
            self._seen.add((kind, key))
            if kind == events.POD_UNSCHEDULABLE and key in self._awaiting:
                self._summary.awaiting_nodes += 1
                continue
            self._entries.append(build())
            if kind == events.POD_UNSCHEDULABLE:
                now = self._deps.clock()
                self._first_pod, self._last_pod = self._first_pod or now, now
            else:
                self._node_waiting = True
            if len(self._entries) >= self.FULL:
                self.flush()

    def hold(self, awaiting: dict[str, datetime | None]) -> None:
        """The pods awaiting their nodes from now on, each with the moment its registered claim's hold
        passes (None: it holds while the claim is in flight); the earliest such moment is a recheck."""
        self._awaiting = awaiting
        ends = [end for end in awaiting.values() if end is not None]
        self._recheck = None
        if ends:
            self.recheck_at(min(ends) + _RECHECK_MARGIN)

    def recheck_at(self, when: datetime) -> None:
        self._recheck = when if self._recheck is None else min(self._recheck, when)

    def hold_lapsed(self, now: datetime) -> bool:
        """Whether a recheck of the held pods is due (and if so, it is no longer pending)."""
        if self._recheck is None or now < self._recheck:
            return False
        self._recheck = None
        return True

    def forget_pods(self) -> None:
        """Let the pods published so far be published again (a config change may serve them now)."""
        self._seen = {found for found in self._seen if found[0] != events.POD_UNSCHEDULABLE}

    def flush_due(self) -> None:
        if self._node_waiting:
            self.flush()
            return
        if self._first_pod is None or self._last_pod is None:
            return
        now = self._deps.clock()
        if ((now - self._last_pod).total_seconds() >= delivery.POD_BATCH_IDLE_SECONDS
                or (now - self._first_pod).total_seconds() >= delivery.POD_BATCH_MAX_SECONDS):
            self.flush()

    def flush(self) -> None:
        entries, self._entries = self._entries, []
        self._first_pod = self._last_pod = None
        self._node_waiting = False
        if entries:
            self._summary.published += len(entries)
            self._summary.failed += self._deps.publisher.put_events(entries)


def _awaiting_nodes(claims: list[Claim], now: datetime, joining: set[str]) -> dict[str, datetime | None]:
    """The pods whose nominations `claims` still hold at `now` (see the module docstring), each with when
    its registered claim's hold passes (None: in flight). A claim written before `nominated_until`
    existed holds none here: its pods are published and the provisioner judges.

    A registered claim whose node is still joining (not initialized: a startup taint keeps the pods off
    it) holds its pods until it initializes, however long that takes, as Karpenter's simulation counts an
    uninitialized node's room for the pods it was launched for."""
    held: dict[str, datetime | None] = {}
    for claim in claims:
        until = claim.nominated_until
        if until is None or until <= now:
            continue
        joined = claim.status == ClaimStatus.REGISTERED and claim.node_name not in joining
        if joined and claim.registered_at is not None:
            end = claim.registered_at + NOMINATION_HOLD_AFTER_REGISTRATION
            if end > now:
                held.update(dict.fromkeys(claim.pods, end))
        elif holds_nominations(claim.status, claim.registered_at, now) or claim.node_name in joining:
            held.update(dict.fromkeys(claim.pods, None))
    return held


def _joining(deps: Dependencies) -> set[str]:
    """The names of carpool's nodes registered but not initialized (a few at a time)."""
    return {node.name for node in deps.cluster.joining_nodes()}


def _age(pod: Pod, now: datetime) -> float:
    created = pod.metadata.creation_timestamp
    return max(0.0, (now - created).total_seconds()) if created else 0.0


def _emit_gauges(deps: Dependencies, now: datetime) -> None:
    """Once a minute, what Karpenter exports continuously: each pool's usage of every resource it limits (a
    log line each), and the highest share of a limit any pool uses, in percent, with that pool and resource
    (the one series the "pool near its limit" alarm reads: `carpool.observability`)."""
    usage = deps.ledger.usage()
    highest: tuple[float, str, str] | None = None
    for pool in deps.config.load().nodepools:
        used = usage.get(pool.name, {})
        for resource, limit in (pool.limits() or {}).items():
            value = float(used.get(resource, 0))
            observability.emit("NodePoolUsage", value, nodepool=pool.name, resource=resource)
            share = 100.0 * value / limit if limit > 0 else 100.0
            if highest is None or share > highest[0]:
                highest = (share, pool.name, resource)
    if highest is not None:
        observability.emit("NodePoolLimitUsed", highest[0], observability.MetricUnit.Percent,
                           nodepool=highest[1], resource=highest[2])
