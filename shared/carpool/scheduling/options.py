"""A NodePool's instance types as an index of bit masks (bit i = the i-th type, types sorted cheapest first).

Why bit masks: a claim's "remaining options" is a subset of the pool's instance types that shrinks as pods
are added. Holding it as a Python int makes "which types still fit these requests and these requirements"
a handful of ANDs instead of a loop over hundreds of types per pod, and "cheapest remaining option" is the
lowest set bit.

`InstanceIndex` answers the scheduler's questions about one pool's types; the pieces behind it are their
own modules: resource ladders (`ladder.py`), requirement and offering masks (`typelabels.py`) and cost
efficiency for the batch's workload shape (`efficiency.py`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from carpool import labels as L
from carpool.requirements import Requirements
from carpool.resources import Resources
from carpool.scheduling.bitmask import bits, lowest_bit
from carpool.scheduling.efficiency import BATCH_SHAPE, EfficiencyRanking
from carpool.scheduling.inputs import InstanceOption
from carpool.scheduling.ladder import ladders
from carpool.scheduling.typelabels import TypeLabels

__all__ = ["InstanceIndex", "bits", "lowest_bit"]


def _cheapest_offer(it: InstanceOption, pool_requirements: Requirements) -> float | None:
    """The type's cheapest available offering within the pool's zones and capacity types."""
    zone_req = pool_requirements.get(L.ZONE)
    ct_req = pool_requirements.get(L.CAPACITY_TYPE)
    prices = [
        o.price
        for o in it.offerings
        if o.available
        and (zone_req is None or zone_req.has(o.zone))
        and (ct_req is None or ct_req.has(o.capacity_type))
    ]
    return min(prices) if prices else None


class InstanceIndex:
    """The instance types of one pool, cheapest first, with masks for resources, labels and offerings."""

    def __init__(self, types: Sequence[InstanceOption], pool_requirements: Requirements) -> None:
        priced = [(_cheapest_offer(it, pool_requirements), it) for it in types]
        priced.sort(key=lambda p: (p[0] is None, p[0] if p[0] is not None else 0.0, p[1].name))
        self.types: list[InstanceOption] = [it for _, it in priced]
        self.prices: list[float | None] = [p for p, _ in priced]
        self.n = len(self.types)
        self.everything = (1 << self.n) - 1
        self.position = {it.name: i for i, it in enumerate(self.types)}
        self._resources = ladders([it.allocatable for it in self.types])
        self._capacity = ladders([it.limit_capacity for it in self.types])
        self.labels = TypeLabels(self.types)
        self.zones = sorted({z for z, _ in self.labels.offers})
        self.capacity_types = sorted({c for _, c in self.labels.offers})
        self.efficiency = EfficiencyRanking(self.types, self.prices)
        #: a claim signature's types in price order, by its requirements (filled by
        #: `planned_claims.price_order`; a function of this index and the requirements only)
        self.price_orders: dict[Requirements, list[Any]] = {}

    # -- resources ----------------------------------------------------------------------------------
    def fit_mask(self, total: Mapping[str, int]) -> int:
        """Types whose allocatable holds `total` in every resource."""
        mask = self.everything
        resources = self._resources
        for name, amount in total.items():
            if amount <= 0:
                continue
            ladder = resources.get(name)
            if ladder is None:
                return 0
            mask &= ladder.at_least(amount)
            if not mask:
                return 0
        return mask

    def max_allocatable(self, mask: int, name: str) -> int:
        ladder = self._resources.get(name)
        return ladder.maximum(mask) if ladder is not None else 0

    def max_capacity(self, mask: int, name: str) -> int:
        ladder = self._capacity.get(name)
        return ladder.maximum(mask) if ladder is not None else 0

    def within_limits(self, remaining: Mapping[str, int]) -> tuple[int, str | None]:
        """Types whose capacity stays within `remaining` (limit minus usage), and the first resource that
        excludes everything (for "limit cpu exhausted")."""
        mask = self.everything
        for name, amount in remaining.items():
            if name == "nodes":
                if amount < 1:
                    return 0, name
                continue
            ladder = self._capacity.get(name)
            if ladder is None:  # no type has it: each counts 0, which fits unless usage passed the limit
                if amount < 0:
                    return 0, name
                continue
            narrowed = ladder.at_most(amount, self.everything)
            if mask and not (mask & narrowed):
                return 0, name
            mask &= narrowed
        return mask, None

    def largest(self, mask: int, name: str = "cpu") -> int:
        """Index of a type of `mask` with the most allocatable `name` (the cheapest such)."""
        ladder = self._resources.get(name)
        if ladder is None or not mask:
            return lowest_bit(mask)
        top = ladder.maximum(mask)
        return lowest_bit(mask & ladder.at_least(top))

    def resources(self) -> Resources:
        return {name: ladder.values[-1] if ladder.values else 0 for name, ladder in self._resources.items()}

    # -- cost efficiency (see efficiency.py) ---------------------------------------------------------
    def set_shape(self, gib_per_vcpu: float | None) -> None:
        """Rank types by price per unit of the batch's workload shape (the default for `efficient`)."""
        self.efficiency.set_shape(gib_per_vcpu)

    def efficient(self, mask: int, tolerance: float, gib_per_vcpu: float | None | object = BATCH_SHAPE) -> int:
        """The types of `mask` within `tolerance` of the best cost per workload unit in `mask`."""
        return self.efficiency.efficient(mask, tolerance, gib_per_vcpu)

    def unit_cost(self, cpu_millis: float, memory_bytes: float) -> float:
        """Rough hourly cost of serving this much cpu and memory with the pool's most efficient types."""
        return self.efficiency.unit_cost(cpu_millis, memory_bytes)

    # -- requirements and labels (see typelabels.py) -------------------------------------------------
    def offering_mask(self, requirements: Requirements) -> int:
        """Types with an available offering whose zone and capacity type the requirements allow."""
        return self.labels.offering_mask(requirements)

    def label_mask(self, requirements: Requirements) -> int:
        """Types whose labels satisfy the requirements (offerings not considered)."""
        return self.labels.label_mask(requirements)

    def compatible_mask(self, requirements: Requirements) -> int:
        """Types satisfying the requirements with an available offering they allow."""
        return self.labels.compatible_mask(requirements)

    def value(self, i: int, key: str) -> str | None:
        """The single label value type i carries for `key` (None when absent or not single-valued)."""
        return self.labels.value(i, key)

    def distinct_values(self, mask: int, key: str, enough: int) -> int:
        """How many distinct values of `key` the types in `mask` span (counting stops at `enough`)."""
        return self.labels.distinct_values(mask, key, enough)

    def domains(self, key: str, mask: int, requirements: Requirements) -> frozenset[str]:
        """Values of a topology key that a claim over `mask` could still land in."""
        return self.labels.domains(key, mask, requirements)

    def tiers(self, requirements: Requirements, keys: Sequence[str]) -> list[int]:
        """Masks of types grouped by preference rank over the ordered keys, best tier first."""
        return self.labels.tiers(requirements, keys)

    # -- offerings ----------------------------------------------------------------------------------
    def price(self, i: int, requirements: Requirements) -> tuple[float, str, str] | None:
        """Cheapest available offering of type i under the requirements: (price, capacity type, zone)."""
        zone_req = requirements.get(L.ZONE)
        ct_req = requirements.get(L.CAPACITY_TYPE)
        best: tuple[float, str, str] | None = None
        for o in self.types[i].offerings:
            if not o.available:
                continue
            if (zone_req is None or zone_req.has(o.zone)) and (ct_req is None or ct_req.has(o.capacity_type)):
                cand = (o.price, o.capacity_type, o.zone)
                if best is None or cand < best:
                    best = cand
        return best

    def names(self, mask: int) -> list[str]:
        return [self.types[i].name for i in bits(mask)]
