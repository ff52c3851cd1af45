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

from carpool.app.wiring import Dependencies
from carpool.k8s_events import KubeEvent

log = logging.getLogger(__name__)

MAX_PER_INVOCATION = 100


def record(events: Iterable[KubeEvent], deps: Dependencies) -> int:
    """Write `events` (deduplicated, at most `MAX_PER_INVOCATION`); returns how many were written."""
    written, seen, skipped = 0, set(), 0
    for event in events:
        if event.name in seen:
            continue
        seen.add(event.name)
        if written >= MAX_PER_INVOCATION:
            skipped += 1
            continue
        try:
            deps.cluster.record_event(event, deps.clock())
            written += 1
        except Exception as exc:  # noqa: BLE001 - see the module docstring: events never fail the caller
            log.warning("could not write the %s event on %s %s: %s: %s", event.reason, event.involved.kind,
                        event.involved.name, type(exc).__name__, exc)
    if skipped:
        log.info("%d more Kubernetes events not written (at most %d an invocation)", skipped, MAX_PER_INVOCATION)
    return written
