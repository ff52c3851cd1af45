"""Which EC2NodeClasses refused a launch, said once per cause: logged as one structured line and kept for
`carpool status` (`carpool.state.not_ready`) when a node class's cause first appears or changes, forgotten
once a launch from it succeeds. The pods it left pending say it too, through their reasons
(`carpool.app.reasons`); the `NodeClassNotReady` metric counts it once per pool and call
(`carpool.app.provisioning.settle`), for an alarm that stays raised while the cause lasts.

Never on the critical path: the batch's launches are done before, and a failure here is logged only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from carpool.app.provisioning.outcome import NotReady
from carpool.app.wiring import Dependencies
from carpool.state.not_ready import NodeClassNotReady, changes

log = logging.getLogger(__name__)


def note(not_ready: Mapping[str, NotReady], launched_from: Iterable[str], deps: Dependencies) -> None:
    """Remember (and log when new or changed) each node class `not_ready` names, by pool; forget those a
    launch succeeded from (`launched_from`: node class names)."""
    now = deps.clock()
    found: dict[str, NodeClassNotReady] = {}
    for pool, why in sorted(not_ready.items()):
        if why.from_status:  # what the status already says is no new refusal (`NotReady.from_status`)
            continue
        seen = found.get(why.nodeclass)
        pools = (*seen.nodepools, pool) if seen else (pool,)
        found[why.nodeclass] = NodeClassNotReady(nodeclass=why.nodeclass, cause=str(why.cause), message=why.message,
                                                 nodepools=pools, since=now, confirmed=now)
    store = deps.not_ready
    if store is None:
        _log(found.values())
        return
    try:
        known = {e.nodeclass: e for e in store.all(now)}
        changed, refreshed = changes(known, found.values(), now)
        _log(changed)
        if changed or refreshed:
            store.save([*changed, *refreshed])
        healed = {nc for nc in launched_from if nc in known and nc not in found}
        if healed:
            store.forget(healed)
            log.info("EC2NodeClass launched from again: %s", ", ".join(sorted(healed)))
    except Exception:  # noqa: BLE001 - this is for people; the batch's work is done and stands
        log.exception("could not record %d node classes that refused a launch", len(found))


def _log(entries: Iterable[NodeClassNotReady]) -> None:
    for e in entries:
        log.error("EC2NodeClass %s is not ready (%s): %s; NodePools not launched from: %s", e.nodeclass, e.cause,
                  e.message, ", ".join(e.nodepools),
                  extra={"nodeclass": e.nodeclass, "cause": e.cause, "nodepools": list(e.nodepools)})
