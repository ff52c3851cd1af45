"""Which of a pool's instance types satisfy requirements, and the label values they span.

A type's labels are its requirements (single-valued `In`); zone and capacity type are left to its
offerings, which are the source of truth for those. Masks are cached per requirement (and per whole
requirement set): the claims of a batch share a few requirement signatures, asked about again and again.
"""

from __future__ import annotations

from collections.abc import Sequence

from carpool import labels as L
from carpool.requirements import NEGATIVE, Requirement, Requirements
from carpool.scheduling.bitmask import bits
from carpool.scheduling.inputs import InstanceOption

OFFERING_KEYS = frozenset({L.ZONE, L.CAPACITY_TYPE})


class TypeLabels:
    """Requirement masks over `types` (bit i = types[i]), from their labels and available offerings."""

    def __init__(self, types: Sequence[InstanceOption]) -> None:
        self.n = len(types)
        self.everything = (1 << self.n) - 1
        self.type_keys = frozenset(k for it in types for k in it.requirements if k not in OFFERING_KEYS)
        self.type_reqs = [it.requirements for it in types]
        #: (zone, capacity type) -> the types with an available offering there
        self.offers: dict[tuple[str, str], int] = {}
        for i, it in enumerate(types):
            for o in it.offerings:
                if o.available:
                    self.offers[(o.zone, o.capacity_type)] = self.offers.get((o.zone, o.capacity_type), 0) | (1 << i)
        self._key_cache: dict[tuple[str, Requirement], int] = {}
        self._reqs_cache: dict[Requirements, int] = {}
        self._offer_cache: dict[tuple[Requirement | None, Requirement | None], int] = {}

    def key_mask(self, key: str, req: Requirement) -> int:
        """Types whose label `key` satisfies `req` (a type without the label: as the label being absent)."""
        cached = self._key_cache.get((key, req))
        if cached is not None:
            return cached
        absent_ok = req.operator in NEGATIVE and req.gt is None and req.lt is None
        mask = 0
        for i, treqs in enumerate(self.type_reqs):
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
        for (zone, ct), m in self.offers.items():
            if (zone_req is None or zone_req.has(zone)) and (ct_req is None or ct_req.has(ct)):
                mask |= m
        self._offer_cache[cache_key] = mask
        return mask

    def label_mask(self, requirements: Requirements) -> int:
        """Types whose labels satisfy the requirements (a type without a label the types carry counts as
        the label being absent, so `gpu-count Exists` excludes non-GPU types). Offerings not considered."""
        mask = self.everything
        for key, req in requirements.items():
            if key in self.type_keys:
                mask &= self.key_mask(key, req)
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

    def value(self, i: int, key: str) -> str | None:
        """The single label value type i carries for `key` (None when absent or not single-valued)."""
        req = self.type_reqs[i].get(key)
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
            values = {zc[pos] for zc, m in self.offers.items() if m & mask}
        else:
            values = {v for i in bits(mask) if (v := self.value(i, key)) is not None}
            if not values and req is not None and not req.complement:
                values = set(req.values)
        if req is not None:
            values = {v for v in values if req.has(v)}
        return frozenset(values)

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
