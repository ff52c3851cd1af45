"""Which EC2NodeClasses refused a launch, and why, as of the last time a launch met it: Karpenter's
EC2NodeClass status conditions (`InstanceProfileReady`, `SubnetsReady`... False with a message), which
the status writer reads back into the class's own status (`carpool.app.karpenter_status`).

Kept for `carpool status` and the simulation's status (the failing cause per node class and the NodePools
that met it), and so the provisioner logs a cause once when it first appears or changes, not on every
retry (as `carpool.state.reasons` does for pods). An entry lives `TTL` past its last confirmation, is
rewritten unchanged at most every `REFRESH`, and is forgotten once a launch from the node class succeeds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from carpool.state.reasons import REFRESH, TTL


class NodeClassNotReady(BaseModel):
    """A node class's last refused launch: its cause (`carpool.launch.failures.Cause`) and message, the
    pools that met it, since when."""

    model_config = ConfigDict(frozen=True)

    nodeclass: str
    cause: str
    message: str
    nodepools: tuple[str, ...]
    since: datetime
    confirmed: datetime

    def live(self, now: datetime) -> bool:
        return self.confirmed + TTL > now

    def same(self, other: NodeClassNotReady) -> bool:
        return (self.cause, self.message, self.nodepools) == (other.cause, other.message, other.nodepools)


class NotReadyStore(Protocol):
    def all(self, now: datetime) -> list[NodeClassNotReady]:
        """Every entry still live at `now` (expiry checked in code)."""
        ...

    def save(self, entries: Iterable[NodeClassNotReady]) -> None: ...

    def forget(self, nodeclasses: Iterable[str]) -> None: ...


def changes(known: Mapping[str, NodeClassNotReady], found: Iterable[NodeClassNotReady],
            now: datetime) -> tuple[list[NodeClassNotReady], list[NodeClassNotReady]]:
    """(entries new or changed, entries to write again though unchanged); `found` are stamped `now`."""
    changed, refreshed = [], []
    for entry in found:
        before = known.get(entry.nodeclass)
        if before is None or not before.live(now) or not before.same(entry):
            changed.append(entry)
        elif before.confirmed + REFRESH <= now:
            refreshed.append(before.model_copy(update={"confirmed": now}))
    return changed, refreshed


class MemoryNotReady:
    """`NotReadyStore` in memory (tests, `carpool plan`)."""

    def __init__(self) -> None:
        self._items: dict[str, NodeClassNotReady] = {}

    def all(self, now: datetime) -> list[NodeClassNotReady]:
        return [e for e in self._items.values() if e.live(now)]

    def save(self, entries: Iterable[NodeClassNotReady]) -> None:
        for e in entries:
            self._items[e.nodeclass] = e

    def forget(self, nodeclasses: Iterable[str]) -> None:
        for name in nodeclasses:
            self._items.pop(name, None)
