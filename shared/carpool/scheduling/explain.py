"""Why a pod could not be placed, per NodePool.

Computed only for pods left over at the end of a batch (never on the hot path), by re-running a new-claim
attempt for one pod of the group against each pool and stopping at the first check that excludes
everything. The checks go from the cheapest to state and the most actionable for a person: taints,
requirements, instance types, resources, offerings, limits, minValues, topology.

Wording is stable (tests and alarms match on the prefix):
"taint <taint> not tolerated", "incompatible requirement <key>: ...", "no instance type matches
requirements (<keys>)", "no instance type fits requests cpu=.. memory=..", "no offering available",
"limit <resource> exhausted", "minValues not met for <key>", "<topology constraint> cannot be satisfied".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from carpool import labels as L
from carpool.resources import add, describe

if TYPE_CHECKING:  # pragma: no cover
    from carpool.scheduling.pools import PoolState
    from carpool.scheduling.scheduler import Scheduler, _GroupState


def reasons(s: Scheduler, gs: _GroupState) -> dict[str, str]:
    """A reason for each pool (in the order pools are tried)."""
    if not s.pools:
        return {"*": "no NodePool"}
    return {pool.name: pool_reason(s, gs, pool) for pool in s.order}


def pool_reason(s: Scheduler, gs: _GroupState, pool: PoolState) -> str:
    vs = s._vstate(gs)
    v = vs.variant
    taint = s._blocking_taint(pool.taints, v.tolerations)
    if taint is not None:
        return f"taint {taint} not tolerated"
    compatible = []
    first_incompatibility = None
    for term in v.terms:
        inc = pool.requirements.compatible(term, L.WELL_KNOWN)
        if inc is None:
            compatible.append(pool.requirements.merge(term))
        elif first_incompatibility is None:
            first_incompatibility = inc
    if not compatible:
        assert first_incompatibility is not None
        return str(first_incompatibility)
    index = pool.index
    total = add(pool.overhead, gs.group.requests)
    labelled = fitting = offered = 0
    for reqs in compatible:
        lm = index.label_mask(reqs)
        labelled |= lm
        fm = lm & index.fit_mask(total)
        fitting |= fm
        offered |= fm & index.offering_mask(reqs)
    if not labelled:
        named = sorted({k for reqs in compatible for k in reqs if k != L.NODEPOOL})
        return f"no instance type matches requirements ({', '.join(named)})"
    if not fitting:
        text = f"no instance type fits requests {describe(gs.group.requests)}"
        if pool.overhead:
            text += f" (+ daemonset overhead {describe(pool.overhead)})"
        return text
    if not offered:
        return "no offering available"
    limit_mask, exhausted = pool.limits.allowed(index)
    if not offered & limit_mask:
        return f"limit {exhausted or _limiting(pool, offered)} exhausted"
    if not s._tier(pool, offered & limit_mask):
        keys = ", ".join(f"{k}>={n}" for k, n in pool.min_values.items())
        return f"minValues not met for {keys}"
    topo = _topology_reason(s, gs)
    if topo:
        return topo
    return "no room left within the batch's constraints"


def _limiting(pool: PoolState, offered: int) -> str:
    for name, amount in pool.limits.remaining.items():
        mask, _ = pool.index.within_limits({name: amount})
        if not offered & mask:
            return name
    return "?"


def _topology_reason(s: Scheduler, gs: _GroupState) -> str | None:
    vs = s._vstate(gs)
    for o in vs.host:
        if o.group.new_host_budget(o.self_selecting) <= 0:
            return f"{o.group.describe()} cannot be satisfied (no node with a matching pod has room)"
    if vs.domain:
        allowed = s._allowed(gs, vs)
        for key, doms in allowed.items():
            if not doms:
                owned = vs.domain[key]
                what = " and ".join(o.group.describe() for o in owned)
                return f"{what} cannot be satisfied (no allowed {key} domain)"
        return f"{' and '.join(o.group.describe() for owned in vs.domain.values() for o in owned)} " \
               f"cannot be satisfied with the offerings left in domains {_fmt(allowed)}"
    if gs.pod.host_ports:
        return "host port conflict on every candidate node"
    return None


def _fmt(allowed: dict[str, dict[str, int]]) -> str:
    return "; ".join(f"{k}={sorted(v)}" for k, v in allowed.items())
