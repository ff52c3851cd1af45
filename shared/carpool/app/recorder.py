"""Writing Kubernetes Events (`carpool.k8s_events`) the way Kubernetes' event recorder does: never on the
critical path, and bounded.

- Failure isolation: an event is for people; a write that fails is logged and the caller goes on (its
  launches, drains and answers stand).
- Aggregation: an event carpool already wrote (same object, reason and message) gets its `count` bumped,
  not a second object (`Cluster.record_event`); within one invocation it is written once.
- Rate: at most `MAX_PER_INVOCATION` writes per invocation, the rest counted in one log line. client-go's
  recorder drops events past a per-object token bucket (burst 25); carpool's functions are per batch, so
  the bound is per invocation: a 10,000-pod burst in batches of 1,000 writes at most ten times this many
  events, however many pods it serves.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from functools import partial

from carpool import together
from carpool.app.wiring import Dependencies
from carpool.k8s_events import KubeEvent

log = logging.getLogger(__name__)

MAX_PER_INVOCATION = 100


def record(events: Iterable[KubeEvent], deps: Dependencies) -> int:
    """Write `events` (deduplicated, at most `MAX_PER_INVOCATION`), `together.MAX_WORKERS` at a time: they
    come after the batch's launches but before its answer, so a provisioner's slot is not held for a
    hundred round trips one after the other. Returns how many were written."""
    unique = list({e.name: e for e in events}.values())
    kept, skipped = unique[:MAX_PER_INVOCATION], len(unique) - MAX_PER_INVOCATION
    now = deps.clock()
    written = sum(together.run([partial(_write, event, now, deps) for event in kept]))
    if skipped > 0:
        log.info("%d more Kubernetes events not written (at most %d an invocation)", skipped, MAX_PER_INVOCATION)
    return written


def _write(event: KubeEvent, now: datetime, deps: Dependencies) -> bool:
    try:
        deps.cluster.record_event(event, now)
        return True
    except Exception as exc:  # noqa: BLE001 - see the module docstring: events never fail the caller
        log.warning("could not write the %s event on %s %s: %s: %s", event.reason, event.involved.kind,
                    event.involved.name, type(exc).__name__, exc)
        return False
