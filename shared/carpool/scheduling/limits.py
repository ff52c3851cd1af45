"""NodePool limits (cpu, memory, nodes, any resource) during one scheduling batch.

Why "largest remaining option": until launch, a claim may become any of its remaining instance types, so
it is charged against the limit as the biggest of them (Karpenter's subtractMax). The charge only shrinks
as pods narrow the options, which frees room for more claims in the same batch. A new claim only keeps
options whose capacity fits what is left; when nothing fits, the pool reports "limit <resource>
exhausted".
"""

from __future__ import annotations

from collections.abc import Mapping

from carpool.resources import Resources
from carpool.scheduling.options import InstanceIndex

NODES = "nodes"


class PoolLimits:
    """What a pool may still add, and each open claim's charge against it."""

    __slots__ = ("limited", "remaining", "_charges", "_mask_cache")

    def __init__(self, limits: Mapping[str, int] | None, usage: Mapping[str, int]) -> None:
        self.limited = bool(limits)
        self.remaining: Resources = {k: v - usage.get(k, 0) for k, v in (limits or {}).items()}
        self._charges: dict[int, Resources] = {}
        self._mask_cache: tuple[tuple, int, str | None] | None = None

    def allowed(self, index: InstanceIndex) -> tuple[int, str | None]:
        """Instance types a new claim may use, and the resource that ran out when none may."""
        if not self.limited:
            return index.everything, None
        key = tuple(sorted(self.remaining.items()))
        if self._mask_cache is not None and self._mask_cache[0] == key:
            return self._mask_cache[1], self._mask_cache[2]
        mask, exhausted = index.within_limits(self.remaining)
        self._mask_cache = (key, mask, exhausted)
        return mask, exhausted

    def charge(self, claim_id: int, index: InstanceIndex, options: int) -> None:
        """(Re)charge a claim at the largest capacity among its options."""
        if not self.limited:
            return
        new: Resources = {}
        for name in self.remaining:
            new[name] = 1 if name == NODES else index.max_capacity(options, name)
        old = self._charges.get(claim_id, {})
        for name, v in new.items():
            self.remaining[name] -= v - old.get(name, 0)
        self._charges[claim_id] = new
