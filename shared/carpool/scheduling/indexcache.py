"""Instance indexes shared by the batches one caller schedules one after another against the same pools.

Building a pool's `InstanceIndex` (its types priced and sorted, resource ladders, label masks) is most of
what a small batch costs, and consolidation schedules many small batches against the same pools in one
run (one simulation per candidate set). An index is a function of the pool's instance types and
requirements only, and what it caches (requirement masks, efficiency rankings) is too, so every batch of
such a caller can use the same one and its caches fill once.

The one piece of per-batch state an index holds is the workload shape (`InstanceIndex.set_shape`): every
batch that reads it (`ScheduleOptions.efficiency_tolerance` set) sets it first, in `Scheduler._prepare`, so
a shape never leaks from one batch into the next. Batches of one cache run one after another, not at once.
"""

from __future__ import annotations

from collections.abc import Sequence

from carpool.requirements import Requirements
from carpool.scheduling.inputs import InstanceOption
from carpool.scheduling.options import InstanceIndex


class IndexCache:
    """`InstanceIndex`es by (instance types, pool requirements). The types are recognised by identity:
    a caller hands every batch the same `PoolSpec`s, whose type lists it does not change meanwhile."""

    def __init__(self) -> None:
        self._indexes: dict[tuple[int, Requirements], tuple[Sequence[InstanceOption], InstanceIndex]] = {}

    def __len__(self) -> int:
        return len(self._indexes)

    def index(self, types: Sequence[InstanceOption], requirements: Requirements) -> InstanceIndex:
        """The index of these types under these requirements, built the first time it is asked for."""
        key = (id(types), requirements)
        known = self._indexes.get(key)
        if known is not None and known[0] is types:
            return known[1]
        built = InstanceIndex(types, requirements)
        self._indexes[key] = (types, built)  # holding `types` keeps its id from being reused meanwhile
        return built
