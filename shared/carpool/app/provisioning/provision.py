"""The provisioner's use case: pending pods in, node claims launched out.

Flow per batch (one Lambda invocation):
1. Confirm every event against the cluster (`carpool.app.provisioning.confirm`, one list of the unbound Pending pods):
   events for pods since bound, deleted, finished, replaced, or no longer Unschedulable are dropped with
   their reason. Events are delivered at least once and late; the cluster, not the event, decides.
2. Drop pods already nominated to a live claim: an in-flight node is coming for them, or registered
   moments ago (this is also what makes duplicate and repeated events harmless: claim bookkeeping, not a
   separate idempotency store).
3. Prepare pools (instance types x AMIs x sizes x availability) and schedule the batch.
4. For each planned claim: `reserve` it atomically (claim + pod nominations + pool usage within every
   limit), then CreateFleet. A capacity error marks those offerings unavailable for 3 minutes (persisted)
   and the claim's pods are scheduled again with what remains, then with lower-weight pools, all in this
   invocation, so pods never wait for another batch because the preferred capacity was short.

Failure isolation: each claim is its own unit. Whatever fails while launching it (an EC2 error, a denied
call, a throttled write past its retries) releases its reservation at once (and terminates its instance
if one was launched but could not be recorded), and only its pods are reported for retry (`failed`);
the other claims go on. Claims not started before the invocation's deadline are reported the same way.
An unknown outcome is not a failure: a CreateFleet whose answer was lost keeps its reservations, which
are repaired from the instances' claim tags (`_outcome_unknown`).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from carpool import coexistence, labels, observability, together
from carpool.api.events import PodUnschedulableEvent
from carpool.api.k8s import Pod
from carpool.api.loader import ManifestErrors
from carpool.app import discovery, images, launching, planning, pools, reasons, startup
from carpool.app.deadline import Deadline, allows_a_claim
from carpool.app.provisioning import confirm
from carpool.app.wiring import Dependencies
from carpool.disruption import drift
from carpool.disruption.keys import SPEC_HASH
from carpool.launch import fleet
from carpool.ports import OutcomeUnknown
from carpool.resources import CPU, MEMORY, PODS, Resources, add, maximum
from carpool.scheduling import convert, scheduler
from carpool.scheduling import inputs as si
from carpool.scheduling.result import PlannedClaim, SchedulingResult
from carpool.scheduling.volumetopology import VolumeTopology
from carpool.state.models import IN_FLIGHT_STATUSES, Claim, ClaimStatus, UnavailableOffering
from carpool.state.ports import Refusal, ReservationRefused

log = logging.getLogger(__name__)
MAX_ROUNDS = 5
#: resources every claim reserves against its pool even when its types lack them (Karpenter's limits:
#: cpu, memory, nodes); every other resource its largest option has is reserved too (see `reservation`)
ALWAYS_RESERVED = (CPU, MEMORY)
NODES = "nodes"
DEADLINE_REASON = "not started before the invocation's deadline; retried on redelivery"


@dataclass
class ProvisionOutcome:
    launched: list[Claim] = field(default_factory=list)
    nominated_in_flight: dict[str, list[str]] = field(default_factory=dict)
    already_nominated: list[str] = field(default_factory=list)
    unschedulable: dict[str, dict[str, str]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    #: pod key -> (claim, the offerings EC2 had no capacity for) of a launch that fell back for it
    capacity_errors: dict[str, tuple[str, list[tuple[str, str, str]]]] = field(default_factory=dict)
    launch_failures: list[str] = field(default_factory=list)
    ignored: dict[str, str] = field(default_factory=dict)
    #: pod key -> why its event was dropped after confirming it against the cluster
    dropped: dict[str, str] = field(default_factory=dict)
    #: pod key -> why it must be retried (its claim failed, or was not started before the deadline)
    failed: dict[str, str] = field(default_factory=dict)
    decisions: list[str] = field(default_factory=list)
    rounds: int = 0
    #: claim name -> when the CreateFleet that launched it answered (read once its round's launches are done)
    launched_at: dict[str, datetime] = field(default_factory=dict)

    @property
    def hourly_cost(self) -> float:
        return sum(c.price or 0.0 for c in self.launched)

    def served(self) -> dict[str, str | None]:
        """The pods a node is coming for, with its claim: launched for, or nominated to one already coming
        (None: nominated by an earlier batch, its claim not read here)."""
        out: dict[str, str | None] = dict.fromkeys(self.already_nominated)
        out.update({p: claim for claim, pods in self.nominated_in_flight.items() for p in pods})
        out.update({p: c.name for c in self.launched for p in c.pods})
        return out


def run(
    batch: dict[str, PodUnschedulableEvent], deps: Dependencies, deadline: Deadline | None = None
) -> tuple[ProvisionOutcome, dict[str, str]]:
    """Handler entry: the good records of one SQS batch, by message id. Returns the outcome and the
    records to retry ({message id: reason}); a pod's failure fails exactly the records about it."""
    cluster = deps.settings.cluster_name
    outcome = ProvisionOutcome()
    records: dict[str, list[str]] = {}
    events: dict[tuple[str, str], tuple[Pod, datetime | None]] = {}
    for mid, event in batch.items():
        if event.detail.cluster != cluster:
            outcome.ignored[mid] = f"event for cluster {event.detail.cluster!r}, this is {cluster!r}"
            log.info("ignoring Pod Unschedulable %s: %s", event.id, outcome.ignored[mid])
            continue
        pod, observed = event.detail.pod, event.detail.observed_at
        records.setdefault(pod.key, []).append(mid)
        seen = events.get(_incarnation(pod))
        if seen is None or seen[1] is None or observed >= seen[1]:
            events[_incarnation(pod)] = (pod, observed)  # the newest event of a pod speaks for it
    if not events:
        return outcome, {}
    problem = _unusable_config(deps) or None
    confirmed = None
    if problem is None:
        try:
            live = {p.key: p for p in deps.cluster.pending_pods()}
            confirmed = confirm.confirm(_speaking(events, live), live)
        except Exception as exc:  # nothing was started: every record is retried
            problem = f"cannot read the cluster's pending pods: {type(exc).__name__}: {exc}"
            log.exception("provisioner: %s", problem)
    if confirmed is None:
        return outcome, {mid: problem or "" for mids in records.values() for mid in mids}
    _note_dropped(confirmed.dropped, outcome)
    found = provision_pods(confirmed.pods.values(), deps, reason="provisioning", deadline=deadline)
    # a pod left to another autoscaler is pending for a reason too, said like the others
    left = {k: {"*": f"not carpool's to serve: {why}"} for k, why in found.ignored.items() if k in confirmed.pods}
    reasons.note({**left, **found.unschedulable}, found.served(), found.capacity_errors,
                 {k: p.metadata.uid or "" for k, p in confirmed.pods.items()}, deps)
    found.ignored.update(outcome.ignored)
    found.dropped.update(outcome.dropped)
    retry = {mid: reason for key, reason in found.failed.items() for mid in records.get(key, [])}
    return found, retry


def _incarnation(pod: Pod) -> tuple[str, str]:
    """A pod's events are told apart by name and uid: a pod deleted and created again under its name
    (a StatefulSet's, a bare pod's) is another pod, whose events are not its predecessor's."""
    return pod.key, pod.metadata.uid or ""


def _speaking(events: Mapping[tuple[str, str], tuple[Pod, datetime | None]],
              live: Mapping[str, Pod]) -> dict[str, tuple[Pod, datetime | None]]:
    """One event per pod key: the newest about the pod the cluster has under that name (its uid), else
    the newest of all. A deleted predecessor's event, however late it was stamped, never hides the
    live pod's own."""
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


def _unusable_config(deps: Dependencies) -> str:
    """Why the deployed NodePool/EC2NodeClass config cannot be used (loudly: an error log and the
    `ConfigInvalid` metric for an alarm to watch), or "" when it loads."""
    try:
        deps.config.load()
    except ManifestErrors as exc:
        reason = f"the deployed NodePool/EC2NodeClass config is invalid, nothing is launched until it is fixed: {exc}"
        log.error("provisioner: %s", reason)
        observability.emit("ConfigInvalid", function="provisioner")
        return reason
    except Exception as exc:
        reason = f"cannot read the deployed config: {type(exc).__name__}: {exc}"
        log.exception("provisioner: %s", reason)
        return reason
    return ""


def _note_dropped(dropped: dict[str, str], outcome: ProvisionOutcome) -> None:
    for key, reason in dropped.items():
        log.info("dropping the Pod Unschedulable event of %s: %s", key, reason)
    if dropped:
        observability.emit("PodEventsDropped", len(dropped))
    outcome.dropped.update(dropped)


def provision_pods(
    pods: Iterable[Pod], deps: Dependencies, reason: str, exclude_claims: frozenset[str] | set[str] = frozenset(),
    deadline: Deadline | None = None, price_ceiling: float | None = None,
) -> ProvisionOutcome:
    """Schedule and launch for `pods` (also used by interruption handling to pre-launch replacements).

    Never raises for a failure it can pin on pods: those land in `outcome.failed` (and a failed claim
    in `launch_failures`); a failure before anything was started fails every pod.

    `price_ceiling` (USD/hour, for replacements that must be cheaper than what they replace): every
    offering priced at or above it is unavailable to this call, for scheduling and for the launch alike,
    and a round whose claims could together cost that much launches nothing (its pods are reported
    unschedulable with the reason). So what is launched always costs less than the ceiling, whatever
    capacity errors make the launch fall back to."""
    now = deps.clock()
    outcome = ProvisionOutcome()
    pods = list(pods)
    try:
        # Cluster Autoscaler coexistence: pods a node group serves are left to it (`carpool.coexistence`)
        pods = _leave_alone_what_others_serve(pods, deps, outcome)
        pending = _not_nominated(pods, deps, now, exclude_claims, outcome)
    except Exception as exc:
        _fail(outcome, [p.key for p in pods], f"{type(exc).__name__}: {exc}")
        log.exception("provisioning %d pods failed before any launch", len(pods))
        return outcome
    if pending:
        _schedule_and_launch(pending, deps, reason, exclude_claims, now, outcome, deadline, price_ceiling)
        startup.pending_to_launch(pending, outcome.launched, outcome.launched_at)
    return outcome


def _not_nominated(pods: list[Pod], deps: Dependencies, now: datetime, exclude: frozenset[str] | set[str],
                   outcome: ProvisionOutcome) -> list[Pod]:
    """The pods no live claim (other than `exclude`) holds; the others go to `already_nominated`."""
    if not pods:
        return []
    nominated = deps.ledger.nominated(now, [p.key for p in pods])
    pending = []
    for pod in pods:
        holder = nominated.get(pod.key)
        if holder is not None and holder not in exclude:
            outcome.already_nominated.append(pod.key)
        else:
            pending.append(pod)
    return pending


def _fail(outcome: ProvisionOutcome, keys: Iterable[str], reason: str) -> None:
    for key in keys:
        outcome.failed.setdefault(key, reason)


def _leave_alone_what_others_serve(pods: Iterable[Pod], deps: Dependencies, outcome: ProvisionOutcome) -> list[Pod]:
    """Pods pinned to a node group (Cluster Autoscaler's) or bound for another scheduler are not launched
    for; each pod is counted in `PodsServedBy{server}`, one data point per server with the batch's count
    (a burst's thousand pods are one log line each server, not a thousand). See `carpool.coexistence`."""
    classifier = coexistence.Coexistence(deps.config.load().nodepools)
    kept = []
    served: Counter[str] = Counter()
    for pod in pods:
        verdict = classifier.serves(pod)
        served[verdict.server.value] += 1
        if verdict.leave_alone:
            outcome.ignored[pod.key] = verdict.reason
            log.info("leaving pod %s alone: %s", pod.key, verdict.reason)
        else:
            kept.append(pod)
    for server, count in sorted(served.items()):
        observability.emit("PodsServedBy", count, server=server)
    return kept


def _schedule_and_launch(
    pending: list[Pod], deps: Dependencies, reason: str, exclude: frozenset[str] | set[str], now: datetime,
    outcome: ProvisionOutcome, deadline: Deadline | None = None, price_ceiling: float | None = None,
) -> None:
    by_key = {p.key: p for p in pending}
    try:
        world = _World.read(deps, now, pending)
        if price_ceiling is not None:
            world.unavailable |= priced_out(world.catalog, price_ceiling)
    except Exception as exc:  # before any launch: every pod is retried
        _fail(outcome, by_key, f"{type(exc).__name__}: {exc}")
        log.exception("provisioning %d pods failed before any launch", len(by_key))
        return
    while by_key and outcome.rounds < MAX_ROUNDS:
        if not allows_a_claim(deadline):
            _fail(outcome, by_key, DEADLINE_REASON)
            break
        try:
            if outcome.rounds:  # pods a concurrent provisioner took since the last round are its now
                by_key = {p.key: p for p in _not_nominated(list(by_key.values()), deps, now, exclude, outcome)}
            outcome.rounds += 1
            prepared, result, specs = _plan_round(by_key, world, deps, exclude, outcome)
        except Exception as exc:
            _fail(outcome, by_key, f"scheduling failed: {type(exc).__name__}: {exc}")
            log.exception("scheduling %d pods failed", len(by_key))
            break
        if price_ceiling is not None:
            _hold_to_ceiling(result, prepared, world.unavailable, price_ceiling - outcome.hourly_cost, outcome)
        _nominate_in_flight(result, specs, deps, now, outcome)
        retry = _launch_all(result, prepared, deps, reason, now, world.unavailable, outcome, deadline, exclude)
        outcome.unschedulable.update({k: v for k, v in result.unschedulable.items() if k not in retry})
        by_key = {k: by_key[k] for k in retry if k in by_key}
    _fail(outcome, by_key, f"still no capacity after {MAX_ROUNDS} scheduling rounds")
    _forget_overcome_refusals(outcome)


def priced_out(catalog: Any, ceiling: float) -> set[tuple[str, str, str]]:
    """Every (type, zone, capacity type) offering priced at or above `ceiling`: what a replacement that
    must be cheaper may not launch."""
    return {(it.name, o.zone, o.capacity_type) for it in catalog.types.values() for o in it.offerings
            if o.price >= ceiling}


def _dearest(planned: PlannedClaim, ctx: launching.PoolContext, unavailable: set[tuple[str, str, str]]) -> float:
    """The most the launch of `planned` can cost: its dearest offering still available (the launch may
    fall back to any of them)."""
    prices = [o.price for c in planned.instance_types if (it := ctx.types.get(c.name)) is not None
              for o in it.offerings if o.available and (it.name, o.zone, o.capacity_type) not in unavailable]
    return max(prices, default=planned.price)


def _hold_to_ceiling(result: SchedulingResult, prepared: pools.Prepared, unavailable: set[tuple[str, str, str]],
                     left: float, outcome: ProvisionOutcome) -> None:
    """Launch nothing of this round when its claims could together cost `left` or more (each claim alone
    cannot: its dearer offerings are unavailable); their pods are reported unschedulable with why."""
    if not result.claims:
        return
    worst = sum(_dearest(c, prepared.contexts[c.pool], unavailable) for c in result.claims)
    if worst < left:
        return
    why = f"a replacement must cost less than ${max(left, 0.0):.4f}/h; these {len(result.claims)} nodes may cost ${worst:.4f}/h"
    for claim in result.claims:
        for pod in claim.pods:
            result.unschedulable[pod] = {"*": why}
            result.placements.pop(pod, None)
    result.claims = []
    outcome.decisions.append(f"nothing launched: {why}")
    log.info("nothing launched: %s", why)


def _forget_overcome_refusals(outcome: ProvisionOutcome) -> None:
    """A pod refused in one round and placed in a later one (or found nominated) was not refused."""
    placed = {p for c in outcome.launched for p in c.pods}
    placed.update(outcome.already_nominated)
    placed.update(p for keys in outcome.nominated_in_flight.values() for p in keys)
    for key in placed:
        outcome.refused.pop(key, None)


@dataclass
class _World:
    """What one invocation reads once: config, catalog, learned capacity, unavailable offerings, the CNI
    mode and the DaemonSets, each node class's AMIs (resolved on first use), and, when some pod mounts a
    persistent volume claim, the storage objects that decide where such pods may run."""

    manifests: Any
    catalog: Any
    learned: dict
    unavailable: set[tuple[str, str, str]]
    cni: dict[str, str]
    daemonsets: list[si.PodSpec]
    resolve: Callable[[Any], list]
    #: None when no pod of the batch mounts a claim (nothing was read)
    volumes: VolumeTopology | None = None

    @classmethod
    def read(cls, deps: Dependencies, now: datetime, pods: Sequence[Pod] = ()) -> _World:
        """The reads are independent, so they are made at once (`carpool.together`): the AWS ones on
        worker threads, the cluster's here meanwhile. The AMIs, subnets and security groups of the node
        classes the pools use are read too, ahead of `pools.prepare` and the launch asking for them. The
        stored catalog is read with them but decoded here afterwards: CPU work on a worker would slow
        every other worker (the interpreter lock), while here it waits for nobody."""
        manifests = deps.config.load()
        resolved: dict[str, list | Exception] = {}

        def resolve(nc: Any) -> list:  # once per node class per invocation (its failure too)
            if nc.name not in resolved:
                try:
                    resolved[nc.name] = images.resolve(nc, deps)
                except Exception as exc:
                    resolved[nc.name] = exc
            found = resolved[nc.name]
            if isinstance(found, Exception):
                raise found
            return found

        def cluster() -> tuple[dict[str, str], list[si.PodSpec], VolumeTopology | None]:
            daemonsets = [convert.pod_spec(ds.template_pod()) for ds in deps.cluster.list_daemonsets()]
            return deps.cluster.cni_env(), daemonsets, _volume_topology(deps, pods)

        read_ahead = getattr(deps.catalog, "read_ahead", None)  # the stored catalog's read, not its decoding
        (cni, daemonsets, volumes), (learned, unavailable, *_ahead) = together.beside(cluster, [
            lambda: deps.capacity.all(now), lambda: set(deps.offerings.unavailable(now)),
            *_ahead_of_use(manifests, deps, resolve), *([read_ahead] if read_ahead else []),
        ])
        return cls(manifests=manifests, catalog=deps.catalog.get(now), learned=learned, unavailable=unavailable,
                   cni=cni, daemonsets=daemonsets, resolve=resolve, volumes=volumes)


def _ahead_of_use(manifests: Any, deps: Dependencies, resolve: Callable[[Any], list]) -> list[Callable[[], None]]:
    """Reads of what the pools' node classes will be asked for (AMIs, subnets, security groups), each
    kept where its user finds it (`resolve`'s table, `discovery`'s cache). A failure is left for that
    user to meet (and report) where it did before."""
    names = {pool.node_class_name for pool in manifests.nodepools}
    reads: list[Callable[[], None]] = []
    for nc in manifests.nodeclasses:
        if nc.name in names:
            reads += [partial(_quietly, resolve, nc), partial(_quietly, discovery.subnets, nc, deps),
                      partial(_quietly, discovery.security_groups, nc, deps)]
    return reads


def _quietly(read: Callable[..., Any], *args: Any) -> None:
    with contextlib.suppress(Exception):
        read(*args)


def _has_claims(pod: Pod) -> bool:
    return any(v.claim_name(pod.name) is not None for v in pod.spec.volumes)


def _volume_topology(deps: Dependencies, pods: Sequence[Pod]) -> VolumeTopology | None:
    """The claims, volumes and StorageClasses of the pods that mount claims, read once per batch (and
    not at all when none does): a zonal volume decides the zone of the node its pod can use."""
    claiming = [p for p in pods if _has_claims(p)]
    if not claiming:
        return None
    claims, volumes, classes = deps.cluster.storage_for(claiming)
    return VolumeTopology(classes, volumes, claims)


def _plan_round(
    by_key: dict[str, Pod], world: _World, deps: Dependencies, exclude: frozenset[str] | set[str],
    outcome: ProvisionOutcome,
) -> tuple[pools.Prepared, SchedulingResult, dict[str, si.PodSpec]]:
    """Pools as they are now (usage, unavailable offerings) and a schedule of `by_key`; a pod that cannot
    even be converted, or that makes the scheduler fail, fails alone (`_schedule_isolating`)."""
    manifests = world.manifests
    usage = deps.ledger.usage([p.name for p in manifests.nodepools])
    prepared = pools.prepare(manifests, world.catalog, world.resolve, world.cni, world.learned, world.unavailable,
                             usage, zones_of=lambda nc: {s["AvailabilityZone"] for s in discovery.subnets(nc, deps)})
    _count_capacity_sources(prepared)
    started = time.perf_counter()
    specs: dict[str, si.PodSpec] = {}
    rejected: dict[str, str] = {}
    for key, pod in by_key.items():
        try:
            converted = _pod_spec(pod, world.volumes)
        except Exception as exc:
            _fail(outcome, [key], f"cannot read the pod's scheduling constraints: {type(exc).__name__}: {exc}")
            log.warning("pod %s fails alone: %s", key, outcome.failed[key])
            continue
        if isinstance(converted, str):
            rejected[key] = converted
        else:
            specs[key] = converted
    in_flight = _in_flight(deps, exclude, by_key)

    def plan(chosen: Sequence[si.PodSpec]) -> SchedulingResult:
        return scheduler.schedule(list(chosen), prepared.specs, daemonsets=world.daemonsets, in_flight=in_flight)

    result, crashed = _schedule_isolating(list(specs.values()), plan)
    for key, why in crashed.items():
        _fail(outcome, [key], why)
        specs.pop(key, None)
    for key, why in rejected.items():
        result.unschedulable[key] = {"*": why}  # logged once, when it changes (`carpool.app.reasons`)
    observability.seconds("SchedulingDurationSeconds", time.perf_counter() - started)
    return prepared, result, specs


def _pod_spec(pod: Pod, volumes: VolumeTopology | None) -> si.PodSpec | str:
    """The scheduler's view of a pod, confined to its volumes' zones as `carpool plan` confines it; or
    why it cannot be launched for (a claim missing or not ready, or no zone suits both it and its
    volumes): a new node cannot help such a pod until its storage is sorted out."""
    if volumes is not None and _has_claims(pod):
        return planning.with_claims(pod, volumes)
    return convert.pod_spec(pod)


def _schedule_isolating(
    specs: list[si.PodSpec], plan: Callable[[Sequence[si.PodSpec]], SchedulingResult]
) -> tuple[SchedulingResult, dict[str, str]]:
    """`plan(specs)`; if it raises, find the pods that make it raise by halving (log2(n) extra plans, only
    on that path) and plan the rest once more, so a single pathological pod fails alone."""
    try:
        return plan(specs), {}
    except Exception as exc:
        first = exc
    culprits = _culprits(specs, plan)
    if not culprits:  # no part fails alone: the failure needs the whole batch, fail it whole
        raise first
    rest = [s for s in specs if s.key not in culprits]
    return plan(rest), culprits


def _culprits(specs: list[si.PodSpec], plan: Callable[[Sequence[si.PodSpec]], SchedulingResult]) -> dict[str, str]:
    try:
        plan(specs)
        return {}
    except Exception as exc:
        if len(specs) == 1:
            log.warning("pod %s makes the scheduler fail: %s", specs[0].key, exc)
            return {specs[0].key: f"scheduling this pod fails: {type(exc).__name__}: {exc}"}
    half = len(specs) // 2
    return {**_culprits(specs[:half], plan), **_culprits(specs[half:], plan)}


def _nominate_in_flight(result: SchedulingResult, specs: dict[str, si.PodSpec], deps: Dependencies,
                        now: datetime, outcome: ProvisionOutcome) -> None:
    """Pods the scheduler put into an in-flight claim's remaining room are nominated to it, so they are
    not provisioned again while that node boots (and the room is not offered twice)."""
    for claim_name, keys in result.nominations().items():
        requests = add(*(specs[k].requests for k in keys))
        try:
            deps.ledger.nominate(claim_name, keys, requests, now, deps.settings.nomination_ttl_seconds)
        except ReservationRefused as refused:
            for key in keys:
                outcome.refused[key] = refused.reason
            continue
        except Exception as exc:  # only these pods are retried
            _fail(outcome, keys, f"nominating to in-flight claim {claim_name} failed: {type(exc).__name__}: {exc}")
            log.exception("nominating %d pods to %s failed", len(keys), claim_name)
            continue
        outcome.nominated_in_flight.setdefault(claim_name, []).extend(keys)
        outcome.decisions.append(f"{len(keys)} pods nominated to in-flight claim {claim_name}")


@dataclass
class _Reserved:
    """A claim reserved in this round, with what its launch will ask of EC2."""

    claim: Claim
    planned: PlannedClaim
    ctx: launching.PoolContext
    #: None for a claim settled without a launch
    plan: launching.FleetPlan | None


def _launch_all(
    result: SchedulingResult, prepared: pools.Prepared, deps: Dependencies, reason: str, now: datetime,
    unavailable: set[tuple[str, str, str]], outcome: ProvisionOutcome, deadline: Deadline | None = None,
    exclude: frozenset[str] | set[str] = frozenset(),
) -> list[str]:
    """Reserve the planned claims (a pool's together, each claim still reserved or refused on its own),
    launch them with one CreateFleet per group of claims with identical requests
    (`launching.launch_group`), and record the launches together; every claim is settled on its own.
    Returns the pods to schedule again (capacity errors, or a claim a concurrent provisioner took first)."""
    retry: list[str] = []
    started: list[_Reserved] = []
    for i, planned in enumerate(result.claims):
        if not allows_a_claim(deadline):
            left = [p for c in result.claims[i:] for p in c.pods]
            _fail(outcome, left, DEADLINE_REASON)
            outcome.decisions.append(f"{len(result.claims) - i} claims not started: the invocation's deadline is near")
            log.warning("deadline near: %d claims (%d pods) left for redelivery", len(result.claims) - i, len(left))
            break
        ctx = prepared.contexts[planned.pool]
        started.append(_Reserved(_claim(planned, ctx, now), planned, ctx, None))
    reserved = _reserve_all(started, deps, now, outcome, exclude, retry)
    planned_launches: list[_Reserved] = []
    for r in reserved:
        try:
            plan = launching.plan_fleet(r.planned, r.ctx, deps, unavailable, now)
        except Exception as exc:
            _claim_failed(r.claim, r.planned, deps, outcome, exc)
            continue
        if isinstance(plan, launching.LaunchAttempt):
            retry.extend(_settle(r, plan, deps, now, unavailable, outcome))
        else:
            planned_launches.append(_Reserved(r.claim, r.planned, r.ctx, plan))
    planned_launches = _with_templates(planned_launches, deps, outcome)
    launched: list[tuple[_Reserved, launching.LaunchAttempt]] = []
    for n, group in enumerate(_groups(planned_launches)):
        # the first launch is covered by the budget its claims were started with; a later one only
        # while a claim's worst case still fits (every launch before it may have been throttled)
        if n and not allows_a_claim(deadline):
            _not_launched(group, deps, outcome)
            continue
        retry.extend(_launch_group(group, deps, now, unavailable, outcome, launched))
    _record_launches(launched, deps, reason, now, outcome)
    return retry


def _with_templates(planned: list[_Reserved], deps: Dependencies, outcome: ProvisionOutcome) -> list[_Reserved]:
    """Ensure the launch templates of every planned launch at once (`launching.ensure_templates`); a claim
    that launches from a template that could not be created fails alone, the others go on."""
    try:
        failed = launching.ensure_templates([r.plan for r in planned if r.plan is not None], deps)
    except Exception as exc:  # nothing tells which templates exist: every claim of the round fails alone
        for r in planned:
            _claim_failed(r.claim, r.planned, deps, outcome, exc)
        return []
    if not failed:
        return planned
    kept = []
    for r in planned:
        assert r.plan is not None
        why = next((failed[s.name] for s in r.plan.specs if s.name in failed), None)
        if why is None:
            kept.append(r)
        else:
            _claim_failed(r.claim, r.planned, deps, outcome, why)
    return kept


def _not_launched(group: list[_Reserved], deps: Dependencies, outcome: ProvisionOutcome) -> None:
    """Reserved claims whose launch would end past the deadline: released, their pods retried."""
    for r in group:
        _release(r.claim, deps)
        _fail(outcome, r.planned.pods, DEADLINE_REASON)
    outcome.decisions.append(f"{len(group)} reserved claims not launched: the invocation's deadline is near")


def _groups(reserved: list[_Reserved]) -> list[list[_Reserved]]:
    """Claims of one pool whose CreateFleet requests are identical, in the order they were planned, as
    many to a request as its instances' tags can name (`fleet.batches`: every instance carries its claim)."""
    groups: dict[tuple[str, str], list[_Reserved]] = {}
    for r in reserved:
        groups.setdefault((r.planned.pool, r.plan.key if r.plan else r.claim.name), []).append(r)
    out = []
    for (pool, _), group in groups.items():
        by_name = {r.claim.name: r for r in group}
        out += [[by_name[n] for n in names] for names in fleet.batches(pool, list(by_name))]
    return out


def _reserve_all(started: list[_Reserved], deps: Dependencies, now: datetime, outcome: ProvisionOutcome,
                 exclude: frozenset[str] | set[str], retry: list[str]) -> list[_Reserved]:
    """Reserve the claims, a pool's together (`ClaimLedger.reserve_many`); the refused and the failed are
    settled here (a refused claim's pods go to `retry` unless a limit refused it)."""
    by_pool: dict[str, list[_Reserved]] = {}
    for r in started:
        by_pool.setdefault(r.planned.pool, []).append(r)
    ok: set[str] = set()
    for pool, items in by_pool.items():
        limits = items[0].ctx.nodepool.limits()
        try:
            failed = deps.ledger.reserve_many([r.claim for r in items], limits, now,
                                              deps.settings.nomination_ttl_seconds, replacing=exclude)
        except Exception as exc:  # nothing tells which claims were reserved: release them all
            failed = dict.fromkeys((r.claim.name for r in items), exc)
        for r in items:
            why = failed.get(r.claim.name)
            if why is None:
                ok.add(r.claim.name)
            elif isinstance(why, ReservationRefused):
                for pod in r.planned.pods:
                    outcome.refused[pod] = why.reason
                outcome.decisions.append(f"claim for {len(r.planned.pods)} pods in {pool} refused: {why.reason}")
                # a concurrent provisioner took some of its pods (or the same claim): the next round sees its
                # nominations and schedules what is left, instead of leaving those pods for the next watcher run
                retry.extend([] if why.kind is Refusal.LIMIT else r.planned.pods)
            else:
                _claim_failed(r.claim, r.planned, deps, outcome, why)
    return [r for r in started if r.claim.name in ok]


def _launch_group(group: list[_Reserved], deps: Dependencies, now: datetime, unavailable: set[tuple[str, str, str]],
                  outcome: ProvisionOutcome, launched: list[tuple[_Reserved, launching.LaunchAttempt]]) -> list[str]:
    """One CreateFleet for the group; the claims that got an instance go to `launched`, the others are
    settled one by one. A call that fails as a whole fails every claim of the group (each released,
    only their pods retried)."""
    first = group[0]
    assert first.plan is not None
    try:
        attempts = launching.launch_group([r.claim.name for r in group], first.plan, first.ctx, deps)
    except OutcomeUnknown as exc:
        _outcome_unknown(group, outcome, exc)
        return []
    except Exception as exc:
        for r in group:
            _claim_failed(r.claim, r.planned, deps, outcome, exc)
        return []
    if len(group) > 1:
        outcome.decisions.append(f"{len(group)} claims of {first.planned.pool} launched by one CreateFleet")
    retry: list[str] = []
    for r in group:
        attempt = attempts[r.claim.name]
        if attempt.instance is not None:
            launched.append((r, attempt))
        else:
            retry.extend(_settle(r, attempt, deps, now, unavailable, outcome))
    return retry


def _outcome_unknown(group: list[_Reserved], outcome: ProvisionOutcome, exc: OutcomeUnknown) -> None:
    """CreateFleet was sent and its answer lost: its instances may be booting. Nothing is released or
    terminated: the reservations keep holding their pods (a redelivery finds them nominated and
    launches nothing more) and the instances' claim tags repair the claims (`carpool.disruption.orphans`:
    the orphan sweep records each instance on its claim; a claim EC2 launched nothing for is released
    at its launch deadline, and its pods provisioned again). The records are retried."""
    why = f"the outcome of CreateFleet is unknown ({exc}); its claims are repaired from EC2"
    for r in group:
        _fail(outcome, r.planned.pods, why)
    outcome.decisions.append(f"{len(group)} claims of {group[0].planned.pool} kept reserved: {why}")
    observability.emit("LaunchOutcomesUnknown", len(group))
    log.error("%d claims (%s) kept reserved: %s", len(group), ", ".join(r.claim.name for r in group), why)


def _settle(r: _Reserved, attempt: launching.LaunchAttempt, deps: Dependencies, now: datetime,
            unavailable: set[tuple[str, str, str]], outcome: ProvisionOutcome) -> list[str]:
    """Give back the reservation of a claim that got no instance; returns its pods when they should be
    scheduled again (capacity errors, or options used up since it was planned)."""
    claim, planned = r.claim, r.planned
    _release(claim, deps)
    if attempt.stale:
        return list(planned.pods)  # its options were used up by this round's capacity errors
    if attempt.capacity_errors:
        _mark_unavailable(attempt.capacity_errors, deps, now, unavailable)
        outcome.capacity_errors.update(dict.fromkeys(planned.pods, (claim.name, list(attempt.capacity_errors))))
        outcome.decisions.append(
            f"{planned.pool}: insufficient capacity for {len(attempt.capacity_errors)} offerings; retrying {len(planned.pods)} pods"
        )
        observability.emit("LaunchFailures", reason="InsufficientCapacity")
        return list(planned.pods)
    outcome.launch_failures.append(f"{claim.name}: {attempt.error}")
    _fail(outcome, planned.pods, f"launch of {claim.name} failed: {attempt.error}")
    observability.emit("LaunchFailures", reason="Error")
    log.error("launch of %s failed: %s", claim.name, attempt.error)
    return []


def _record_launches(launched: list[tuple[_Reserved, launching.LaunchAttempt]], deps: Dependencies, reason: str,
                     now: datetime, outcome: ProvisionOutcome) -> None:
    """Write every launched claim with its instance (`mark_launched_many`); a claim whose write fails has
    its instance terminated and its reservation released, the others are recorded. Instances a batch
    launched get their claims' names when their nodes register (`carpool.app.register`), as Karpenter's
    tagging controller names them: not here, in the launch path."""
    answered = deps.clock()  # the round's CreateFleets are done: when their pods' launches came
    for r, attempt in launched:
        _fill(r.claim, attempt, r.ctx, now)
    try:
        failed = deps.ledger.mark_launched_many([r.claim for r, _ in launched])
    except Exception as exc:
        failed = dict.fromkeys((r.claim.name for r, _ in launched), exc)
    for r, attempt in launched:
        if r.claim.name in failed:
            _launch_unrecorded(r, attempt, deps, outcome, failed[r.claim.name])
        else:
            _launched(r.claim, reason, outcome)
            outcome.launched_at[r.claim.name] = answered


def _launch_unrecorded(r: _Reserved, attempt: launching.LaunchAttempt, deps: Dependencies, outcome: ProvisionOutcome,
                       exc: Exception) -> None:
    """The instance runs but its claim could not be written: undo both."""
    assert attempt.instance is not None
    _claim_failed(r.claim, r.planned, deps, outcome, exc, instance_id=attempt.instance.instance_id)


def _claim_failed(claim: Claim, planned: PlannedClaim, deps: Dependencies, outcome: ProvisionOutcome,
                  exc: Exception, instance_id: str | None = None) -> None:
    """A claim's launch raised: give back what it holds now, fail only its pods, let the others go on."""
    why = f"{type(exc).__name__}: {exc}"
    log.error("claim %s (%d pods) failed: %s", claim.name, len(planned.pods), why, exc_info=exc)
    if instance_id is not None:
        try:
            deps.compute.terminate_instances([instance_id])
        except Exception:  # the orphan clean-up terminates it after its grace period
            log.exception("could not terminate %s of failed claim %s", instance_id, claim.name)
    _release(claim, deps)
    outcome.launch_failures.append(f"{claim.name}: {why}")
    _fail(outcome, planned.pods, f"claim {claim.name} failed: {why}")
    observability.emit("LaunchFailures", reason=type(exc).__name__)


def _release(claim: Claim, deps: Dependencies) -> None:
    """Release a claim that will not launch; if even that fails, its reservation is reaped as a claim
    that never launched (`launch_deadline_seconds`) and its nominations expire."""
    try:
        deps.ledger.release(claim)
    except Exception:
        log.exception("could not release claim %s; it is reaped as a claim that never launched", claim.name)


def reservation(largest: Resources, limits: Resources | None) -> Resources:
    """What a claim holds against its pool: one node and every resource its largest option has (Karpenter
    counts a claim as its largest option and a NodePool's usage as all its nodes' capacity), whether the
    pool limits it today or not, so a limit added later (`nvidia.com/gpu`, pods) counts what already runs.
    A resource the pool limits that no option has is held as 0 (it still takes part in the condition)."""
    out = {name: 0 for name in (*ALWAYS_RESERVED, *(limits or {}))}
    out.update(largest)
    out[NODES] = 1
    return out


def _claim(planned: PlannedClaim, ctx: launching.PoolContext, now: datetime) -> Claim:
    largest = maximum(*(ctx.sizes[c.name].capacity for c in planned.instance_types if c.name in ctx.sizes))
    reserved = reservation(largest, ctx.nodepool.limits())
    digest = hashlib.sha256(f"{planned.pool}|{now.isoformat()}|{'|'.join(sorted(planned.pods))}".encode()).hexdigest()
    return Claim(
        name=f"{planned.pool}-{digest[:10]}",
        nodepool=planned.pool,
        nodeclass=ctx.nodeclass.name,
        created_at=now,
        instance_types=[c.name for c in planned.instance_types],
        pods=list(planned.pods),
        reserved=reserved,
        requested=dict(planned.requests),
        labels={**planned.labels, SPEC_HASH: drift.spec_hash(ctx.nodepool, ctx.nodeclass)},
    )


def _fill(claim: Claim, attempt: launching.LaunchAttempt, ctx: launching.PoolContext, now: datetime) -> None:
    """The claim as launched: its instance, and what the instance type offers."""
    inst = attempt.instance
    assert inst is not None
    size = ctx.sizes.get(inst.instance_type)
    it = ctx.types.get(inst.instance_type)
    offering = it.offering(inst.zone, attempt.capacity_type) if it else None
    claim.status = ClaimStatus.LAUNCHED
    claim.instance_id, claim.instance_type, claim.zone = inst.instance_id, inst.instance_type, inst.zone
    claim.capacity_type = attempt.capacity_type
    claim.image_id = attempt.image_id
    claim.max_pods = size.max_pods if size else None
    claim.allocatable = dict(size.allocatable) if size else {}
    claim.launched_at = now
    if attempt.launch_template:
        claim.labels[launching.LAUNCH_TEMPLATE_LABEL] = attempt.launch_template
    claim.price = offering.price if offering else None


def _launched(claim: Claim, reason: str, outcome: ProvisionOutcome) -> None:
    outcome.launched.append(claim)
    observability.emit("NodeClaimsCreated", nodepool=claim.nodepool, reason=reason)
    observability.emit("EstimatedHourlyCost", claim.price or 0.0, nodepool=claim.nodepool)
    decision = (f"launched {claim.instance_type} ({claim.capacity_type}, {claim.zone}) for {len(claim.pods)} pods "
                f"from NodePool {claim.nodepool} as {claim.name}")
    outcome.decisions.append(decision)
    log.info(decision, extra={"claim": claim.name, "nodepool": claim.nodepool, "instanceType": claim.instance_type,
                              "zone": claim.zone, "capacityType": claim.capacity_type,
                              "instanceId": claim.instance_id, "reason": reason, "pods": len(claim.pods)})


def _mark_unavailable(errors: list[tuple[str, str, str]], deps: Dependencies, now: datetime,
                      unavailable: set[tuple[str, str, str]]) -> None:
    errors = [e for e in dict.fromkeys(errors) if e not in unavailable]  # a batch's claims share its errors
    if not errors:
        return
    until = now + timedelta(seconds=deps.settings.unavailable_seconds)
    unavailable.update(errors)  # this invocation avoids them even if remembering them fails
    try:
        deps.offerings.mark_unavailable(
            UnavailableOffering(instance_type=t, zone=z, capacity_type=ct, until=until, reason="insufficient capacity")
            for t, z, ct in errors
        )
    except Exception:
        log.exception("could not remember %d unavailable offerings", len(errors))


def _in_flight(deps: Dependencies, exclude: frozenset[str] | set[str], pending: dict[str, Pod]) -> list[si.InFlightClaim]:
    """Launched claims not marked registered yet: their remaining room takes pods first.

    Room held for pods that no longer exist (evicted by a drain, deleted by a scale-down) is given back,
    so the pods that replace them land on the node already coming for them instead of a second one.
    The claim keeps only aggregate requests, so the give-back is proportional to the pods gone.

    Once the claim's Node is Ready (`_ready_nodes`), the kube-scheduler may already bind to it, and it does not
    know carpool's plan: it can put there pods planned for another node and leave this claim's own pods
    for elsewhere. What the node holds is then what is bound to it (`_room_on_node`), as in Karpenter,
    whose in-flight NodeClaim becomes a node whose room is its allocatable less its bound pods."""
    claims = [c for c in deps.ledger.active()
              if c.status in IN_FLIGHT_STATUSES and c.name not in exclude and c.allocatable and c.instance_type]
    if not claims:
        return []
    live = deps.cluster.pod_keys()
    ready = _ready_nodes(claims, deps)
    out = []
    for c in claims:
        node = ready.get(c.name)
        if node is not None:
            remaining = _room_on_node(c, deps.cluster.pods_on_node(node), live)
        else:
            remaining = _less(c.allocatable, c.requested, _share(c.pods, live))
        node_labels = {**c.labels, labels.NODEPOOL: c.nodepool, labels.INSTANCE_TYPE: c.instance_type or "",
                       labels.ZONE: c.zone or "", labels.CAPACITY_TYPE: c.capacity_type or ""}
        out.append(si.InFlightClaim(c.name, c.nodepool, node_labels, remaining))
    return out


def _ready_nodes(claims: Sequence[Claim], deps: Dependencies) -> dict[str, str]:
    """Claim name -> its node's name, for the claims whose node joined and is Ready (the kube-scheduler
    binds to it) before the registrar marked the claim. Read from the joining nodes only (registered for
    a claim, not initialized): a few nodes at a time, whatever the cluster's size."""
    by_instance = {c.instance_id: c.name for c in claims if c.instance_id}
    out = {}
    for node in deps.cluster.joining_nodes():
        claim = by_instance.get(node.instance_id() or "")
        if claim is not None and node.is_ready():
            out[claim] = node.name
    return out


def _room_on_node(claim: Claim, bound: Sequence[Pod], live: set[str]) -> Resources:
    """A claim's room once its node exists: its allocatable less every pod bound to the node, less the
    claim's share for its own pods that exist and are not bound there (still pending, they will come;
    bound elsewhere, they are counted anyway: telling the two apart would read every pending pod, and
    counting them only ever launches a node too many, which consolidation takes back, where counting
    too little leaves a pod waiting for a node that has no room for it)."""
    on_node = {p.key for p in bound}
    used = add(*(p.requests() for p in bound if p.status.phase not in ("Succeeded", "Failed")))
    elsewhere = [k for k in claim.pods if k not in on_node]
    share = _share(elsewhere, live) * len(elsewhere) / len(claim.pods) if claim.pods else 0.0
    return _less(_less(claim.allocatable, claim.requested, share), used, 1.0)


def _share(keys: Sequence[str], live: set[str]) -> float:
    return sum(1 for k in keys if k in live) / len(keys) if keys else 0.0


def _less(amounts: Mapping[str, int], used: Mapping[str, int], share: float) -> Resources:
    return {k: v - int(used.get(k, 0) * share) for k, v in amounts.items()}


def _count_capacity_sources(prepared: pools.Prepared) -> None:
    for sources in prepared.capacity_sources.values():
        learned = sum(1 for s in sources.values() if s != "default")
        if learned:
            observability.emit("CapacityCacheHits", learned)
        observability.emit("CapacityCacheDefaults", len(sources) - learned)


__all__ = ["PODS", "ProvisionOutcome", "provision_pods", "reservation", "run"]
