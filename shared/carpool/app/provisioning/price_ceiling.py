"""Replacements that must be cheaper than what they replace: offerings priced at or above the ceiling are
unavailable, and a round whose claims could together reach it launches nothing."""

from __future__ import annotations

import logging
from typing import Any

from carpool.app import launching, pools
from carpool.app.provisioning.outcome import ProvisionOutcome
from carpool.scheduling.result import PlannedClaim, SchedulingResult

log = logging.getLogger(__name__)


def priced_out(catalog: Any, ceiling: float) -> set[tuple[str, str, str]]:
    """Every (type, zone, capacity type) offering priced at or above `ceiling`: what a replacement that
    must be cheaper may not launch."""
    return {(it.name, o.zone, o.capacity_type) for it in catalog.types.values() for o in it.offerings
            if o.price >= ceiling}


def _dearest(planned: PlannedClaim, ctx: launching.PoolContext, unavailable: set[tuple[str, str, str]]) -> float:
    """The most the launch of `planned` can cost: its dearest offering still available (the launch may
    fall back to any of them)."""
    prices = [o.price for c in planned.instance_types if (it := ctx.types.get(c.name)) is not None
              for o in it.offerings if o.available and (it.name, o.zone, o.capacity_type) not in unavailable]
    return max(prices, default=planned.price)


def hold_to_ceiling(result: SchedulingResult, prepared: pools.Prepared, unavailable: set[tuple[str, str, str]],
                    left: float, outcome: ProvisionOutcome) -> None:
    """Launch nothing of this round when its claims could together cost `left` or more (each claim alone
    cannot: its dearer offerings are unavailable); their pods are reported unschedulable with why."""
    if not result.claims:
        return
    worst = sum(_dearest(c, prepared.contexts[c.pool], unavailable) for c in result.claims)
    if worst < left:
        return
    why = f"a replacement must cost less than ${max(left, 0.0):.4f}/h; these {len(result.claims)} nodes may cost ${worst:.4f}/h"
    for claim in result.claims:
        for pod in claim.pods:
            result.unschedulable[pod] = {"*": why}
            result.placements.pop(pod, None)
    result.claims = []
    outcome.decisions.append(f"nothing launched: {why}")
    log.info("nothing launched: %s", why)
