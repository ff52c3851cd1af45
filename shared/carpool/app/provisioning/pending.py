"""Which confirmed pods call for a node from carpool: not those another autoscaler serves, not those a
live claim already holds (an in-flight node is coming for them, or registered moments ago; this is also
what makes duplicate and repeated events harmless: claim bookkeeping, not a separate idempotency store)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable

from carpool import coexistence, observability
from carpool.api.k8s import Pod
from carpool.app.provisioning.invocation import Invocation
from carpool.app.provisioning.outcome import ProvisionOutcome
from carpool.app.wiring import Dependencies

log = logging.getLogger(__name__)


def leave_alone_what_others_serve(pods: Iterable[Pod], deps: Dependencies, outcome: ProvisionOutcome) -> list[Pod]:
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


def not_nominated(pods: list[Pod], call: Invocation) -> list[Pod]:
    """The pods no live claim (other than `call.exclude`) holds; the others go to `already_nominated`."""
    if not pods:
        return []
    nominated = call.deps.ledger.nominated(call.now, [p.key for p in pods])
    pending = []
    for pod in pods:
        holder = nominated.get(pod.key)
        if holder is not None and holder not in call.exclude:
            call.outcome.already_nominated.append(pod.key)
        else:
            pending.append(pod)
    return pending
