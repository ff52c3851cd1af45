"""Reserved claims to running instances (Karpenter's nodeclaim `launch`): each claim's CreateFleet request,
the round's launch templates ensured at once, one CreateFleet per group of identical requests, and the
launches recorded together. Every claim is settled on its own."""

from __future__ import annotations

import logging

from carpool import observability
from carpool.app import launching
from carpool.app.provisioning import record, settle
from carpool.app.provisioning.invocation import DEADLINE_REASON, Invocation
from carpool.app.provisioning.reserve import Reserved
from carpool.launch import fleet
from carpool.ports import OutcomeUnknown

log = logging.getLogger(__name__)


def launch(reserved: list[Reserved], call: Invocation) -> list[str]:
    """Launch the reserved claims with one CreateFleet per group of claims with identical requests
    (`launching.launch_group`), and record the launches together. Returns the pods to schedule again
    (capacity errors, or options used up since the round was planned)."""
    retry: list[str] = []
    planned = _with_templates(_planned(reserved, call, retry), call, retry)
    launched: list[tuple[Reserved, launching.LaunchAttempt]] = []
    for n, group in enumerate(_groups(planned)):
        # the first launch is covered by the budget its claims were started with; a later one only
        # while a claim's worst case still fits (every launch before it may have been throttled)
        if n and not call.allows_a_claim():
            _not_launched(group, call)
            continue
        retry.extend(_launch_group(group, call, launched))
    record.record_launches(launched, call)
    return retry


def _planned(reserved: list[Reserved], call: Invocation, retry: list[str]) -> list[Reserved]:
    """Each claim with its CreateFleet request (`launching.plan_fleet`); a claim none of whose offerings
    is left is settled here, its pods to `retry`."""
    planned: list[Reserved] = []
    for r in reserved:
        try:
            plan = launching.plan_fleet(r.planned, r.ctx, call.deps, call.unavailable, call.now)
        except Exception as exc:
            retry.extend(settle.claim_failed(r.claim, r.planned, call, exc))
            continue
        if isinstance(plan, launching.LaunchAttempt):
            retry.extend(settle.settle(r.claim, r.planned, plan, call))
        else:
            planned.append(Reserved(r.claim, r.planned, r.ctx, plan))
    return planned


def _with_templates(planned: list[Reserved], call: Invocation, retry: list[str]) -> list[Reserved]:
    """Ensure the launch templates of every planned launch at once (`launching.ensure_templates`); a claim
    that launches from a template that could not be created fails alone, the others go on."""
    try:
        failed = launching.ensure_templates([r.plan for r in planned if r.plan is not None], call.deps)
    except Exception as exc:  # nothing tells which templates exist: every claim of the round fails alone
        for r in planned:
            retry.extend(settle.claim_failed(r.claim, r.planned, call, exc))
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
            retry.extend(settle.claim_failed(r.claim, r.planned, call, why))
    return kept


def _groups(reserved: list[Reserved]) -> list[list[Reserved]]:
    """Claims of one pool whose CreateFleet requests are identical, in the order they were planned, as
    many to a request as its instances' tags can name (`fleet.batches`: every instance carries its claim)."""
    groups: dict[tuple[str, str], list[Reserved]] = {}
    for r in reserved:
        groups.setdefault((r.planned.pool, r.plan.key if r.plan else r.claim.name), []).append(r)
    out = []
    for (pool, _), group in groups.items():
        by_name = {r.claim.name: r for r in group}
        out += [[by_name[n] for n in names] for names in fleet.batches(pool, list(by_name))]
    return out


def _not_launched(group: list[Reserved], call: Invocation) -> None:
    """Reserved claims whose launch would end past the deadline: released, their pods retried."""
    for r in group:
        settle.release(r.claim, call.deps)
        call.outcome.fail(r.planned.pods, DEADLINE_REASON)
    call.outcome.decisions.append(f"{len(group)} reserved claims not launched: the invocation's deadline is near")


def _launch_group(group: list[Reserved], call: Invocation,
                  launched: list[tuple[Reserved, launching.LaunchAttempt]]) -> list[str]:
    """One CreateFleet for the group; the claims that got an instance go to `launched`, the others are
    settled one by one. A call that fails as a whole fails every claim of the group (each released,
    only their pods retried)."""
    first = group[0]
    assert first.plan is not None
    try:
        attempts = launching.launch_group([r.claim.name for r in group], first.plan, first.ctx, call.deps)
    except OutcomeUnknown as exc:
        _outcome_unknown(group, call, exc)
        return []
    except Exception as exc:
        return [p for r in group for p in settle.claim_failed(r.claim, r.planned, call, exc)]
    if len(group) > 1:
        call.outcome.decisions.append(f"{len(group)} claims of {first.planned.pool} launched by one CreateFleet")
    retry: list[str] = []
    for r in group:
        attempt = attempts[r.claim.name]
        if attempt.instance is not None:
            launched.append((r, attempt))
        else:
            retry.extend(settle.settle(r.claim, r.planned, attempt, call))
    return retry


def _outcome_unknown(group: list[Reserved], call: Invocation, exc: OutcomeUnknown) -> None:
    """CreateFleet was sent and its answer lost: its instances may be booting. Nothing is released or
    terminated: the reservations keep holding their pods (a redelivery finds them nominated and
    launches nothing more) and the instances' claim tags repair the claims (`carpool.disruption.orphans`:
    the orphan sweep records each instance on its claim; a claim EC2 launched nothing for is released
    at its launch deadline, and its pods provisioned again). The records are retried."""
    why = f"the outcome of CreateFleet is unknown ({exc}); its claims are repaired from EC2"
    for r in group:
        call.outcome.fail(r.planned.pods, why)
    call.outcome.decisions.append(f"{len(group)} claims of {group[0].planned.pool} kept reserved: {why}")
    observability.emit("LaunchOutcomesUnknown", len(group))
    log.error("%d claims (%s) kept reserved: %s", len(group), ", ".join(r.claim.name for r in group), why)
