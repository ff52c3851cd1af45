"""The interruption handler: EC2 spot warnings, rebalance recommendations, state changes and AWS Health
scheduled changes for instances carpool owns (reference.md section 7).

Order matters for a two-minute spot notice: mark the offering unavailable (so the replacement does not
land on the same doomed capacity), launch the replacement for the node's pods first, then cordon and
taint the node, then move its pods in steps (`carpool.disruption.evacuation`: PodDisruptionBudgets
through the Eviction API, at most a quarter of a controller's pods unavailable at a time without one,
everything once the reclaim is 30 s away). Each step's outcome is logged with its reasons. In a batch
of warnings every node's replacement is planned before any pod is evicted, so each plan counts the pods
of the nodes warned before it where they are going (`carpool.app.provisioning.placed`), under zone and
hostname spread alike.

A drain outlives the warning's invocation: PDB-blocked evictions must be retried every few seconds and
the replacement takes about a minute to be Ready, while the function's timeout is 60 s. The state lives
on the interrupted node's claim (`Claim.disruption`: reason `Interrupted`, the replacement claims, the
warning's time), so any invocation can take the next step. After each step with pods left
before the reclaim, the event is sent again to the interruption queue with a delay of
`evacuation.RETRY_EVERY` (`FollowUp`): each step is a short invocation (a few API calls), nothing is
billed for waiting, and a crash loses at most one step. Without a follow-up (or if sending it fails), the
disruption function's one-minute run takes the next steps (`continue_drain`), so a drain never stops.

Two invocations may start on one warning (a duplicate delivery that read the claim before the first wrote
it). The replacements recorded are the claims launched now, the claims already holding the node's pods
(the other invocation's replacement) and those already recorded on the stored claim: never none while one
is coming, so a bare pod is never evicted before its replacement exists. A pod bound here may still be
nominated to another claim whose node registered moments ago (the kube-scheduler does not follow carpool's
plan); that nomination is spent (`_spent_nominations`) and the warning launches a replacement for it.

An event older than `MAX_EVENT_AGE` (by its EventBridge `time`, against the injected clock) is dropped
and counted in `InterruptionsStale{kind}`: a spot notice gives two minutes, so five minutes later the
instance is gone or the warning is moot, and replacing or draining on it would only disrupt a node that
has since been fine. Karpenter gets the same effect from its queue's 300-second message retention; here
the queue keeps messages longer (so poison messages still reach the dead-letter queue, see
`infra/events.py`) and the age is checked where the decision is made, from the event's own time.

A state change is a fact to check, not a command: an EC2 "stopping"/"terminated" notification is acted on
(the node drained and deleted, the claim released, the orphan sweep then terminating what is left) only
once DescribeInstances confirms the instance really is leaving (or EC2 no longer knows it). A forged
event on the bus, or a late one for an instance that was stopped and started again, names an instance
still running and serving: it is dropped, logged and counted in `InterruptionsStale{kind=state-change}`
(it describes a state the instance is no longer, or never was, in).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from carpool import labels, observability
from carpool.api import events as ev
from carpool.api.k8s import Pod, PodDisruptionBudget
from carpool.app import config_guard, drain, instances, standstill, termination
from carpool.app.provisioning import provision
from carpool.app.wiring import Dependencies
from carpool.disruption import evacuation
from carpool.disruption.decision import Reason
from carpool.ports import EvictionBlocked, NodeGone
from carpool.state import saving
from carpool.state.models import Claim, ClaimStatus, DisruptionProgress, UnavailableOffering

log = logging.getLogger(__name__)

STOPPING_STATES = frozenset({"stopping", "stopped", "shutting-down", "terminated"})
#: Older events are dropped, not acted on (Karpenter's interruption queue keeps messages 300 s).
MAX_EVENT_AGE = timedelta(minutes=5)
#: The `kind` dimension of InterruptionsReceived/InterruptionsStale, by event model.
KINDS: dict[type[ev.AwsEvent], str] = {
    ev.SpotInterruptionEvent: "spot-interruption",
    ev.HealthEvent: "scheduled-change",
    ev.RebalanceRecommendationEvent: "rebalance-recommendation",
    ev.InstanceStateChangeEvent: "state-change",
}


@dataclass
class InterruptSummary:
    handled: dict[str, str] = field(default_factory=dict)
    ignored: dict[str, str] = field(default_factory=dict)
    #: instance id -> why its event was not acted on (too old)
    stale: dict[str, str] = field(default_factory=dict)
    #: instance id -> why its state change was not acted on (EC2 says the instance is not leaving)
    unconfirmed: dict[str, str] = field(default_factory=dict)
    replacements: list[str] = field(default_factory=list)
    #: what each drain step did and why
    decisions: list[str] = field(default_factory=list)


#: Sends an event back to the interruption queue to be handled again after a delay (seconds).
FollowUp = Callable[[ev.AwsEvent, int], None]


def run(batch: dict[str, ev.AwsEvent], deps: Dependencies,
        follow_up: FollowUp | None = None) -> tuple[InterruptSummary, dict[str, str]]:
    summary = InterruptSummary()
    # while Karpenter's controller runs, it replaces and drains: every record comes back later
    stood = standstill.karpenter_active(deps, "interruption")
    stood = stood or config_guard.unusable_config(deps, "interruption")  # no pools to act for: the same
    if stood:
        return summary, dict.fromkeys(batch, stood)
    # every node's replacement is planned before any node's pods are evicted: a pod evicted comes back as
    # a new pending pod no plan counts yet, so the next node's replacement would be planned without it
    drains: list[tuple[ev.AwsEvent, Claim]] = []
    for event in batch.values():
        for instance_id in event.instance_ids():
            claim = deps.ledger.find_by_instance(instance_id)
            if claim is None:
                summary.ignored[instance_id] = f"{event.detail_type}: instance not owned by carpool"
                log.info("ignoring %s for %s: not carpool's", event.detail_type, instance_id)
                continue
            age = event_age(event, deps.clock())
            if age > MAX_EVENT_AGE:
                _drop_stale(event, instance_id, age, summary)
                continue
            if not _confirmed(event, instance_id, deps, summary):
                continue
            kind = _handle(event, claim, deps, summary, drains)
            observability.emit("InterruptionsReceived", kind=kind)
            summary.handled[instance_id] = kind
    for event, claim in drains:
        _drain_step(event, claim, deps, summary, follow_up)
    return summary, {}


def event_age(event: ev.AwsEvent, now: datetime) -> timedelta:
    """How long ago EventBridge saw the event (its `time`; a zone-less time is UTC, as EventBridge writes)."""
    when = event.time if event.time.tzinfo else event.time.replace(tzinfo=UTC)
    return now - when


def _drop_stale(event: ev.AwsEvent, instance_id: str, age: timedelta, summary: InterruptSummary) -> None:
    kind = KINDS.get(type(event), "unknown")
    observability.emit("InterruptionsStale", kind=kind)
    summary.stale[instance_id] = f"{event.detail_type}: {age.total_seconds():.0f} s old, over {MAX_EVENT_AGE}"
    log.warning("dropping %s for %s: %.0f s old (limit %s)", event.detail_type, instance_id,
                age.total_seconds(), MAX_EVENT_AGE)


def _confirmed(event: ev.AwsEvent, instance_id: str, deps: Dependencies, summary: InterruptSummary) -> bool:
    """Whether EC2 agrees with a leaving-state notification (other events are warnings of what is to come
    and need no confirmation). An instance EC2 no longer knows is gone: that confirms it too."""
    if not (isinstance(event, ev.InstanceStateChangeEvent) and event.detail.state in STOPPING_STATES):
        return True
    found = instances.describe(instance_id, deps)
    real = ((found or {}).get("State") or {}).get("Name") if found is not None else None
    if real is None or real in STOPPING_STATES:
        return True
    observability.emit("InterruptionsStale", kind=KINDS[ev.InstanceStateChangeEvent])
    summary.unconfirmed[instance_id] = f"{event.detail_type} says {event.detail.state}, EC2 says {real}"
    log.warning("not acting on %s for %s: the event says %s, DescribeInstances says %s", event.detail_type,
                instance_id, event.detail.state, real)
    return False


def _handle(event: ev.AwsEvent, claim: Claim, deps: Dependencies, summary: InterruptSummary,
            drains: list[tuple[ev.AwsEvent, Claim]]) -> str:
    """Act on one event; a node to drain is added to `drains` (its step is taken once the batch's
    replacements are all planned)."""
    if isinstance(event, ev.SpotInterruptionEvent):
        if not _in_progress(claim):
            _mark_unavailable(claim, deps)
        _replace(event, claim, deps, summary, drains)
        return "spot-interruption"
    if isinstance(event, ev.HealthEvent):
        _replace(event, claim, deps, summary, drains)
        return "scheduled-change"
    if isinstance(event, ev.RebalanceRecommendationEvent):
        if _in_progress(claim) or _early_replacement(claim, deps):
            _replace(event, claim, deps, summary, drains)
        return "rebalance-recommendation"
    if isinstance(event, ev.InstanceStateChangeEvent) and event.detail.state in STOPPING_STATES:
        if claim.node_name:
            try:
                drain.cordon(deps.cluster, claim.node_name)
                drain.drain(deps.cluster, claim.node_name, voluntary=False)
            except NodeGone:
                log.info("node %s of %s is already gone", claim.node_name, claim.name)
            deps.cluster.delete_node(claim.node_name)
            termination.let_go(deps, claim.node_name, claim.instance_id, claim.name)
        deps.ledger.release(claim)
        return "state-change"
    return "ignored"


def _mark_unavailable(claim: Claim, deps: Dependencies) -> None:
    if not (claim.instance_type and claim.zone):
        return
    until = deps.clock() + timedelta(seconds=deps.settings.unavailable_seconds)
    deps.offerings.mark_unavailable(
        [UnavailableOffering(instance_type=claim.instance_type, zone=claim.zone,
                             capacity_type=claim.capacity_type or labels.CAPACITY_SPOT, until=until,
                             reason="spot interruption")]
    )


def _early_replacement(claim: Claim, deps: Dependencies) -> bool:
    """Opt-in per NodePool: annotation `carpool.dev/rebalance-replace: "true"`."""
    pools = {p.metadata.name: p for p in deps.config.load().nodepools}
    pool = pools.get(claim.nodepool)
    return bool(pool and (pool.metadata.annotations or {}).get("carpool.dev/rebalance-replace") == "true")


def _in_progress(claim: Claim) -> bool:
    return claim.disruption is not None and claim.disruption.reason == Reason.INTERRUPTED


def _replace(event: ev.AwsEvent, claim: Claim, deps: Dependencies, summary: InterruptSummary,
             drains: list[tuple[ev.AwsEvent, Claim]]) -> None:
    """First delivery: launch the replacement, cordon and taint, record the drain on the claim. Every
    delivery (the first, duplicates and follow-ups) then has its next eviction step (`_drain_step`)."""
    if not claim.node_name:
        return
    if not _in_progress(claim):
        try:
            _start(event, claim, deps, summary)
        except NodeGone:
            _say(summary, f"node {claim.node_name} of {claim.name} is already gone: nothing to drain")
            return
    drains.append((event, claim))


def _drain_step(event: ev.AwsEvent, claim: Claim, deps: Dependencies, summary: InterruptSummary,
                follow_up: FollowUp | None) -> None:
    """The next eviction step, and another look in a few seconds while pods are left before the reclaim."""
    if continue_drain(claim, deps, deps.clock(), summary) and follow_up is not None:
        _follow_up(event, claim, follow_up)


def _start(event: ev.AwsEvent, claim: Claim, deps: Dependencies, summary: InterruptSummary) -> None:
    node = claim.node_name or ""
    pods = drain.pods_on(deps.cluster, node)
    replacements: set[str] = set()
    unserved: dict[str, str] = {}
    if pods:
        held = deps.ledger.nominated(deps.clock(), [p.key for p in pods])
        spent = _spent_nominations(held, claim, deps)
        outcome = provision.provision_pods(pods, deps, reason="interruption", exclude_claims={claim.name} | spent)
        # pods another invocation on the same warning already launched for are held by its replacement:
        # that claim is this node's replacement too (never record none while one is coming)
        replacements = ({c.name for c in outcome.launched} | set(outcome.nominated_in_flight)
                        | {held[k] for k in outcome.already_nominated if k in held})
        summary.replacements.extend(c.name for c in outcome.launched)
        unserved = _unserved(outcome)
    warned = _utc(event.time)

    def start(c: Claim) -> None:
        # what another invocation recorded is kept: the save is conditional on the version read, and a
        # lost race applies this again to the claim as stored now (`saving.amend`)
        replacements.update(_replaced_by(c))
        stamped = c.disruption.termination_deadline if c.disruption is not None else None
        c.disruption = DisruptionProgress(reason=Reason.INTERRUPTED.value, action="replace",
                                          replaced_by=sorted(replacements), decided_at=warned,
                                          termination_deadline=stamped)

    # recorded before the cordon, as a consolidation decision is (`carpool.app.disruption_executor`): a crash
    # between leaves a recorded interruption the next step or the disruption run carries on
    saving.amend(deps.ledger, claim, start)
    drain.cordon(deps.cluster, node)
    observability.emit("Disruptions", reason=Reason.INTERRUPTED.value)
    _say(summary, f"{event.detail_type} for node {node} ({claim.instance_id}): cordoned and tainted; "
                  f"{len(pods)} pods to move, replacement {', '.join(sorted(replacements)) or _none(unserved)}; "
                  + (f"{len(unserved)} with no node coming ({_first(unserved)}); " if unserved else "")
                  + f"reclaim expected at {evacuation.reclaim_at(warned).isoformat()}")


def continue_drain(claim: Claim, deps: Dependencies, now: datetime, summary: InterruptSummary | None = None) -> bool:
    """One eviction step on an interrupted node (see `carpool.disruption.evacuation`); True while pods are
    left on it and the reclaim has not come yet (another step is worth taking)."""
    node = claim.node_name or ""
    warned = _warned_at(claim, now)
    if deps.cluster.get_node(node) is None or now >= evacuation.reclaim_at(warned):
        return False
    everywhere = deps.cluster.list_pods()
    on_node = [p for p in everywhere if p.spec.node_name == node and not p.is_daemonset_pod()
               and not p.is_static_pod() and not p.is_terminal()]
    if not on_node:
        return False
    ready, waiting_for = _replacement_ready(claim, deps)
    pdbs = deps.cluster.list_pdbs()
    step = evacuation.plan(on_node, everywhere, pdbs, ready, now, warned)
    evicted, blocked = _evict([p for p in on_node if p.key in set(step.evict)], pdbs, deps)
    left = len(on_node) - len(evicted)
    state = "ready" if ready else f"waiting for {', '.join(waiting_for)}"
    reasons = {**step.waiting, **blocked}
    why = "; ".join(f"{k}: {v}" for k, v in sorted(reasons.items()))
    _say(summary, f"interrupted node {node} ({step.phase}, {(evacuation.reclaim_at(warned) - now).seconds} s to "
                  f"reclaim, replacement {state}): evicted {len(evicted)}, {left} left" + (f" ({why})" if why else ""))
    return left > 0


def _evict(pods: list[Pod], pdbs: list[PodDisruptionBudget], deps: Dependencies) -> tuple[list[str], dict[str, str]]:
    """Evict `pods`; once a PDB refuses one, the others it covers are not asked again in this step."""
    evicted: list[str] = []
    blocked: dict[str, str] = {}
    spent: list[PodDisruptionBudget] = []
    for pod in pods:
        if any(b.matches(pod) for b in spent):
            blocked[pod.key] = f"PodDisruptionBudget allows no more now; retried in {evacuation.RETRY_EVERY.seconds} s"
            continue
        try:
            deps.cluster.evict(pod.key)
            evicted.append(pod.key)
        except EvictionBlocked as exc:
            blocked[pod.key] = f"{exc}; retried in {evacuation.RETRY_EVERY.seconds} s"
            spent.extend(b for b in pdbs if b.matches(pod))
    return evicted, blocked


def _unserved(outcome: provision.ProvisionOutcome) -> dict[str, str]:
    """The node's pods no replacement is coming for, each with why (a spread no offering left can
    satisfy, a limit, a failed launch): said with the warning, never taken for "not needed"."""
    out = {key: "; ".join(sorted(set(why.values()))) for key, why in outcome.unschedulable.items()}
    out.update(outcome.refused)
    out.update(outcome.failed)
    return out


def _none(unserved: dict[str, str]) -> str:
    return "none" if unserved else "not needed"


def _first(unserved: dict[str, str]) -> str:
    key = min(unserved)
    return f"{key}: {unserved[key]}"


def _spent_nominations(held: dict[str, str], claim: Claim, deps: Dependencies) -> set[str]:
    """The claims, other than the interrupted one, whose nominations of its pods are spent: their nodes
    registered, and the kube-scheduler (which knows nothing of carpool's plan) bound the pods here instead.
    Such a claim still holds the nominations for a while after it registers
    (`NOMINATION_HOLD_AFTER_REGISTRATION`), and without this the pods would count as served by it and the
    warning would pre-launch no replacement for them. A claim still in flight holds room coming for them."""
    spent = set()
    for name in set(held.values()) - {claim.name}:
        holder = deps.ledger.get(name)
        if holder is not None and holder.status == ClaimStatus.REGISTERED and holder.node_name != claim.node_name:
            spent.add(name)
    return spent


def _replaced_by(claim: Claim) -> list[str]:
    return list(claim.disruption.replaced_by) if claim.disruption is not None else []


def _replacement_ready(claim: Claim, deps: Dependencies) -> tuple[bool, list[str]]:
    """Whether every replacement claim has registered its node (or none was needed)."""
    names = _replaced_by(claim)
    waiting = [n for n in names if (c := deps.ledger.get(n)) is None or c.status != ClaimStatus.REGISTERED]
    return not waiting, waiting


def _warned_at(claim: Claim, now: datetime) -> datetime:
    warned = claim.disruption.decided_at if claim.disruption is not None else None
    return _utc(warned) if warned is not None else now


def _follow_up(event: ev.AwsEvent, claim: Claim, follow_up: FollowUp) -> None:
    try:
        follow_up(event, int(evacuation.RETRY_EVERY.total_seconds()))
    except Exception:  # the disruption function's next run takes the next step
        log.exception("could not schedule the next drain step of %s; the disruption run will", claim.name)


def _utc(when: datetime) -> datetime:
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _say(summary: InterruptSummary | None, message: str) -> None:
    if summary is not None:
        summary.decisions.append(message)
    log.info(message)
