"""The claims a round decided on, reserved atomically: the claim, its pods' nominations and its pool's
usage within every limit, a pool's claims together (Karpenter's `CreateNodeClaims`). A claim refused or
failed is settled alone; the others go on to be launched."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import datetime

from carpool.app import launching, pools
from carpool.app.provisioning import settle
from carpool.app.provisioning.invocation import DEADLINE_REASON, Invocation
from carpool.disruption import drift
from carpool.resources import Resources, maximum
from carpool.scheduling.result import PlannedClaim, SchedulingResult
from carpool.state import charges
from carpool.state.models import Claim
from carpool.state.ports import Refusal, ReservationRefused

log = logging.getLogger(__name__)


@dataclass
class Reserved:
    """A claim reserved in this round, with what its launch will ask of EC2."""

    claim: Claim
    planned: PlannedClaim
    ctx: launching.PoolContext
    #: None for a claim settled without a launch
    plan: launching.FleetPlan | None


def reserve_claims(result: SchedulingResult, prepared: pools.Prepared, call: Invocation) -> tuple[list[Reserved], list[str]]:
    """Reserve the planned claims that can still start before the deadline (a pool's together, each claim
    still reserved or refused on its own). Returns the reserved claims, and the pods to schedule again
    (a claim a concurrent provisioner took first)."""
    retry: list[str] = []
    started = _started(result, prepared, call)
    return _reserve_all(started, call, retry), retry


def _started(result: SchedulingResult, prepared: pools.Prepared, call: Invocation) -> list[Reserved]:
    """The claims, in planned order, up to the first the deadline leaves no time for; the pods of the rest
    are retried."""
    started: list[Reserved] = []
    for i, planned in enumerate(result.claims):
        if not call.allows_a_claim():
            left = [p for c in result.claims[i:] for p in c.pods]
            call.outcome.fail(left, DEADLINE_REASON)
            call.outcome.decisions.append(f"{len(result.claims) - i} claims not started: the invocation's deadline is near")
            log.warning("deadline near: %d claims (%d pods) left for redelivery", len(result.claims) - i, len(left))
            break
        ctx = prepared.contexts[planned.pool]
        started.append(Reserved(_claim(planned, ctx, call.now), planned, ctx, None))
    return started


def _reserve_all(started: list[Reserved], call: Invocation, retry: list[str]) -> list[Reserved]:
    """Reserve the claims, a pool's together (`ClaimLedger.reserve_many`); the refused and the failed are
    settled here (a refused claim's pods go to `retry` unless a limit refused it)."""
    deps, outcome = call.deps, call.outcome
    by_pool: dict[str, list[Reserved]] = {}
    for r in started:
        by_pool.setdefault(r.planned.pool, []).append(r)
    ok: set[str] = set()
    for pool, items in by_pool.items():
        limits = items[0].ctx.nodepool.limits()
        try:
            failed = deps.ledger.reserve_many([r.claim for r in items], limits, call.now,
                                              deps.settings.nomination_ttl_seconds, replacing=call.exclude)
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
                if why.kind is Refusal.LIMIT:  # until a launch of this invocation lowers the pool's charge
                    call.limited.hold(pool, r.planned.pods)
                else:
                    retry.extend(r.planned.pods)
            else:
                settle.claim_failed(r.claim, r.planned, call, why)
    return [r for r in started if r.claim.name in ok]


def reservation(largest: Resources, limits: Resources | None) -> Resources:
    """What a claim holds against its pool until it launches: one node and every resource its largest
    option has (Karpenter's scheduler counts a new claim as its largest remaining option), whether the
    pool limits it today or not (`charges.charged`). Once launched it holds its instance type's capacity
    instead (`carpool.app.provisioning.record`)."""
    return charges.charged(largest, limits or ())


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
        labels={**planned.labels},
        spec_hash=drift.spec_hash(ctx.nodepool, ctx.nodeclass),
    )
