"""The provisioner's use case: pending pods in, node claims launched out.

Flow per batch (one Lambda invocation):
1. Drop pods already nominated to a live claim: an in-flight node is coming for them (this is also what
   makes duplicate and repeated events harmless: claim bookkeeping, not a separate idempotency store).
2. Prepare pools (instance types x AMIs x sizes x availability) and schedule the batch.
3. For each planned claim: `reserve` it atomically (claim + pod nominations + pool usage within limits),
   then CreateFleet. A capacity error marks those offerings unavailable for 3 minutes (persisted) and
   the claim's pods are scheduled again with what remains, then with lower-weight pools, all in this
   invocation, so pods never wait for another batch because the preferred capacity was short.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from carpool import coexistence, labels, observability
from carpool.api.events import PodUnschedulableEvent
from carpool.api.k8s import Pod
from carpool.app import discovery, images, launching, pools
from carpool.app.wiring import Dependencies
from carpool.disruption import drift
from carpool.disruption.keys import SPEC_HASH
from carpool.resources import CPU, MEMORY, PODS, add, maximum
from carpool.scheduling import convert, scheduler
from carpool.scheduling import inputs as si
from carpool.scheduling.result import PlannedClaim, SchedulingResult
from carpool.state.models import IN_FLIGHT_STATUSES, Claim, ClaimStatus, UnavailableOffering
from carpool.state.ports import ReservationRefused

log = logging.getLogger(__name__)
MAX_ROUNDS = 5


@dataclass
class ProvisionOutcome:
    launched: list[Claim] = field(default_factory=list)
    nominated_in_flight: dict[str, list[str]] = field(default_factory=dict)
    already_nominated: list[str] = field(default_factory=list)
    unschedulable: dict[str, dict[str, str]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    launch_failures: list[str] = field(default_factory=list)
    ignored: dict[str, str] = field(default_factory=dict)
    decisions: list[str] = field(default_factory=list)
    rounds: int = 0

    @property
    def hourly_cost(self) -> float:
        return sum(c.price or 0.0 for c in self.launched)


def run(batch: dict[str, PodUnschedulableEvent], deps: Dependencies) -> tuple[ProvisionOutcome, dict[str, str]]:
    """Handler entry: the good records of one SQS batch."""
    cluster = deps.settings.cluster_name
    pods: dict[str, Pod] = {}
    ignored: dict[str, str] = {}
    for mid, event in batch.items():
        if event.detail.cluster != cluster:
            ignored[mid] = f"event for cluster {event.detail.cluster!r}, this is {cluster!r}"
            log.info("ignoring Pod Unschedulable %s: %s", event.id, ignored[mid])
            continue
        pods[event.detail.pod.key] = event.detail.pod
    outcome = provision_pods(pods.values(), deps, reason="provisioning")
    outcome.ignored.update(ignored)
    return outcome, {}


def provision_pods(
    pods: Iterable[Pod], deps: Dependencies, reason: str, exclude_claims: frozenset[str] | set[str] = frozenset()
) -> ProvisionOutcome:
    """Schedule and launch for `pods` (also used by interruption handling to pre-launch replacements)."""
    now = deps.clock()
    outcome = ProvisionOutcome()
    # --- Cluster Autoscaler coexistence filter (carpool.coexistence; owned by the disruption issue) ---
    pods = _leave_alone_what_others_serve(pods, deps, outcome)
    # --- end of coexistence filter ---
    pods = list(pods)
    nominated = deps.ledger.nominated(now, [p.key for p in pods])
    pending = []
    for pod in pods:
        holder = nominated.get(pod.key)
        if holder is not None and holder not in exclude_claims:
            outcome.already_nominated.append(pod.key)
        else:
            pending.append(pod)
    if not pending:
        return outcome
    _schedule_and_launch(pending, deps, reason, exclude_claims, now, outcome)
    return outcome


def _leave_alone_what_others_serve(pods: Iterable[Pod], deps: Dependencies, outcome: ProvisionOutcome) -> list[Pod]:
    """Pods pinned to a node group (Cluster Autoscaler's) or bound for another scheduler are not launched
    for; each pod is counted in `PodsServedBy{server}`. See `carpool.coexistence`."""
    classifier = coexistence.Coexistence(deps.config.load().nodepools)
    kept = []
    for pod in pods:
        verdict = classifier.serves(pod)
        observability.emit("PodsServedBy", server=verdict.server.value)
        if verdict.leave_alone:
            outcome.ignored[pod.key] = verdict.reason
            log.info("leaving pod %s alone: %s", pod.key, verdict.reason)
        else:
            kept.append(pod)
    return kept


def _schedule_and_launch(
    pending: list[Pod], deps: Dependencies, reason: str, exclude: frozenset[str] | set[str], now: datetime,
    outcome: ProvisionOutcome,
) -> None:
    manifests = deps.config.load()
    catalog = deps.catalog.get(now)
    learned = deps.capacity.all(now)
    unavailable = set(deps.offerings.unavailable(now))
    cni = deps.cluster.cni_env()
    daemonsets = [convert.pod_spec(ds.template_pod()) for ds in deps.cluster.list_daemonsets()]
    by_key = {p.key: p for p in pending}
    resolved: dict[str, list] = {}

    def resolve(nc):  # once per node class per invocation
        if nc.name not in resolved:
            resolved[nc.name] = images.resolve(nc, deps)
        return resolved[nc.name]

    while by_key and outcome.rounds < MAX_ROUNDS:
        outcome.rounds += 1
        usage = deps.ledger.usage([p.name for p in manifests.nodepools])
        prepared = pools.prepare(manifests, catalog, resolve, cni, learned, unavailable, usage,
                                 zones_of=lambda nc: {s["AvailabilityZone"] for s in discovery.subnets(nc, deps)})
        _count_capacity_sources(prepared)
        started = time.perf_counter()
        specs = {p.key: convert.pod_spec(p) for p in by_key.values()}
        result = scheduler.schedule(
            list(specs.values()), prepared.specs,
            daemonsets=daemonsets, in_flight=_in_flight(deps, exclude, by_key),
        )
        observability.seconds("SchedulingDurationSeconds", time.perf_counter() - started)
        _nominate_in_flight(result, specs, deps, now, outcome)
        retry = _launch_all(result, prepared, deps, reason, now, unavailable, outcome)
        outcome.unschedulable.update({k: v for k, v in result.unschedulable.items() if k not in retry})
        by_key = {k: by_key[k] for k in retry if k in by_key}


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
        outcome.nominated_in_flight.setdefault(claim_name, []).extend(keys)
        outcome.decisions.append(f"{len(keys)} pods nominated to in-flight claim {claim_name}")


def _launch_all(
    result: SchedulingResult, prepared: pools.Prepared, deps: Dependencies, reason: str, now: datetime,
    unavailable: set[tuple[str, str, str]], outcome: ProvisionOutcome,
) -> list[str]:
    """Launch every planned claim; returns the pods to schedule again (capacity errors)."""
    retry: list[str] = []
    for planned in result.claims:
        ctx = prepared.contexts[planned.pool]
        claim = _claim(planned, ctx, now)
        try:
            deps.ledger.reserve(claim, ctx.nodepool.limits(), now, deps.settings.nomination_ttl_seconds)
        except ReservationRefused as refused:
            for pod in planned.pods:
                outcome.refused[pod] = refused.reason
            outcome.decisions.append(f"claim for {len(planned.pods)} pods in {planned.pool} refused: {refused.reason}")
            continue
        attempt = launching.launch(planned, ctx, deps, unavailable, now, claim.name)
        if attempt.instance is not None:
            _launched(claim, attempt, ctx, deps, reason, outcome, now)
            continue
        deps.ledger.release(claim)
        if attempt.stale:
            retry.extend(planned.pods)  # its options were used up by this round's capacity errors
        elif attempt.capacity_errors:
            _mark_unavailable(attempt.capacity_errors, deps, now, unavailable)
            retry.extend(planned.pods)
            outcome.decisions.append(
                f"{planned.pool}: insufficient capacity for {len(attempt.capacity_errors)} offerings; retrying {len(planned.pods)} pods"
            )
            observability.emit("LaunchFailures", reason="InsufficientCapacity")
        else:
            outcome.launch_failures.append(f"{claim.name}: {attempt.error}")
            observability.emit("LaunchFailures", reason="Error")
            log.error("launch of %s failed: %s", claim.name, attempt.error)
    return retry


def _claim(planned: PlannedClaim, ctx: launching.PoolContext, now: datetime) -> Claim:
    largest = maximum(*(ctx.sizes[c.name].capacity for c in planned.instance_types if c.name in ctx.sizes))
    reserved = {CPU: largest.get(CPU, 0), MEMORY: largest.get(MEMORY, 0), "nodes": 1}
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


def _launched(claim: Claim, attempt: launching.LaunchAttempt, ctx: launching.PoolContext, deps: Dependencies,
              reason: str, outcome: ProvisionOutcome, now: datetime) -> None:
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
    deps.ledger.mark_launched(claim)
    outcome.launched.append(claim)
    observability.emit("NodeClaimsCreated", nodepool=claim.nodepool, reason=reason)
    observability.emit("EstimatedHourlyCost", claim.price or 0.0, nodepool=claim.nodepool)
    outcome.decisions.append(
        f"launched {claim.instance_type} ({claim.capacity_type}, {claim.zone}) for {len(claim.pods)} pods from "
        f"NodePool {claim.nodepool} as {claim.name}"
    )


def _mark_unavailable(errors: list[tuple[str, str, str]], deps: Dependencies, now: datetime,
                      unavailable: set[tuple[str, str, str]]) -> None:
    until = now + timedelta(seconds=deps.settings.unavailable_seconds)
    deps.offerings.mark_unavailable(
        UnavailableOffering(instance_type=t, zone=z, capacity_type=ct, until=until, reason="insufficient capacity")
        for t, z, ct in errors
    )
    unavailable.update(errors)


def _in_flight(deps: Dependencies, exclude: frozenset[str] | set[str], pending: dict[str, Pod]) -> list[si.InFlightClaim]:
    """Launched claims whose nodes have not registered: their remaining room takes pods first.

    Room held for pods that no longer exist (evicted by a drain, deleted by a scale-down) is given back,
    so the pods that replace them land on the node already coming for them instead of a second one.
    The claim keeps only aggregate requests, so the give-back is proportional to the pods gone."""
    claims = [c for c in deps.ledger.active()
              if c.status in IN_FLIGHT_STATUSES and c.name not in exclude and c.allocatable and c.instance_type]
    if not claims:
        return []
    live = deps.cluster.pod_keys()
    out = []
    for c in claims:
        share = sum(1 for k in c.pods if k in live) / len(c.pods) if c.pods else 0.0
        remaining = {k: v - int(c.requested.get(k, 0) * share) for k, v in c.allocatable.items()}
        node_labels = {**c.labels, labels.NODEPOOL: c.nodepool, labels.INSTANCE_TYPE: c.instance_type or "",
                       labels.ZONE: c.zone or "", labels.CAPACITY_TYPE: c.capacity_type or ""}
        out.append(si.InFlightClaim(c.name, c.nodepool, node_labels, remaining))
    return out


def _count_capacity_sources(prepared: pools.Prepared) -> None:
    for sources in prepared.capacity_sources.values():
        learned = sum(1 for s in sources.values() if s != "default")
        if learned:
            observability.emit("CapacityCacheHits", learned)
        observability.emit("CapacityCacheDefaults", len(sources) - learned)


__all__ = ["ProvisionOutcome", "provision_pods", "run", "PODS"]
