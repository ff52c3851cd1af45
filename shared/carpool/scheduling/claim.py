"""Bins: the places pods go, and how far a claim being filled can grow.

Existing nodes and in-flight claims are fixed bins (`capacity` is what they have left). A new claim is
under construction: it holds its pool, its requirement signature (the pool's requirements narrowed by
every pod added: node affinity, chosen topology domains), the resources used (DaemonSet overhead + pods)
and its remaining instance type options as a mask over the pool's `InstanceIndex`. Every option in the
mask can hold everything placed so far and has an available offering its requirements allow.

The functions below answer "how many more pods of this size fit" over a set of options at once (the
masks make that one AND per resource), never option by option.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from carpool.resources import Resources
from carpool.scheduling.inputs import HostPort
from carpool.scheduling.pools import PoolState
from carpool.scheduling.room import INDEXED
from carpool.scheduling.signature import Signature
from carpool.scheduling.topologygroup import TopologyGroup

CLAIM = "claim"
IN_FLIGHT = "inflight"
NODE = "node"


@dataclass(slots=True, eq=False)
class Bin:
    """A node or claim pods can be placed on. Fixed bins have `capacity`; claims have `options`.

    `growth_options`: a claim grows only while one of these (cost-efficient) options still fits.
    `pending_counts`: topology counts waiting for the claim's domain of that key to be decided (a claim
    whose zone is open counts its pods in a zone once a later pod pins it).
    `split_cpu`: the cpu this claim adds to its pool's proportional-split amount.
    """

    id: int
    name: str
    kind: str
    signature: Signature
    pool: PoolState | None
    used: Resources
    capacity: Resources | None = None
    options: int = 0
    ports: list[HostPort] = field(default_factory=list)
    pods: list[str] = field(default_factory=list)
    pending_counts: list[tuple[TopologyGroup, int]] = field(default_factory=list)
    growth_options: int = -1
    hostname: str = ""
    split_cpu: int = 0

    @property
    def fixed(self) -> bool:
        return self.capacity is not None

    def room(self) -> Resources:
        """Upper bound of what one more pod may use (claims: the largest option it may grow into)."""
        if self.capacity is not None:
            return {r: self.capacity.get(r, 0) - self.used.get(r, 0) for r in INDEXED}
        assert self.pool is not None
        index = self.pool.index
        growable = self.options & self.growth_options
        return {r: index.max_allocatable(growable, r) - self.used.get(r, 0) for r in INDEXED}

    def port_conflict(self, ports: tuple[HostPort, ...]) -> bool:
        return any(p.conflicts(q) for p in ports for q in self.ports)


def min_values_ok(pool: PoolState, options: int) -> bool:
    """Whether the options still offer the pool's `minValues` distinct values of each key."""
    return all(pool.index.distinct_values(options, key, n) >= n for key, n in pool.min_values.items())


def options_holding(pool: PoolState, used: Resources, options: int, request: Resources, count: int) -> int:
    """The options that hold `used` plus `count` pods of size `request` (0 when that breaks minValues)."""
    total = dict(used)
    for r, v in request.items():
        total[r] = total.get(r, 0) + count * v
    mask = options & pool.index.fit_mask(total)
    if mask and pool.min_values and not min_values_ok(pool, mask):
        return 0
    return mask


def options_after(pool: PoolState, used: Resources, options: int, request: Resources, count: int) -> int:
    """A claim's options once `count` pods of size `request` join it (minValues not checked)."""
    total = dict(used)
    for r, v in request.items():
        total[r] = total.get(r, 0) + count * v
    return options & pool.index.fit_mask(total)


def max_fit(pool: PoolState, used: Resources, options: int, request: Resources, cap: int) -> tuple[int, int]:
    """Most pods (<= cap) of size `request` that some option can hold on top of `used`, and the options
    that hold them. An upper bound from the largest option per resource first, then a binary search."""
    index = pool.index
    upper = cap
    for r, v in request.items():
        q = (index.max_allocatable(options, r) - used.get(r, 0)) // v
        if q < upper:
            upper = q
            if upper <= 0:
                return 0, 0
    mask = options_holding(pool, used, options, request, upper)
    if mask:
        return upper, mask
    best = options_holding(pool, used, options, request, 1)
    if not best:
        return 0, 0
    lo, hi = 1, upper
    while hi - lo > 1:
        mid = (lo + hi) // 2
        mask = options_holding(pool, used, options, request, mid)
        if mask:
            lo, best = mid, mask
        else:
            hi = mid
    return lo, best


def preferred_tier(pool: PoolState, options: int) -> int:
    """Restrict a new claim to the best preference tier that still has a fitting, offered option."""
    if pool.tiers is None:
        return options if min_values_ok(pool, options) else 0
    for tier in pool.tiers:
        in_tier = options & tier
        if in_tier and min_values_ok(pool, in_tier):
            return in_tier
    return 0


def efficient_options(pool: PoolState, options: int, tolerance: float | None) -> int:
    """The options a new claim may grow into: those within `tolerance` of the best price per unit of
    the batch's workload shape (all of them when `tolerance` is None, or when the efficient ones would
    break minValues)."""
    if tolerance is None:
        return options
    grow = pool.index.efficient(options, tolerance)
    if pool.min_values and not min_values_ok(pool, grow):
        return options
    return grow


def fixed_fit(capacity: Resources, used: Resources, request: Resources, cap: int) -> int:
    """Most pods (<= cap) of size `request` a fixed bin still has room for."""
    k = cap
    for r, v in request.items():
        q = (capacity.get(r, 0) - used.get(r, 0)) // v
        if q < k:
            k = q
    return max(k, 0)
