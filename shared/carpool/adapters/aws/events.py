"""`carpool.ports.EventPublisher` on EventBridge PutEvents.

PutEvents takes at most 10 entries per call and can fail per entry (throttling, an internal error) while
the call itself succeeds, reporting `FailedEntryCount`. Failed entries are retried once (most such
failures are transient); whatever still fails is counted and logged, and the caller decides what to do
(the watcher publishes again on its next run, since its events describe state, not transitions).

Batches go out on a few threads at once: a 10,000-pod burst is 1,000 PutEvents calls, and at a real
round trip of 20-50 ms one after another they would use most of the watcher's minute. botocore clients
are thread-safe; the default connection pool (10) bounds the useful width. The batches go through
`carpool.together`, so each runs in a copy of the caller's context (its environment, its log routing) and
under the caller's X-Ray entity (the PutEvents subsegments belong to the invocation's trace).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from carpool import together
from carpool.adapters.aws import session

log = logging.getLogger(__name__)

#: PutEvents' limit on entries per request.
BATCH_SIZE = 10
#: PutEvents calls in flight at once (below botocore's default pool of 10 connections).
WORKERS = 8


def batches(items: list[dict[str, Any]], size: int = BATCH_SIZE) -> Iterable[list[dict[str, Any]]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class EventBridgePublisher:
    """Publishes entries to `bus_name` (used when an entry names no `EventBusName`)."""

    def __init__(
        self,
        bus_name: str,
        client: Any | None = None,
        sleep: Callable[[float], None] = time.sleep,
        retry_delay: float = 0.2,
        workers: int = WORKERS,
    ) -> None:
        self.bus_name = bus_name
        self._workers = workers
        self.client = client if client is not None else session.client("events")
        self._sleep = sleep
        self._retry_delay = retry_delay

    def put_events(self, entries: Iterable[Mapping[str, Any]]) -> int:
        """Send `entries` in batches of 10; returns how many failed after one retry of the failures."""
        pending = [{"EventBusName": self.bus_name, **entry} for entry in entries]
        failed = self._send(pending)
        if failed:
            self._sleep(self._retry_delay)
            failed = self._send(failed)
        for entry, error in ((e, e.get("_error")) for e in failed):
            log.error("PutEvents entry %s failed: %s", entry.get("DetailType"), error)
        return len(failed)

    def _send(self, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Entries that failed, each carrying its `_error` code for the log (stripped before resending)."""
        clean = list(batches([{k: v for k, v in e.items() if k != "_error"} for e in entries]))
        if len(clean) <= 1 or self._workers <= 1:
            results = [self._send_batch(b) for b in clean]
        else:
            results = together.run([partial(self._send_batch, b) for b in clean], workers=self._workers)
        return [entry for failed in results for entry in failed]

    def _send_batch(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        try:
            response = self.client.put_events(Entries=batch)
        except (ClientError, BotoCoreError) as e:
            # The whole call failed (after botocore's own retries): every entry of it failed.
            return [{**entry, "_error": str(e)} for entry in batch]
        if not response.get("FailedEntryCount"):
            return []
        return [{**entry, "_error": f"{result['ErrorCode']}: {result.get('ErrorMessage', '')}"}
                for entry, result in zip(batch, response.get("Entries", []), strict=False) if result.get("ErrorCode")]
