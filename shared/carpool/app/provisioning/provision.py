"""The provisioner's use case: pending pods in, node claims launched out.

One batch (one Lambda invocation) is decided as Karpenter's provisioner decides (confirm the pods against
the cluster, schedule, create the claims: `reserve`), then launched as its nodeclaim lifecycle launches
(`launch`). A capacity error marks those offerings unavailable for 3 minutes (persisted) and the claim's
pods are scheduled again with what remains, then with lower-weight pools, all in this invocation, so pods
never wait for another batch because the preferred capacity was short.

Failure isolation: each claim is its own unit. Whatever fails while launching it (an EC2 error, a denied
call, a throttled write past its retries) releases its reservation at once (and terminates its instance
if one was launched but could not be recorded), and only its pods are reported for retry (`failed`);
the other claims go on. Claims not started before the invocation's deadline are reported the same way.
An unknown outcome is not a failure: a CreateFleet whose answer was lost keeps its reservations, which
are repaired from the instances' claim tags (`launch._outcome_unknown`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime

from carpool import observability
from carpool.api.events import PodUnschedulableEvent
from carpool.api.k8s import Pod
from carpool.app import config_guard, not_ready, reasons, standstill, startup
from carpool.app.deadline import Deadline
from carpool.app.provisioning import confirm, launch, pending, price_ceiling, reserve, schedule
from carpool.app.provisioning.invocation import DEADLINE_REASON, Invocation
from carpool.app.provisioning.outcome import ProvisionOutcome
from carpool.app.provisioning.world import World
from carpool.app.wiring import Dependencies
from carpool.scheduling import explain
from carpool.scheduling.result import SchedulingResult

log = logging.getLogger(__name__)

_Events = dict[tuple[str, str], tuple[Pod, datetime | None]]


def run(
    batch: dict[str, PodUnschedulableEvent], deps: Dependencies, deadline: Deadline | None = None
) -> tuple[ProvisionOutcome, dict[str, str]]:
    """Handler entry: the good records of one SQS batch, by message id. Returns the outcome and the
    records to retry ({message id: reason}); a pod's failure fails exactly the records about it."""
    outcome = ProvisionOutcome()
    # events come at least once and late: the newest about each pod speaks for it
    records, events = _newest_events(batch, deps.settings.cluster_name, outcome)
    if not events:
        return outcome, {}
    # the cluster, not the event, decides whether the pod still waits for a node
    confirmed, problem = _confirmed(events, deps)
    if confirmed is None:  # nothing was started: every record is retried
        return outcome, {mid: problem for mids in records.values() for mid in mids}
    _note_dropped(confirmed.dropped, outcome)
    found = provision_pods(confirmed.pods.values(), deps, reason="provisioning", deadline=deadline)
    # every pod still pending is told why (logged and evented when its reason changes)
    _explain(found, confirmed, deps)
    found.ignored.update(outcome.ignored)
    found.dropped.update(outcome.dropped)
    retry = {mid: reason for key, reason in found.failed.items() for mid in records.get(key, [])}
    return found, retry


def _newest_events(batch: Mapping[str, PodUnschedulableEvent], cluster: str,
                   outcome: ProvisionOutcome) -> tuple[dict[str, list[str]], _Events]:
    """The records about each pod (message ids by pod key), and the newest event of each pod incarnation
    (`_incarnation`); events for another cluster are ignored."""
    records: dict[str, list[str]] = {}
    events: _Events = {}
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
    return records, events


def _incarnation(pod: Pod) -> tuple[str, str]:
    """A pod's events are told apart by name and uid: a pod deleted and created again under its name
    (a StatefulSet's, a bare pod's) is another pod, whose events are not its predecessor's."""
    return pod.key, pod.metadata.uid or ""


def _confirmed(events: _Events, deps: Dependencies) -> tuple[confirm.Confirmed | None, str]:
    """The events confirmed against the cluster's unbound Pending pods (one list per batch), or None with
    why nothing can be decided (the config, the cluster read)."""
    # while Karpenter's controller runs it answers these pods itself: nothing is decided, all retried
    problem = standstill.karpenter_active(deps, "provisioner") or config_guard.unusable_config(deps, "provisioner")
    if problem:
        return None, problem
    try:
        live = {p.key: p for p in deps.cluster.pending_pods()}
        return confirm.confirm(confirm.speaking(events, live), live), ""
    except Exception as exc:
        problem = f"cannot read the cluster's pending pods: {type(exc).__name__}: {exc}"
        log.exception("provisioner: %s", problem)
        return None, problem


def _note_dropped(dropped: dict[str, str], outcome: ProvisionOutcome) -> None:
    for key, reason in dropped.items():
        log.info("dropping the Pod Unschedulable event of %s: %s", key, reason)
    if dropped:
        observability.emit("PodEventsDropped", len(dropped))
    outcome.dropped.update(dropped)


def _explain(found: ProvisionOutcome, confirmed: confirm.Confirmed, deps: Dependencies) -> None:
    """Each confirmed pod's reasons (`carpool.app.reasons`): why it stays pending, or the node coming for it."""
    # a pod left to another autoscaler is pending for a reason too, said like the others
    left = {k: {"*": f"not carpool's to serve: {why}"} for k, why in found.ignored.items() if k in confirmed.pods}
    reasons.note({**left, **found.unschedulable}, found.served(), found.capacity_errors,
                 {k: p.metadata.uid or "" for k, p in confirmed.pods.items()}, deps)
    not_ready.note(found.not_ready, {c.nodeclass for c in found.launched}, deps)


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
    call = Invocation(deps, deps.clock(), reason, deadline=deadline, exclude=exclude_claims, price_ceiling=price_ceiling)
    pods = list(pods)
    try:
        # Cluster Autoscaler coexistence: pods a node group serves are left to it (`carpool.coexistence`)
        pods = pending.leave_alone_what_others_serve(pods, deps, call.outcome)
        # a pod a live claim holds has a node coming already
        waiting = pending.not_nominated(pods, call)
    except Exception as exc:
        call.outcome.fail([p.key for p in pods], f"{type(exc).__name__}: {exc}")
        log.exception("provisioning %d pods failed before any launch", len(pods))
        return call.outcome
    if waiting:
        _schedule_and_launch(waiting, call)
        startup.pending_to_launch(waiting, call.outcome.launched, call.outcome.launched_at)
    return call.outcome


def _schedule_and_launch(pods: list[Pod], call: Invocation) -> None:
    """Rounds of deciding and launching, until no pod is left to place: a capacity error, or a claim a
    concurrent provisioner took first, sends its pods to the next round, in this invocation. However many
    rounds that takes (every pool and offering that can serve the pods is walked before a pod is retried),
    bounded by the deadline and by progress: a round that changed nothing would only repeat itself."""
    outcome = call.outcome
    by_key = everyone = {p.key: p for p in pods}
    world = _read_world(pods, by_key, call)
    if world is None:
        return
    taken: set[str] = set()  # pods whose claim a concurrent provisioner took first, this invocation
    while by_key:
        # a claim started past the deadline would time the invocation out: its pods are retried instead
        if not call.allows_a_claim():
            outcome.fail(by_key, DEADLINE_REASON)
            break
        before = _progress(call, taken)
        try:
            if outcome.rounds:  # pods a concurrent provisioner took since the last round are its now
                by_key = {p.key: p for p in pending.not_nominated(list(by_key.values()), call)}
            outcome.rounds += 1
            prepared, result, specs = schedule.plan_round(by_key, world, call)
        except Exception as exc:
            outcome.fail(by_key, f"scheduling failed: {type(exc).__name__}: {exc}")
            log.exception("scheduling %d pods failed", len(by_key))
            break
        if call.price_ceiling is not None:  # a replacement must cost less than what it replaces
            price_ceiling.hold_to_ceiling(result, prepared, call.unavailable,
                                          call.price_ceiling - outcome.hourly_cost, outcome)
        # pods put on the room of a node already coming wait for it
        schedule.nominate_in_flight(result, specs, call)
        # the new claims: reserved within their pools' limits, then launched
        reserved, retry = reserve.reserve_claims(result, prepared, call)
        taken.update(retry)
        retry += launch.launch(reserved, call)
        retry += _held_by_limits(result, call)
        outcome.unschedulable.update({k: v for k, v in result.unschedulable.items() if k not in retry})
        by_key = {k: everyone[k] for k in retry if k in everyone}
        if by_key and _progress(call, taken) == before:
            outcome.fail(by_key, _no_progress(outcome.rounds, len(by_key)))
            break
    outcome.forget_overcome_refusals()


def _held_by_limits(result: SchedulingResult, call: Invocation) -> list[str]:
    """Pods a pool's limit left pending, once this round's launches gave some of that pool's charge back
    (a launched claim holds its type's capacity, not its largest option): scheduled again now, not at the
    watcher's next minute (`catch_up`)."""
    for key, why in result.unschedulable.items():
        for pool in explain.limited_pools(why):
            call.limited.hold(pool, [key])
    return call.limited.again()


def _progress(call: Invocation, taken: set[str]) -> tuple[int, int, int]:
    """What a round can change that lets the next one decide otherwise: offerings found unavailable, pods
    placed (launched for, or nominated), pods a concurrent provisioner took, pools whose node class
    refused a launch. Each only grows and is bounded (the catalog's offerings, the batch's pods), so rounds
    that must change one of them end. (A pool's charge given back by a launch comes with a pod placed.)"""
    return len(call.unavailable), len(call.outcome.served()), len(taken) + len(call.outcome.not_ready)


def _no_progress(rounds: int, left: int) -> str:
    return (f"round {rounds} changed nothing (no offering newly unavailable, no pod placed, no claim taken by "
            f"another provisioner): {left} pods left for a later batch")


def _read_world(pods: list[Pod], by_key: dict[str, Pod], call: Invocation) -> World | None:
    """What every round uses, read once; None (every pod failed) when it cannot be read."""
    try:
        world = World.read(call.deps, call.now, pods)
        if call.price_ceiling is not None:
            world.unavailable |= price_ceiling.priced_out(world.catalog, call.price_ceiling)
    except Exception as exc:  # before any launch: every pod is retried
        call.outcome.fail(by_key, f"{type(exc).__name__}: {exc}")
        log.exception("provisioning %d pods failed before any launch", len(by_key))
        return None
    call.unavailable = world.unavailable  # one set: what EC2 refuses while launching, later rounds avoid
    return world


__all__ = ["ProvisionOutcome", "provision_pods", "run"]
