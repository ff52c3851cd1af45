"""Why each pod carpool could not serve is still pending, as of the last time it tried.

Karpenter answers "why is my pod pending" on the pod itself (a `FailedScheduling` event with a reason per
NodePool). carpool keeps the same reasons in its state table, one item per pod, for two readers: the
provisioner, which logs a pod's reasons once when they change rather than on every retry
(`carpool.app.reasons`), and `carpool status`, which lists the pods pending with their last reasons.

An entry lives `TTL` past the last time the reasons were confirmed; confirming unchanged reasons rewrites
the entry at most every `REFRESH` (a pod retried every minute for hours costs a write every few minutes, not
one a minute). A pod carpool then serves loses its entry (`forget`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Protocol

from pydantic import BaseModel, ConfigDict

#: how long an entry outlives its last confirmation (a pod nobody retries any more is no longer waiting)
TTL = timedelta(minutes=15)
#: unchanged reasons are written again only this long after the last write
REFRESH = timedelta(minutes=5)


class PodReasons(BaseModel):
    """One pending pod's reasons, by NodePool (`*` when no pool was tried), since `since`."""

    model_config = ConfigDict(frozen=True)

    pod: str
    reasons: dict[str, str]
    since: datetime
    confirmed: datetime

    def live(self, now: datetime) -> bool:
        return self.confirmed + TTL > now


class PodReasonStore(Protocol):
    def all(self, now: datetime) -> list[PodReasons]:
        """Every entry still live at `now` (expiry checked in code)."""
        ...

    def save(self, entries: Iterable[PodReasons]) -> None: ...

    def forget(self, pods: Iterable[str]) -> None: ...


def changes(known: Mapping[str, PodReasons], found: Mapping[str, Mapping[str, str]],
            now: datetime) -> tuple[list[PodReasons], list[PodReasons]]:
    """(entries whose reasons are new or changed, entries to write again though unchanged)."""
    changed, refreshed = [], []
    for pod, reasons in found.items():
        before = known.get(pod)
        if before is None or not before.live(now) or before.reasons != dict(reasons):
            changed.append(PodReasons(pod=pod, reasons=dict(reasons), since=now, confirmed=now))
        elif before.confirmed + REFRESH <= now:
            refreshed.append(before.model_copy(update={"confirmed": now}))
    return changed, refreshed


class MemoryPodReasons:
    """`PodReasonStore` in memory (tests, `carpool plan`)."""

    def __init__(self) -> None:
        self._items: dict[str, PodReasons] = {}

    def all(self, now: datetime) -> list[PodReasons]:
        return [e for e in self._items.values() if e.live(now)]

    def save(self, entries: Iterable[PodReasons]) -> None:
        for e in entries:
            self._items[e.pod] = e

    def forget(self, pods: Iterable[str]) -> None:
        for pod in pods:
            self._items.pop(pod, None)
