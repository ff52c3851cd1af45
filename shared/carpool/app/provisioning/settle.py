"""What becomes of a reserved claim that gets no instance: its reservation is given back, and its pods are
either scheduled again (capacity errors, as Karpenter's launch falls back to other offerings) or failed
alone, so the batch's other claims go on."""

from __future__ import annotations

import logging
from datetime import timedelta

from carpool import observability
from carpool.app import launching
from carpool.app.provisioning.invocation import Invocation
from carpool.app.provisioning.outcome import NotReady
from carpool.app.wiring import Dependencies
from carpool.launch.failures import Cause
from carpool.launch.templates import LaunchTemplateError
from carpool.scheduling.result import PlannedClaim
from carpool.state.models import Claim, UnavailableOffering

log = logging.getLogger(__name__)


def settle(claim: Claim, planned: PlannedClaim, attempt: launching.LaunchAttempt, call: Invocation) -> list[str]:
    """Give back the reservation of a claim that got no instance; returns its pods when they should be
    scheduled again (capacity errors, or options used up since it was planned)."""
    outcome = call.outcome
    release(claim, call.deps)
    if attempt.stale:
        return list(planned.pods)  # its options were used up by this round's capacity errors
    if attempt.capacity_errors:
        _mark_unavailable(attempt.capacity_errors, call)
        outcome.capacity_errors.update(dict.fromkeys(planned.pods, (claim.name, list(attempt.capacity_errors))))
        outcome.decisions.append(
            f"{planned.pool}: insufficient capacity for {len(attempt.capacity_errors)} offerings; retrying {len(planned.pods)} pods"
        )
        observability.emit("LaunchFailures", reason="InsufficientCapacity")
        return list(planned.pods)
    if attempt.cause is not None:
        return not_ready(claim, planned, call, attempt.cause, attempt.error or str(attempt.cause))
    outcome.launch_failures.append(f"{claim.name}: {attempt.error}")
    outcome.fail(planned.pods, f"launch of {claim.name} failed: {attempt.error}")
    observability.emit("LaunchFailures", reason="Error")
    log.error("launch of %s failed: %s", claim.name, attempt.error)
    return []


def claim_failed(claim: Claim, planned: PlannedClaim, call: Invocation, exc: Exception,
                 instance_id: str | None = None) -> list[str]:
    """A claim's launch raised: give back what it holds now, fail only its pods, let the others go on.
    Returns its pods when they should be scheduled again: its node class refused the launch
    (`LaunchTemplateError`), so other pools are tried (`not_ready`)."""
    if isinstance(exc, LaunchTemplateError) and instance_id is None:
        release(claim, call.deps)
        return not_ready(claim, planned, call, exc.cause, str(exc))
    why = f"{type(exc).__name__}: {exc}"
    log.error("claim %s (%d pods) failed: %s", claim.name, len(planned.pods), why, exc_info=exc)
    if instance_id is not None:
        try:
            call.deps.compute.terminate_instances([instance_id])
        except Exception:  # the orphan clean-up terminates it after its grace period
            log.exception("could not terminate %s of failed claim %s", instance_id, claim.name)
    release(claim, call.deps)
    call.outcome.launch_failures.append(f"{claim.name}: {why}")
    call.outcome.fail(planned.pods, f"claim {claim.name} failed: {why}")
    observability.emit("LaunchFailures", reason=type(exc).__name__)
    return []


def not_ready(claim: Claim, planned: PlannedClaim, call: Invocation, cause: Cause, message: str) -> list[str]:
    """The pool's node class refused the claim's launch (the claim already given back): the pool is left
    out of this call's later rounds, and the claim's pods are scheduled again with the others. Logged
    and counted once per pool and call (`NodeClassNotReady`), not once per claim (said once per cause:
    `carpool.app.not_ready`)."""
    observability.emit("LaunchFailures", reason=str(cause))
    pool_not_ready(NotReady(planned.pool, claim.nodeclass, cause, message), call, f"launch of {claim.name} refused")
    return list(planned.pods)


def pool_not_ready(found: NotReady, call: Invocation, what: str) -> None:
    """The pool is left out of this call's later rounds (`what`: how it was found, for the log). Logged and
    counted once per pool and call (`NodeClassNotReady`): a refused launch (`not_ready`) or, before any
    launch, a node class selecting no subnet or no AMI (`schedule.plan_round`)."""
    outcome = call.outcome
    if found.nodepool in outcome.not_ready:
        return
    outcome.not_ready[found.nodepool] = found
    outcome.decisions.append(f"{found.nodepool}: not launched from again in this call: {found.reason}")
    observability.emit("NodeClassNotReady", cause=str(found.cause), nodeclass=found.nodeclass, nodepool=found.nodepool)
    log.warning("%s: %s", what, found.reason)  # the error line, once per cause: `carpool.app.not_ready`


def release(claim: Claim, deps: Dependencies) -> None:
    """Release a claim that will not launch; if even that fails, its reservation is reaped as a claim
    that never launched (`launch_deadline_seconds`) and its nominations expire."""
    try:
        deps.ledger.release(claim)
    except Exception:
        log.exception("could not release claim %s; it is reaped as a claim that never launched", claim.name)


def _mark_unavailable(errors: list[tuple[str, str, str]], call: Invocation) -> None:
    errors = [e for e in dict.fromkeys(errors) if e not in call.unavailable]  # a batch's claims share its errors
    if not errors:
        return
    until = call.now + timedelta(seconds=call.deps.settings.unavailable_seconds)
    call.unavailable.update(errors)  # this invocation avoids them even if remembering them fails
    try:
        call.deps.offerings.mark_unavailable(
            UnavailableOffering(instance_type=t, zone=z, capacity_type=ct, until=until, reason="insufficient capacity")
            for t, z, ct in errors
        )
    except Exception:
        log.exception("could not remember %d unavailable offerings", len(errors))
