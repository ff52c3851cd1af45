"""Opening a new claim for a pod group: which NodePool, which requirements, which instance type options.

Pools are tried in priority order (`pools.py`: weight, then name or proportional split). In a pool, a
claim starts from the pool's signature narrowed by one of the group's node-affinity terms and, for
constrained topology keys, one allowed domain. Its options are the types that fit the DaemonSet overhead
plus one pod, within the pool's limits (`limits.py`), in the best preference tier that still has one
(ordered requirement values) and meeting minValues. It keeps every option that fits (cheapest first in
the result) but only grows while a cost-efficient one still fits (`ScheduleOptions.efficiency_tolerance`).
"""

from __future__ import annotations

from collections.abc import Callable

from carpool.resources import Resources, add
from carpool.scheduling.claim import CLAIM, Bin, efficient_options, max_fit, options_after, preferred_tier
from carpool.scheduling.compatibility import compatible_terms
from carpool.scheduling.domains import Allowed, Domains
from carpool.scheduling.inputs import HostPort
from carpool.scheduling.pending import ActiveConstraints
from carpool.scheduling.pools import PoolOrder, PoolState
from carpool.scheduling.signature import Signature, SignatureRegistry


class NewClaims:
    """Opens and names the batch's new claims, appending them to the bins."""

    def __init__(
        self,
        bins: list[Bin],
        signatures: SignatureRegistry,
        domains: Domains,
        order: PoolOrder,
        pool_signatures: dict[int, Signature],
        *,
        efficiency_tolerance: float | None,
        claim_name: Callable[[str, int], str] | None,
    ) -> None:
        self.bins = bins
        self.signatures = signatures
        self.domains = domains
        self.order = order
        self.pool_signatures = pool_signatures  # pool id -> the signature of a claim it has just opened
        self.efficiency_tolerance = efficiency_tolerance
        self.claim_name = claim_name
        self._numbers: dict[str, int] = {}

    def open(self, request: Resources, active: ActiveConstraints, allowed: Allowed | None,
             cap: int, host_ports: tuple[HostPort, ...] = ()) -> tuple[Bin, int, int] | None:
        """A new, still empty claim in the first pool that can take pods of size `request` (binding
        `host_ports`), how many of them (<= cap) it takes, and its options once they are on it; None when
        no pool can."""
        signatures = self.signatures
        for pool in self.order:
            if host_ports and any(p.conflicts(d) for p in host_ports for d in pool.daemon_ports):
                continue  # the pool's DaemonSet pods hold the port on every new node
            base = self.pool_signatures[pool.id]
            terms = compatible_terms(active, base, signatures)
            if not terms:
                continue
            limit_mask, _ = pool.limits.allowed(pool.index)
            first = limit_mask & pool.index.fit_mask(add(pool.overhead, request)) if limit_mask else 0
            if not first:
                continue
            for i in terms:
                by_term = signatures.narrowed_by_term(base, active.variant, i)
                if by_term is None:
                    continue
                for narrowed, budget in self.domains.choices(by_term, allowed, active):
                    options = preferred_tier(pool, narrowed.type_mask & first)
                    if not options:
                        continue
                    grow = efficient_options(pool, options, self.efficiency_tolerance)
                    k, _ = max_fit(pool, pool.overhead, grow, request, min(cap, budget))
                    if not k:
                        continue
                    claim = self._new(pool, narrowed, options)
                    claim.growth_options = grow
                    return claim, k, options_after(pool, pool.overhead, options, request, k)
        return None

    def _new(self, pool: PoolState, signature: Signature, options: int) -> Bin:
        """An empty claim named `<pool>-<n>` (n counts per pool from 1), or by `claim_name`."""
        number = self._numbers.get(pool.name, 0) + 1
        self._numbers[pool.name] = number
        name = self.claim_name(pool.name, number) if self.claim_name else f"{pool.name}-{number:04d}"
        claim = Bin(len(self.bins), name, CLAIM, signature, pool, dict(pool.overhead), options=options)
        claim.ports = list(pool.daemon_ports)
        self.bins.append(claim)
        signature.members |= 1 << claim.id
        if pool.split_share:
            pool.split_amount += 1 if pool.split_by == "nodes" else 0
        return claim
