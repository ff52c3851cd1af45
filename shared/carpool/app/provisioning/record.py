"""Launched claims written with their instances, together; a claim whose write fails has its instance
terminated and its reservation released, as a launch that did not happen."""

from __future__ import annotations

import logging
from datetime import datetime

from carpool import observability
from carpool.app import launching, nodeclaims
from carpool.app.provisioning import settle
from carpool.app.provisioning.invocation import Invocation
from carpool.app.provisioning.outcome import ProvisionOutcome
from carpool.app.provisioning.reserve import Reserved
from carpool.resources import Resources
from carpool.state import charges
from carpool.state.models import Claim, ClaimStatus

log = logging.getLogger(__name__)


def record_launches(launched: list[tuple[Reserved, launching.LaunchAttempt]], call: Invocation) -> None:
    """Write every launched claim with its instance (`mark_launched_many`); a claim whose write fails has
    its instance terminated and its reservation released, the others are recorded and get their NodeClaims
    (`carpool.app.nodeclaims.launched`: together, a failure only logged). Instances a batch
    launched get their claims' names when their nodes register (`carpool.app.register`), as Karpenter's
    tagging controller names them: not here, in the launch path."""
    deps, outcome = call.deps, call.outcome
    answered = deps.clock()  # the round's CreateFleets are done: when their pods' launches came
    for r, attempt in launched:
        _fill(r.claim, attempt, r.ctx, call.now)
    # a launched claim holds its instance type's capacity, no longer its largest option (Karpenter's
    # NodePool usage counts its NodeClaims' status.capacity): written with the launch, exactly once
    held = {r.claim.name: dict(r.claim.reserved) for r, _ in launched}
    launch_charges = {r.claim.name: c for r, _ in launched if (c := _charge(r)) is not None}
    try:
        failed = deps.ledger.mark_launched_many([r.claim for r, _ in launched], launch_charges)
    except Exception as exc:
        failed = dict.fromkeys((r.claim.name for r, _ in launched), exc)
    recorded = []
    for r, attempt in launched:
        if r.claim.name in failed:
            _launch_unrecorded(r, attempt, call, failed[r.claim.name])
            continue
        _launched(r.claim, call.reason, outcome)
        outcome.launched_at[r.claim.name] = answered
        if charges.lowered(r.claim.reserved, held[r.claim.name]):
            call.limited.gave_back(r.claim.nodepool)
        recorded.append(_public(r))
    # each launch's public face, once the ledger holds it (a NodeClaim never names a launch not recorded)
    nodeclaims.launched(deps, recorded, call.now)


def _public(r: Reserved) -> nodeclaims.Launched:
    """What the claim's NodeClaim is built from: the pool, the launched type's labels and capacity, the
    requirements the scheduler planned it with."""
    name = r.claim.instance_type or ""
    it, size = r.ctx.types.get(name), r.ctx.sizes.get(name)
    return nodeclaims.Launched(r.claim, r.ctx.nodepool, dict(it.labels) if it is not None else {},
                               dict(size.capacity) if size is not None else {}, r.planned.requirements)


def _charge(r: Reserved) -> Resources | None:
    """What the claim holds once launched: a node of its instance type (None when the type is not sized:
    it keeps its reservation)."""
    size = r.ctx.sizes.get(r.claim.instance_type or "")
    return charges.charged(size.capacity, r.ctx.nodepool.limits() or ()) if size is not None else None


def _launch_unrecorded(r: Reserved, attempt: launching.LaunchAttempt, call: Invocation, exc: Exception) -> None:
    """The instance runs but its claim could not be written: undo both."""
    assert attempt.instance is not None
    settle.claim_failed(r.claim, r.planned, call, exc, instance_id=attempt.instance.instance_id)


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
