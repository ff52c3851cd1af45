"""Which bins still have room for a request: bit masks over bins, per resource threshold.

Why: with thousands of open claims, "find the first claim with room for this pod" must not walk them all.
The thresholds are the distinct cpu and memory requests of the batch (quantized to at most
`MAX_THRESHOLDS` per resource), so for every pod group "bins with at least its request free" is an AND of
two or three pre-kept masks. Rooms only shrink during a batch, so each bin crosses each threshold at most
once. A bin's room is an upper bound (claims: largest remaining option minus what is placed); the exact
check happens on the bin the masks point at.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping

from carpool.resources import CPU, MEMORY, PODS

MAX_THRESHOLDS = 64
INDEXED = (CPU, MEMORY, PODS)


def _quantize(values: Iterable[int]) -> list[int]:
    distinct = sorted(set(values) | {0})
    if len(distinct) <= MAX_THRESHOLDS:
        return distinct
    step = (len(distinct) - 1) / (MAX_THRESHOLDS - 1)
    return sorted({distinct[round(i * step)] for i in range(MAX_THRESHOLDS)})


class RoomIndex:
    """Per resource: ascending thresholds and, for each, the mask of bins with at least that much room."""

    def __init__(self, requests: Iterable[Mapping[str, int]]) -> None:
        reqs = list(requests)
        self.thresholds = {r: _quantize(q.get(r, 0) for q in reqs) for r in INDEXED}
        if 1 not in self.thresholds[PODS]:  # every pod takes a pod slot
            self.thresholds[PODS] = sorted({*self.thresholds[PODS], 1})
        self.masks = {r: [0] * len(t) for r, t in self.thresholds.items()}
        self._rooms: dict[int, tuple[int, ...]] = {}

    def position(self, request: Mapping[str, int]) -> tuple[int, ...]:
        """For a request, the index of the largest threshold not above it, per indexed resource."""
        wanted = {**request, PODS: max(request.get(PODS, 0), 1)}
        return tuple(bisect_right(self.thresholds[r], wanted.get(r, 0)) - 1 for r in INDEXED)

    def candidates(self, position: tuple[int, ...]) -> int:
        m = self.masks
        return m[CPU][position[0]] & m[MEMORY][position[1]] & m[PODS][position[2]]

    def update(self, bin_id: int, room: Mapping[str, int]) -> None:
        """Set a bin's room (new bins, or shrunk rooms)."""
        new = tuple(room.get(r, 0) for r in INDEXED)
        old = self._rooms.get(bin_id)
        self._rooms[bin_id] = new
        bit = 1 << bin_id
        for n, r in enumerate(INDEXED):
            ths = self.thresholds[r]
            masks = self.masks[r]
            hi_new = bisect_right(ths, new[n])  # thresholds[:hi_new] are <= new room
            if old is None:
                for j in range(hi_new):
                    masks[j] |= bit
            else:
                hi_old = bisect_right(ths, old[n])
                for j in range(hi_new, hi_old):
                    masks[j] &= ~bit
                for j in range(hi_old, hi_new):  # room grew (not expected, kept correct)
                    masks[j] |= bit
