"""Cost efficiency of a pool's instance types for the batch's workload shape.

A node of type t holds `min(cpu_t, memory_t / gib_per_vcpu)` vCPU worth of a workload that asks
`gib_per_vcpu` GiB per vCPU; its price divided by that is what a unit of the workload costs on it. (A
2-vCPU burstable type with 15 MiB of allocatable memory is cheap per vCPU and useless.) Types ranked by
that cost let a new claim grow only into types within a tolerance of the best one.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence

from carpool.scheduling.bitmask import bits
from carpool.scheduling.inputs import InstanceOption

#: `efficient` without an explicit shape: the one `set_shape` chose
BATCH_SHAPE: object = object()


class EfficiencyRanking:
    """Types (indices into `types`, priced by `prices`) ranked by price per workload unit, per shape."""

    def __init__(self, types: Sequence[InstanceOption], prices: Sequence[float | None]) -> None:
        self._types = types
        self._prices = prices
        self._shape_set = False
        self._shape: float | None = None
        self._rankings: dict[int | None, tuple[list[float], list[int]]] = {}

    def set_shape(self, gib_per_vcpu: float | None) -> None:
        """Rank types by price per unit of the batch's workload shape (the default for `efficient`)."""
        self._shape_set = True
        self._shape = gib_per_vcpu
        self.ranking(gib_per_vcpu)

    def ranking(self, gib_per_vcpu: float | None) -> tuple[list[float], list[int]]:
        """(efficiencies ascending, prefix masks) for a shape, quantized to quarter octaves and cached."""
        key = None if not gib_per_vcpu else round(math.log2(gib_per_vcpu) * 4)
        got = self._rankings.get(key)
        if got is not None:
            return got
        ratio = None if key is None else 2 ** (key / 4)
        eff: list[tuple[float, int]] = []
        for i, it in enumerate(self._types):
            price = self._prices[i]
            cpu = it.allocatable.get("cpu", 0) / 1000
            mem = it.allocatable.get("memory", 0) / 2**30
            held = cpu if ratio is None else min(cpu, mem / ratio)
            eff.append((price / held if price is not None and held > 0 else float("inf"), i))
        eff.sort()
        prefix, acc = [], 0
        for _, i in eff:
            acc |= 1 << i
            prefix.append(acc)
        got = self._rankings[key] = ([e for e, _ in eff], prefix)
        return got

    def efficient(self, mask: int, tolerance: float, gib_per_vcpu: float | None | object = BATCH_SHAPE) -> int:
        """The types of `mask` whose cost per workload unit is within `tolerance` of the best in `mask`
        (shape: the batch's, unless given; all of `mask` when no shape was ever set)."""
        if gib_per_vcpu is BATCH_SHAPE:
            if not self._shape_set:
                return mask
            gib_per_vcpu = self._shape
        assert gib_per_vcpu is None or isinstance(gib_per_vcpu, int | float)
        eff_sorted, prefix = self.ranking(gib_per_vcpu)
        if not prefix or not mask or not (prefix[-1] & mask):
            return mask
        lo, hi = 0, len(prefix) - 1
        while lo < hi:  # first prefix that reaches into mask = the best type of mask
            mid = (lo + hi) // 2
            if prefix[mid] & mask:
                hi = mid
            else:
                lo = mid + 1
        best = eff_sorted[lo]
        if best == float("inf"):
            return mask
        last = bisect_right(eff_sorted, best * (1 + tolerance)) - 1
        return prefix[last] & mask

    def unit_cost(self, cpu_millis: float, memory_bytes: float) -> float:
        """Rough hourly cost of serving this much cpu and memory with fractional nodes of the most
        efficient types for its shape (for comparing leftovers, not for billing)."""
        if cpu_millis <= 0 and memory_bytes <= 0:
            return 0.0
        ratio = (memory_bytes / 2**30) / (cpu_millis / 1000) if cpu_millis > 0 else None
        eff_sorted, prefix = self.ranking(ratio if ratio else None)
        best = float("inf")
        for i in bits(prefix[min(7, len(prefix) - 1)] if prefix else 0):
            price = self._prices[i]
            alloc = self._types[i].allocatable
            cpu, mem = alloc.get("cpu", 0), alloc.get("memory", 0)
            if price is None or (cpu_millis > 0 and cpu <= 0) or (memory_bytes > 0 and mem <= 0):
                continue
            nodes = max(cpu_millis / cpu if cpu_millis > 0 else 0.0, memory_bytes / mem if memory_bytes > 0 else 0.0)
            best = min(best, price * nodes)
        return best
