"""`carpool plan` after a NodePool's limit: what the provisioner would do once its claims launched.

While scheduling, a new claim is charged its largest remaining option (Karpenter's `subtractMax`), so a
batch near a limit leaves pods pending that the nodes really launched leave room for. The provisioner
gives those pods another round once its launches charged the claims their instance types
(`carpool.app.provisioning.catch_up`); a plan does the same with the claims launched as planned, each
as its cheapest option (what its price column says, and what CreateFleet's lowest-price strategy picks
when it has capacity). Those claims become in-flight claims with no room left (their pods count for
topology), the pools' usage is what they hold (`carpool.state.charges`), and only the pods a limit held
back are scheduled again, until a round places none.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from carpool import labels as L
from carpool.resources import Resources, add
from carpool.scheduling import explain
from carpool.scheduling import inputs as si
from carpool.scheduling.result import PlannedClaim, SchedulingResult
from carpool.state import charges

Schedule = Callable[[Sequence[si.PodSpec], Sequence[si.PoolSpec], Sequence[si.InFlightClaim],
                     Callable[[str, int], str]], SchedulingResult]


def held_by_limits(result: SchedulingResult) -> list[str]:
    """The pods left pending because a pool's limit excluded every instance type."""
    return [key for key, why in result.unschedulable.items() if explain.limited_pools(why)]


def catch_up(result: SchedulingResult, pods: Sequence[si.PodSpec], pools: Sequence[si.PoolSpec],
             schedule: Schedule) -> SchedulingResult:
    """`result` with the pods a limit held back planned again, round after round, while a round places
    some (`schedule(pods, pools, in_flight, claim_name)` plans one round)."""
    specs = {p.key: p for p in pods}
    while held := [k for k in held_by_limits(result) if k in specs]:
        launched = [_in_flight(c, specs) for c in result.claims]
        again = schedule([specs[k] for k in held], _with_usage(pools, result.claims), launched,
                         _numbered_after(result.claims))
        placed = set(again.placements) - set(result.placements)
        if not placed:
            return result
        result.claims.extend(again.claims)
        result.placements.update(again.placements)
        for key in held:
            result.unschedulable.pop(key, None)
        result.unschedulable.update(again.unschedulable)
    return result


def launched_usage(pools: Sequence[si.PoolSpec], claims: Sequence[PlannedClaim]) -> dict[str, Resources]:
    """Each pool's usage once its planned claims run as their cheapest options: what it held, plus what
    each claim holds then (`charges.charged`: every resource of its type, and one node)."""
    types = {p.name: {t.name: t for t in p.instance_types} for p in pools}
    out = {p.name: dict(p.usage) for p in pools}
    for claim in claims:
        option = types.get(claim.pool, {}).get(claim.instance_types[0].name) if claim.instance_types else None
        if option is not None and claim.pool in out:
            out[claim.pool] = add(out[claim.pool], charges.charged(option.limit_capacity))
    return out


def _with_usage(pools: Sequence[si.PoolSpec], claims: Sequence[PlannedClaim]) -> list[si.PoolSpec]:
    usage = launched_usage(pools, claims)
    return [dataclasses.replace(p, usage=usage[p.name]) for p in pools]


def _in_flight(claim: PlannedClaim, specs: Mapping[str, si.PodSpec]) -> si.InFlightClaim:
    """A planned claim as launched: its cheapest option, in that option's zone, full (the first round put
    every pod it could there), its pods counting for topology spread and (anti-)affinity."""
    first = claim.instance_types[0] if claim.instance_types else None
    node_labels = {**claim.labels, L.NODEPOOL: claim.pool, L.HOSTNAME: claim.name}
    if first is not None:
        node_labels |= {L.INSTANCE_TYPE: first.name, L.ZONE: claim.zone or first.zone,
                        L.CAPACITY_TYPE: claim.capacity_type or first.capacity_type}
    return si.InFlightClaim(claim.name, claim.pool, node_labels, {}, claim.taints,
                            tuple(specs[k] for k in claim.pods if k in specs))


def _numbered_after(claims: Sequence[PlannedClaim]) -> Callable[[str, int], str]:
    """Claim names that go on from the ones planned (`<pool>-<n>`, n counted per pool)."""
    counts: dict[str, int] = {}
    for c in claims:
        counts[c.pool] = counts.get(c.pool, 0) + 1
    return lambda pool, n: f"{pool}-{counts.get(pool, 0) + n:04d}"
