"""Why a pod is still pending, said once: the provisioner's reasons per NodePool for each pod it could not
serve, logged when they change, kept for `carpool status` (`carpool.state.reasons`) and written on the pod
as Karpenter's `FailedScheduling` event; and where a served pod will run, as Karpenter's `Nominated` event
(`carpool.k8s_events`, written by `carpool.app.recorder`): what `kubectl describe pod` shows.

A pod carpool cannot serve is retried every watcher period; logging its reasons each time would bury the
one line an operator looks for under thousands of identical ones. So a pod's reasons are logged as one
structured line (`pod`, `reasons` by NodePool) when they first appear or change, and the pods served in
the batch lose their entry. Never on the critical path: the batch's launches are done before, and a
failure here is logged and nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from carpool import k8s_events
from carpool.app import recorder
from carpool.app.wiring import Dependencies
from carpool.state.reasons import changes

log = logging.getLogger(__name__)


#: pod key -> (the claim whose launch hit capacity errors, the offerings EC2 had no capacity for)
CapacityErrors = Mapping[str, tuple[str, list[tuple[str, str, str]]]]


def note(unschedulable: Mapping[str, Mapping[str, str]], served: Mapping[str, str | None],
         capacity_errors: CapacityErrors, uids: Mapping[str, str], deps: Dependencies) -> None:
    """Log and write (as events) the pods whose reasons are new or changed, remember them, forget the pods
    `served` (pod -> the claim it will run on, None when not known here) and write their `Nominated`; a
    launch that hit capacity errors and fell back says so on its pods (`InsufficientCapacityError`)."""
    changed = _changed(unschedulable, served, deps)
    events = [k8s_events.insufficient_capacity(pod, uids.get(pod, ""), claim, errors)
              for pod, (claim, errors) in capacity_errors.items()]
    events += [k8s_events.failed_scheduling(pod, uids.get(pod, ""), reasons) for pod, reasons in changed.items()]
    events += [k8s_events.nominated(pod, uids.get(pod, ""), claim) for pod, claim in served.items() if claim]
    recorder.record(events, deps)


def _changed(unschedulable: Mapping[str, Mapping[str, str]], served: Iterable[str],
             deps: Dependencies) -> dict[str, dict[str, str]]:
    """The pods whose reasons are new or changed (all of them when no store is kept), logged."""
    store = deps.reasons
    if store is None:
        return {pod: dict(reasons) for pod, reasons in unschedulable.items()}
    now = deps.clock()
    try:
        known = {e.pod: e for e in store.all(now)}
        changed, refreshed = changes(known, unschedulable, now)
        for entry in changed:
            log.info("pod %s is not launched for: %s", entry.pod, _text(entry.reasons),
                     extra={"pod": entry.pod, "reasons": entry.reasons})
        if changed or refreshed:
            store.save([*changed, *refreshed])
        gone = [pod for pod in served if pod in known]
        if gone:
            store.forget(gone)
    except Exception:  # noqa: BLE001 - reasons are for people; the batch's work is done and stands
        log.exception("could not record why %d pods are pending", len(unschedulable))
        return {}
    return {e.pod: e.reasons for e in changed}


def _text(reasons: Mapping[str, str]) -> str:
    return "; ".join(f"{pool}: {why}" if pool != "*" else why for pool, why in sorted(reasons.items()))
