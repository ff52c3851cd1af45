"""Why a pod could not be placed, per NodePool.

Computed only for pods left over at the end of a batch (never on the hot path), by re-running a new-claim
attempt for one pod of the group against each pool and stopping at the first check that excludes
everything. The checks go from the cheapest to state and the most actionable for a person: taints,
requirements, the pool's node class not ready, instance types, resources, offerings, limits, minValues,
topology.

Wording is stable (tests and alarms match on the prefix):
"taint <taint> not tolerated", "incompatible requirement <key>: ...", "no instance type matches
requirements (<keys>)", "no instance type fits requests cpu=.. memory=..", "no offering available",
"limit <resource> exhausted", "minValues not met for <key>", "<topology constraint> cannot be satisfied".
"""

from __future__ import annotations

from carpool import labels as L
from carpool.resources import add, describe
from carpool.scheduling.claim import preferred_tier
from carpool.scheduling.compatibility import blocking_taint
from carpool.scheduling.domains import Allowed, Domains
from carpool.scheduling.pending import PendingGroup
from carpool.scheduling.pools import PoolOrder, PoolState
from carpool.scheduling.topology import Topology


class LimitExhausted(str):
    """A pool's reason that is its limit ("limit <resource> exhausted"): a str like every reason, told
    apart by its type, never its text, by a caller that can lower the pool's charge
    (`carpool.app.provisioning.catch_up`)."""

    __slots__ = ()


def limited_pools(reasons: dict[str, str]) -> list[str]:
    """The pools whose reason is their limit."""
    return [pool for pool, why in reasons.items() if isinstance(why, LimitExhausted)]


def reasons(group: PendingGroup, order: PoolOrder, topology: Topology, domains: Domains) -> dict[str, str]:
    """A reason for each pool (in the order pools are tried)."""
    pools = list(order)
    if not pools:
        return {"*": "no NodePool"}
    return {pool.name: pool_reason(group, pool, topology, domains) for pool in pools}


def pool_reason(group: PendingGroup, pool: PoolState, topology: Topology, domains: Domains) -> str:
    """The first check, cheapest first, that excludes every instance type of the pool."""
    v = topology.active(group).variant
    taint = blocking_taint(pool.taints, v.tolerations)
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
    if pool.spec.not_ready is not None:  # the pod would be this pool's, were its node class ready
        return pool.spec.not_ready
    index = pool.index
    total = add(pool.overhead, group.group.requests)
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
        text = f"no instance type fits requests {describe(group.group.requests)}"
        if pool.overhead:
            text += f" (+ daemonset overhead {describe(pool.overhead)})"
        return text
    if not offered:
        return "no offering available"
    limit_mask, exhausted = pool.limits.allowed(index)
    if not offered & limit_mask:
        return LimitExhausted(f"limit {exhausted or _limiting(pool, offered)} exhausted")
    if not preferred_tier(pool, offered & limit_mask):
        keys = ", ".join(f"{k}>={n}" for k, n in pool.min_values.items())
        return f"minValues not met for {keys}"
    topology_reason = _topology_reason(group, topology, domains)
    if topology_reason:
        return topology_reason
    return "no room left within the batch's constraints"


def _limiting(pool: PoolState, offered: int) -> str:
    for name, amount in pool.limits.remaining.items():
        mask, _ = pool.index.within_limits({name: amount})
        if not offered & mask:
            return name
    return "?"


def _topology_reason(group: PendingGroup, topology: Topology, domains: Domains) -> str | None:
    active = topology.active(group)
    for c in active.hostname_constraints:
        if c.group.new_host_budget(c.self_selecting) <= 0:
            return f"{c.group.describe()} cannot be satisfied (no node with a matching pod has room)"
    if active.domain_constraints:
        allowed = domains.allowed(group, active)
        for key, doms in allowed.items():
            if not doms:
                what = " and ".join(c.group.describe() for c in active.domain_constraints[key])
                return f"{what} cannot be satisfied (no allowed {key} domain)"
        every = " and ".join(c.group.describe() for cs in active.domain_constraints.values() for c in cs)
        return f"{every} cannot be satisfied with the offerings left in domains {_format(allowed)}"
    if group.pod.host_ports:
        return "host port conflict on every candidate node"
    return None


def _format(allowed: Allowed) -> str:
    return "; ".join(f"{k}={sorted(v)}" for k, v in allowed.items())
