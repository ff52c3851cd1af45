"""A NodePool's instance types as an index of bit masks.

Why bit masks: a claim's "remaining options" is a subset of the pool's instance types that shrinks as pods
are added. Holding it as a Python int (bit i = the i-th type, types sorted cheapest first) makes "which
types still fit these requests and these requirements" a handful of ANDs instead of a loop over hundreds
of types per pod, and "cheapest remaining option" is the lowest set bit.

For every resource the index keeps the distinct allocatable values in ascending order and, for each, the
mask of types with at least that much (`ge`); "types that can hold `total`" is then one bisect and one AND
per requested resource.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence

from carpool import labels as L
from carpool.requirements import NEGATIVE, Requirement, Requirements
from carpool.resources import Resources
from carpool.scheduling.inputs import InstanceOption

_OFFERING_KEYS = frozenset({L.ZONE, L.CAPACITY_TYPE})


def lowest_bit(mask: int) -> int:
    """Index of the lowest set bit (mask must be non-zero)."""
    return (mask & -mask).bit_length() - 1


def bits(mask: int) -> Iterable[int]:
    """Indices of the set bits, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


class _Ladder:
    """Per-resource ascending distinct values and the `>= value` masks (last entry: the empty mask)."""

    __slots__ = ("values", "ge")

    def __init__(self, per_type: Sequence[int]) -> None:
        self.values = sorted(set(per_type))
        self.ge = []
        for v in self.values:
            m = 0
            for i, x in enumerate(per_type):
                if x >= v:
                    m |= 1 << i
            self.ge.append(m)
        self.ge.append(0)

    def at_least(self, amount: int) -> int:
        return self.ge[bisect_left(self.values, amount)]

    def at_most(self, amount: int, everything: int) -> int:
        return everything & ~self.ge[bisect_right(self.values, amount)]

    def maximum(self, mask: int) -> int:
        """The largest value among types in `mask` (0 when mask is empty)."""
        ge = self.ge
        if not mask or not (ge[0] & mask):
            return 0
        lo, hi = 0, len(self.values) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if ge[mid] & mask:
                lo = mid
            else:
                hi = mid - 1
        return self.values[lo]


class InstanceIndex:
    """The instance types of one pool, cheapest first, with masks for resources, labels and offerings."""

    def __init__(self, types: Sequence[InstanceOption], pool_requirements: Requirements) -> None:
        zone_req = pool_requirements.get(L.ZONE)
        ct_req = pool_requirements.get(L.CAPACITY_TYPE)

        def cheapest(it: InstanceOption) -> float | None:
            prices = [
                o.price
                for o in it.offerings
                if o.available
                and (zone_req is None or zone_req.has(o.zone))
                and (ct_req is None or ct_req.has(o.capacity_type))
            ]
            return min(prices) if prices else None

        priced = [(cheapest(it), it) for it in types]
        priced.sort(key=lambda p: (p[0] is None, p[0] if p[0] is not None else 0.0, p[1].name))
        self.types: list[InstanceOption] = [it for _, it in priced]
        self.prices: list[float | None] = [p for p, _ in priced]
        self.n = len(self.types)
        self.everything = (1 << self.n) - 1
        self.position = {it.name: i for i, it in enumerate(self.types)}
        self._resources = self._ladders([it.allocatable for it in self.types])
        self._capacity = self._ladders([it.limit_capacity for it in self.types])
        self._type_keys = frozenset(k for it in self.types for k in it.requirements if k not in _OFFERING_KEYS)
        self._type_reqs = [it.requirements for it in self.types]
        self._key_cache: dict[tuple[str, Requirement], int] = {}
        self._reqs_cache: dict[Requirements, int] = {}
        self._offer: dict[tuple[str, str], int] = {}
        for i, it in enumerate(self.types):
            for o in it.offerings:
                if o.available:
                    self._offer[(o.zone, o.capacity_type)] = self._offer.get((o.zone, o.capacity_type), 0) | (1 << i)
        self.zones = sorted({z for z, _ in self._offer})
        self.capacity_types = sorted({c for _, c in self._offer})
        self._offer_cache: dict[tuple[Requirement | None, Requirement | None], int] = {}
        self._rankings: dict[int | None, tuple[list[float], list[int]]] = {}

    @staticmethod
    def _ladders(lists: Sequence[Mapping[str, int]]) -> dict[str, _Ladder]:
        names = {k for rl in lists for k in rl}
        return {name: _Ladder([rl.get(name, 0) for rl in lists]) for name in names}

    # -- resources ----------------------------------------------------------------------------------
    def fit_mask(self, total: Mapping[str, int]) -> int:
        """Types whose allocatable holds `total` in every resource."""
        mask = self.everything
        ladders = self._resources
        for name, amount in total.items():
            if amount <= 0:
                continue
            ladder = ladders.get(name)
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
            if ladder is None:
                continue
            narrowed = ladder.at_most(amount, self.everything)
            if mask and not (mask & narrowed):
                return 0, name
            mask &= narrowed
        return mask, None

    # -- cost efficiency ----------------------------------------------------------------------------
    def set_shape(self, gib_per_vcpu: float | None) -> None:
        """Rank types by price per unit of the batch's workload shape (the default for `efficient`).

        A node of type t holds `min(cpu_t, memory_t / gib_per_vcpu)` vCPU worth of a workload that asks
        `gib_per_vcpu` GiB per vCPU; its price divided by that is what a unit of the workload costs on
        it. (A 2-vCPU burstable type with 15 MiB of allocatable memory is cheap per vCPU and useless.)
        """
        self._shape = gib_per_vcpu
        self._ranking(gib_per_vcpu)

    def _ranking(self, gib_per_vcpu: float | None) -> tuple[list[float], list[int]]:
        """(efficiencies ascending, prefix masks) for a shape, quantized to quarter octaves and cached."""
        key = None if not gib_per_vcpu else round(math.log2(gib_per_vcpu) * 4)
        got = self._rankings.get(key)
        if got is not None:
            return got
        ratio = None if key is None else 2 ** (key / 4)
        eff: list[tuple[float, int]] = []
        for i, it in enumerate(self.types):
            price = self.prices[i]
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

    def efficient(self, mask: int, tolerance: float, gib_per_vcpu: float | None | object = ...) -> int:
        """The types of `mask` whose cost per workload unit is within `tolerance` of the best in `mask`
        (shape: the batch's, unless given; all of `mask` when no shape was ever set)."""
        if gib_per_vcpu is ...:
            if not hasattr(self, "_shape"):
                return mask
            gib_per_vcpu = self._shape
        eff_sorted, prefix = self._ranking(gib_per_vcpu)  # type: ignore[arg-type]
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
        """Rough hourly cost of serving this much cpu and memory with fractional nodes of the pool's most
        efficient types for its shape (for comparing leftovers, not for billing)."""
        if cpu_millis <= 0 and memory_bytes <= 0:
            return 0.0
        ratio = (memory_bytes / 2**30) / (cpu_millis / 1000) if cpu_millis > 0 else None
        eff_sorted, prefix = self._ranking(ratio if ratio else None)
        best = float("inf")
        for i in bits(prefix[min(7, len(prefix) - 1)] if prefix else 0):
            price = self.prices[i]
            alloc = self.types[i].allocatable
            cpu, mem = alloc.get("cpu", 0), alloc.get("memory", 0)
            if price is None or (cpu_millis > 0 and cpu <= 0) or (memory_bytes > 0 and mem <= 0):
                continue
            nodes = max(cpu_millis / cpu if cpu_millis > 0 else 0.0, memory_bytes / mem if memory_bytes > 0 else 0.0)
            best = min(best, price * nodes)
        return best

    def largest(self, mask: int, name: str = "cpu") -> int:
        """Index of a type of `mask` with the most allocatable `name` (the cheapest such)."""
        ladder = self._resources.get(name)
        if ladder is None or not mask:
            return lowest_bit(mask)
        top = ladder.maximum(mask)
        return lowest_bit(mask & ladder.at_least(top))

    # -- requirements -------------------------------------------------------------------------------
    def _key_mask(self, key: str, req: Requirement) -> int:
        cached = self._key_cache.get((key, req))
        if cached is not None:
            return cached
        absent_ok = req.operator in NEGATIVE and req.gt is None and req.lt is None
        mask = 0
        for i, treqs in enumerate(self._type_reqs):
            own = treqs.get(key)
            if own is None:
                ok = absent_ok
            elif absent_ok and own.allows_absent():
                # the type lacks the label (DoesNotExist) or excludes values: both sides accept a node
                # without it, as Karpenter's Intersects treats two negative requirements
                ok = True
            elif not own.complement and len(own.values) == 1 and not own.patterns:
                ok = req.has(next(iter(own.values)))
            else:
                ok = not own.intersection(req).is_empty()
            if ok:
                mask |= 1 << i
        self._key_cache[(key, req)] = mask
        return mask

    def offering_mask(self, requirements: Requirements) -> int:
        """Types with an available offering whose zone and capacity type the requirements allow."""
        zone_req = requirements.get(L.ZONE)
        ct_req = requirements.get(L.CAPACITY_TYPE)
        cache_key = (zone_req, ct_req)
        cached = self._offer_cache.get(cache_key)
        if cached is not None:
            return cached
        mask = 0
        for (zone, ct), m in self._offer.items():
            if (zone_req is None or zone_req.has(zone)) and (ct_req is None or ct_req.has(ct)):
                mask |= m
        self._offer_cache[cache_key] = mask
        return mask

    def label_mask(self, requirements: Requirements) -> int:
        """Types whose labels satisfy the requirements (a type without a label the types carry counts as
        the label being absent, so `gpu-count Exists` excludes non-GPU types). Offerings not considered."""
        mask = self.everything
        for key, req in requirements.items():
            if key in self._type_keys:
                mask &= self._key_mask(key, req)
                if not mask:
                    return 0
        return mask

    def compatible_mask(self, requirements: Requirements) -> int:
        """Types satisfying the requirements with an available offering they allow."""
        cached = self._reqs_cache.get(requirements)
        if cached is not None:
            return cached
        mask = self.label_mask(requirements) & self.offering_mask(requirements)
        self._reqs_cache[requirements] = mask
        return mask

    # -- values -------------------------------------------------------------------------------------
    def value(self, i: int, key: str) -> str | None:
        """The single label value type i carries for `key` (None when absent or not single-valued)."""
        req = self._type_reqs[i].get(key)
        if req is None or req.complement or len(req.values) != 1:
            return None
        return next(iter(req.values))

    def distinct_values(self, mask: int, key: str, enough: int) -> int:
        """How many distinct values of `key` the types in `mask` span (counting stops at `enough`)."""
        seen: set[str] = set()
        for i in bits(mask):
            v = self.value(i, key)
            if v is not None:
                seen.add(v)
                if len(seen) >= enough:
                    break
        return len(seen)

    def domains(self, key: str, mask: int, requirements: Requirements) -> frozenset[str]:
        """Values of a topology key that a claim over `mask` could still land in."""
        req = requirements.get(key)
        if key == L.ZONE or key == L.CAPACITY_TYPE:
            pos = 0 if key == L.ZONE else 1
            values = {zc[pos] for zc, m in self._offer.items() if m & mask}
        else:
            values = {v for i in bits(mask) if (v := self.value(i, key)) is not None}
            if not values and req is not None and not req.complement:
                values = set(req.values)
        if req is not None:
            values = {v for v in values if req.has(v)}
        return frozenset(values)

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

    def tiers(self, requirements: Requirements, keys: Sequence[str]) -> list[int]:
        """Masks of types grouped by preference rank over the ordered keys, best tier first."""
        by_rank: dict[tuple[int, ...], int] = {}
        for i in range(self.n):
            rank = []
            for key in keys:
                req = requirements.get(key)
                value = self.value(i, key)
                if req is None:
                    rank.append(0)
                else:
                    rank.append(req.preference_rank(value) if value is not None else len(req.order))
            t = tuple(rank)
            by_rank[t] = by_rank.get(t, 0) | (1 << i)
        return [by_rank[r] for r in sorted(by_rank)]

    def names(self, mask: int) -> list[str]:
        return [self.types[i].name for i in bits(mask)]

    def resources(self) -> Resources:
        return {name: ladder.values[-1] if ladder.values else 0 for name, ladder in self._resources.items()}
