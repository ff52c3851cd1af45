"""From the filled bins to the batch's result: planned claims, placements, and reasons for the rest.

A claim lists its remaining options cheapest first (by the cheapest offering its requirements allow,
then by name), at most `max_instance_types` of them: CreateFleet takes at most 60 overrides, and the
cheapest are the ones a launch would pick. The price order depends only on the signature, so it is
computed once per signature and filtered per claim by its option mask.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from carpool import labels as L
from carpool.scheduling.bitmask import bits
from carpool.scheduling.claim import CLAIM, Bin
from carpool.scheduling.pending import PendingGroup
from carpool.scheduling.pools import PoolState
from carpool.scheduling.result import InstanceChoice, Placement, PlannedClaim, SchedulingResult
from carpool.scheduling.signature import Signature

# instance types of a signature in price order: (index in the pool's InstanceIndex, choice)
PriceOrder = list[tuple[int, InstanceChoice]]


def build_result(
    bins: Sequence[Bin],
    groups: Sequence[PendingGroup],
    *,
    opted_out: Sequence[str],
    relaxed: dict[str, tuple[str, ...]],
    max_instance_types: int | None,
    reasons: Callable[[PendingGroup], dict[str, str]],
) -> SchedulingResult:
    """Claims in the order they were opened, every placed pod's bin, and per-pool reasons for the pods
    still pending (`reasons` is only called for groups with pods left)."""
    result = SchedulingResult(opted_out=sorted(opted_out), relaxed=dict(relaxed))
    price_orders: dict[int, PriceOrder] = {}
    choices: dict[tuple[int, int], tuple[InstanceChoice, ...]] = {}
    for b in bins:
        if not b.pods:
            continue
        if b.capacity is not None:
            for key in b.pods:
                result.placements[key] = Placement(b.kind, b.name)
            continue
        result.claims.append(planned_claim(b, price_orders, max_instance_types, choices))
        for key in b.pods:
            result.placements[key] = Placement(CLAIM, b.name)
    for group in groups:
        if group.remaining:
            why = reasons(group)
            for key in group.unplaced():
                result.unschedulable[key] = why
    return result


def planned_claim(b: Bin, price_orders: dict[int, PriceOrder], limit: int | None,
                  choices_cache: dict[tuple[int, int], tuple[InstanceChoice, ...]] | None = None) -> PlannedClaim:
    """The claim to launch for a filled bin (`price_orders` caches price orders per signature id,
    `choices_cache` the listed options per (signature id, option mask): claims of one Deployment share
    both)."""
    signature, pool = b.signature, b.pool
    assert pool is not None
    cache_key = (signature.id, b.options)
    choices = choices_cache.get(cache_key) if choices_cache is not None else None
    if choices is None:
        choices = _choices(price_order(signature, pool, price_orders), b.options, limit)
        if choices_cache is not None:
            choices_cache[cache_key] = choices
    zones = signature.domains(L.ZONE)
    capacity_types = signature.domains(L.CAPACITY_TYPE)
    if len(capacity_types) == 1:
        capacity_type: str | None = next(iter(capacity_types))
    else:
        capacity_type = choices[0].capacity_type if choices else None
    return PlannedClaim(
        name=b.name,
        pool=pool.name,
        instance_types=choices,
        option_count=b.options.bit_count(),
        requirements=signature.requirements,
        requests=dict(b.used),
        pods=tuple(b.pods),
        taints=pool.taints,
        startup_taints=pool.spec.startup_taints,
        zone=next(iter(zones)) if len(zones) == 1 else None,
        capacity_type=capacity_type,
    )


def price_order(signature: Signature, pool: PoolState, price_orders: dict[int, PriceOrder]) -> PriceOrder:
    """The signature's instance types with an offering its requirements allow, cheapest first (cached per
    signature, and on the pool's index by the signature's requirements, of which its types are a function:
    batches that share an index, see `carpool.scheduling.indexcache`, share their price orders too)."""
    ordered = price_orders.get(signature.id)
    if ordered is None:
        index = pool.index
        ordered = index.price_orders.get(signature.requirements)
        if ordered is None:
            ordered = []
            for i in bits(signature.type_mask):
                p = index.price(i, signature.requirements)
                if p is not None:
                    ordered.append((i, InstanceChoice(index.types[i].name, p[0], p[1], p[2])))
            ordered.sort(key=lambda t: (t[1].price, t[1].name))
            index.price_orders[signature.requirements] = ordered
        price_orders[signature.id] = ordered
    return ordered


def _choices(ordered: PriceOrder, options: int, limit: int | None) -> tuple[InstanceChoice, ...]:
    """The first `limit` entries of a price order that are among the options."""
    choices = []
    for i, choice in ordered:
        if options >> i & 1:
            choices.append(choice)
            if limit is not None and len(choices) >= limit:
                break
    return tuple(choices)
