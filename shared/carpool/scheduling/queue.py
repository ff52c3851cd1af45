"""The queue of pod groups (Karpenter's queue.go), by group instead of by pod.

Why it loops: a group that cannot be (fully) placed may succeed later, once other groups have placed
the pods its affinity needs, or once one of its preferences is relaxed. So a group that is not done
relaxes one preference and goes to the back; the batch stops when a whole pass over the queue places
nothing and relaxes nothing. Groups enter in the order given (biggest requests first, `podgroups.py`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

from carpool.scheduling.pending import PendingGroup


class PodGroupQueue:
    """Pod groups waiting to be placed, with the staleness count that ends the batch."""

    def __init__(self, groups: Iterable[PendingGroup]) -> None:
        self._queue = deque(groups)

    def run(self, place: Callable[[PendingGroup], int]) -> None:
        """Offer each group to `place` (returns pods placed) until every group is done or a full pass
        over the queue changes nothing."""
        queue = self._queue
        stale = 0
        while queue and stale < len(queue):
            group = queue.popleft()
            placed = place(group)
            if group.remaining == 0:
                stale = 0
                continue
            relaxed = group.preferences.relax() is not None
            stale = 0 if placed or relaxed else stale + 1
            queue.append(group)
