"""NodePool disruption budgets: how many of a pool's nodes may be disrupting at once, per reason.

Rules (Karpenter v1, `NodePool.GetAllowedDisruptionsByReason` and `BuildDisruptionBudgetMapping`):
- each budget allows `nodes` of the pool: a count, or a percentage of the pool's nodes **rounded up**
  (10% of 5 nodes is 1, so a small pool is never frozen by a percentage);
- a budget with `schedule` + `duration` only applies while its window is open (it opened at a cron fire in
  the last `duration`, UTC); outside it, it does not restrict;
- a budget with `reasons` only restricts those reasons (`Empty`, `Drifted`, `Underutilized`);
- the most restrictive applicable budget wins; an omitted `budgets` is the default `nodes: 10%` (the
  NodePool model fills it in), an explicit `budgets: []` restricts nothing (as Karpenter);
- nodes already disrupting (or NotReady) count against every reason's allowance;
- a budget that cannot be evaluated (a schedule the cron parser rejects) fails closed: 0.
carpool additions: `Expired` is restricted by budgets without `reasons` (Karpenter v1 does not budget
expiry, which users find surprising); `Unhealthy` (repair) is not budgeted (see `repair`).
The pool's node count is its registered nodes, as Karpenter counts initialized ones. Nodes of a NodePool
that no longer exists are drifted and go under the default 10% budget.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta

from carpool.api.durations import parse_duration
from carpool.api.nodepool import Budget, NodePool
from carpool.disruption import cron
from carpool.disruption.decision import Reason

log = logging.getLogger(__name__)
UNLIMITED = 2**31 - 1
ORPHAN = Budget(nodes="10%")
#: the budget reason a disruption reason is filtered by (None: only budgets without `reasons` apply)
BUDGET_REASON: dict[Reason, str | None] = {
    Reason.EMPTY: "Empty",
    Reason.DRIFTED: "Drifted",
    Reason.UNDERUTILIZED: "Underutilized",
    Reason.EXPIRED: None,
}


def is_active(budget: Budget, now: datetime) -> bool:
    """A budget without a schedule always applies; a scheduled one only inside its window."""
    if budget.schedule is None or budget.duration is None:
        return True
    seconds = parse_duration(budget.duration) or 0
    return cron.active(budget.schedule, timedelta(seconds=seconds), now)


def budget_allows(budget: Budget, total_nodes: int, now: datetime) -> int:
    """Nodes this one budget allows out of `total_nodes` right now (UNLIMITED when its window is closed)."""
    try:
        if not is_active(budget, now):
            return UNLIMITED
    except cron.CronError as exc:
        log.warning("disruption budget fails closed: %s", exc)
        return 0
    return budget.max_disruptions(total_nodes)


def applies(budget: Budget, reason: Reason) -> bool:
    if reason == Reason.UNHEALTHY:
        return False
    if budget.reasons is None:
        return True
    wanted = BUDGET_REASON.get(reason)
    return wanted is not None and wanted in budget.reasons


def allowed(pool: NodePool, total_nodes: int, reason: Reason, now: datetime) -> int:
    """The most restrictive applicable budget's allowance for `reason` (before subtracting disrupting)."""
    if reason == Reason.UNHEALTHY:
        return UNLIMITED
    budgets = pool.spec.disruption.budgets
    return min((budget_allows(b, total_nodes, now) for b in budgets if applies(b, reason)), default=UNLIMITED)


class Budgets:
    """Remaining disruptions per pool and reason during one planning run.

    `take` records a new disruption in a pool; it lowers every reason's remaining allowance, because a
    node that is going counts against all of them (Karpenter re-reads disrupting nodes before each method).
    """

    def __init__(self, pools: Mapping[str, NodePool], totals: Mapping[str, int], disrupting: Mapping[str, int],
                 now: datetime) -> None:
        self._pools = pools
        self._totals = dict(totals)
        self._disrupting = dict(disrupting)
        self._now = now
        self._cache: dict[tuple[str, Reason], int] = {}

    def allowed(self, pool: str, reason: Reason) -> int:
        key = (pool, reason)
        if key not in self._cache:
            np = self._pools.get(pool)
            total = self._totals.get(pool, 0)
            # a deleted NodePool's nodes drift away under the default budget rather than all at once
            self._cache[key] = allowed(np, total, reason, self._now) if np else ORPHAN.max_disruptions(total)
        return self._cache[key]

    def remaining(self, pool: str, reason: Reason) -> int:
        return max(0, self.allowed(pool, reason) - self._disrupting.get(pool, 0))

    def take(self, pool: str, n: int = 1) -> None:
        self._disrupting[pool] = self._disrupting.get(pool, 0) + n

    def describe(self, pool: str, reason: Reason) -> str:
        """Why a node of `pool` waits, for the run summary."""
        return (f"NodePool {pool} budget for {reason}: {self.allowed(pool, reason)} of "
                f"{self._totals.get(pool, 0)} nodes, {self._disrupting.get(pool, 0)} already disrupting")
