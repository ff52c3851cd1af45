"""The interruption handler: EC2 spot warnings, rebalance recommendations, state changes and AWS Health
scheduled changes for instances carpool owns (reference.md section 7).

Order matters for a two-minute spot notice: mark the offering unavailable (so the replacement does not
land on the same doomed capacity), launch the replacement for the node's pods first, then cordon and
drain, so pods spend as little time pending as possible.

An event older than `MAX_EVENT_AGE` (by its EventBridge `time`, against the injected clock) is dropped
and counted in `InterruptionsStale{kind}`: a spot notice gives two minutes, so five minutes later the
instance is gone or the warning is moot, and replacing or draining on it would only disrupt a node that
has since been fine. Karpenter gets the same effect from its queue's 300-second message retention; here
the queue keeps messages longer (so poison messages still reach the dead-letter queue, see
`infra/events.py`) and the age is checked where the decision is made, from the event's own time.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from carpool import labels, observability
from carpool.api import events as ev
from carpool.app import drain, provision
from carpool.app.wiring import Dependencies
from carpool.state.models import Claim, UnavailableOffering

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
    replacements: list[str] = field(default_factory=list)


def run(batch: dict[str, ev.AwsEvent], deps: Dependencies) -> tuple[InterruptSummary, dict[str, str]]:
    summary = InterruptSummary()
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
            kind = _handle(event, claim, deps, summary)
            observability.emit("InterruptionsReceived", kind=kind)
            summary.handled[instance_id] = kind
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


def _handle(event: ev.AwsEvent, claim: Claim, deps: Dependencies, summary: InterruptSummary) -> str:
    if isinstance(event, ev.SpotInterruptionEvent):
        _mark_unavailable(claim, deps)
        _replace_and_drain(claim, deps, summary)
        return "spot-interruption"
    if isinstance(event, ev.HealthEvent):
        _replace_and_drain(claim, deps, summary)
        return "scheduled-change"
    if isinstance(event, ev.RebalanceRecommendationEvent):
        if _early_replacement(claim, deps):
            _replace_and_drain(claim, deps, summary)
        return "rebalance-recommendation"
    if isinstance(event, ev.InstanceStateChangeEvent) and event.detail.state in STOPPING_STATES:
        if claim.node_name:
            drain.cordon(deps.cluster, claim.node_name)
            drain.drain(deps.cluster, claim.node_name, voluntary=False)
            deps.cluster.delete_node(claim.node_name)
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


def _replace_and_drain(claim: Claim, deps: Dependencies, summary: InterruptSummary) -> None:
    if not claim.node_name:
        return
    pods = drain.pods_on(deps.cluster, claim.node_name)
    drain.cordon(deps.cluster, claim.node_name)
    if pods:
        outcome = provision.provision_pods(pods, deps, reason="interruption", exclude_claims={claim.name})
        summary.replacements.extend(c.name for c in outcome.launched)
    # PDBs and do-not-disrupt are honoured within the notice window; what they hold back goes with the node
    drain.drain(deps.cluster, claim.node_name, voluntary=True)
