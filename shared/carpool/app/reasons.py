"""Why a pod is still pending, said once: the provisioner's reasons per NodePool for each pod it could not
serve, logged when they change and kept for `carpool status` (`carpool.state.reasons`).

A pod carpool cannot serve is retried every watcher period; logging its reasons each time would bury the
one line an operator looks for under thousands of identical ones. So a pod's reasons are logged as one
structured line (`pod`, `reasons` by NodePool) when they first appear or change, and the pods served in
the batch lose their entry. Never on the critical path: the batch's launches are done before, and a
failure here is logged and nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from carpool.app.wiring import Dependencies
from carpool.state.reasons import changes

log = logging.getLogger(__name__)


def note(unschedulable: Mapping[str, Mapping[str, str]], served: Iterable[str], deps: Dependencies) -> None:
    """Log the pods whose reasons are new or changed, remember them, and forget the pods `served`."""
    store = deps.reasons
    if store is None:
        return
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


def _text(reasons: Mapping[str, str]) -> str:
    return "; ".join(f"{pool}: {why}" if pool != "*" else why for pool, why in sorted(reasons.items()))
