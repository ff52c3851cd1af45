"""Topology domains (zones, capacity types, any label but hostname) a pod group may use, and claims
narrowed to them.

Why here and not in the topology groups: which domains a pod could *ever* use depends on its required
node affinity against the pools' instance types and offerings and the labels of existing nodes (carpool
picks among domains that have an available offering, where Karpenter takes every domain the NodePool
names), and narrowing a claim to a domain is a new requirement signature.

A claim whose signature still allows several domains of a constrained key is narrowed to one of the
allowed ones, emptiest first (fewest matching pods, then by name), so spreads fill evenly.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from carpool import labels as L
from carpool.requirements import Requirements
from carpool.scheduling.pending import ActiveConstraints, PendingGroup
from carpool.scheduling.pools import PoolState
from carpool.scheduling.signature import Signature, SignatureRegistry
from carpool.scheduling.topologygroup import SPREAD, UNLIMITED, TopologyGroup, tolerates_every

# per constrained topology key: the domains a pod group may use now, each with a budget of pods
Allowed = dict[str, dict[str, int]]


class Domains:
    """Domain choices over the batch's pools and signatures."""

    def __init__(self, pools: Sequence[PoolState], signatures: SignatureRegistry) -> None:
        self.pools = pools
        self.signatures = signatures

    def allowed(self, pending: PendingGroup, active: ActiveConstraints) -> Allowed:
        """For each non-hostname topology key: the domains the group may use now, with budgets (the
        tightest of all its constraints on that key)."""
        out: Allowed = {}
        for key, constraints in active.domain_constraints.items():
            current: dict[str, int] | None = None
            for c in constraints:
                a = c.group.allowed(self.eligible(pending, key, c.group), c.self_selecting)
                current = a if current is None else {d: min(b, a[d]) for d, b in current.items() if d in a}
            out[key] = current or {}
        return out

    def eligible(self, pending: PendingGroup, key: str, group: TopologyGroup | None = None) -> frozenset[str]:
        """Domains of `key` the pod could ever use (its required terms against pools and fixed bins), as
        the topology group sees them: a spread under nodeAffinityPolicy Ignore keeps the domains its
        owner's other node requirements rule out (only its requirement on `key` narrows them, as
        Karpenter's pod domains), and one under nodeTaintsPolicy Honor drops those of pools and nodes
        whose taints its owner does not tolerate (Karpenter's `TopologyDomainGroup.ForEachDomain`)."""
        ignore_affinity = group is not None and group.kind == SPREAD and not group.node_filter
        tolerations = group.taint_filter if group is not None else None
        cache_key = (key, ignore_affinity, tolerations)
        got = pending.eligible_domains.get(cache_key)
        if got is not None:
            return got
        terms = pending.preferences.current.strict_terms
        if ignore_affinity:
            terms = tuple(Requirements().add(t[key]) if key in t else Requirements() for t in terms or (Requirements(),))
        domains: set[str] = set()
        for pool in self.pools:
            if tolerations is not None and not tolerates_every(pool.taints, tolerations):
                continue
            for term in terms:
                if pool.requirements.compatible(term, L.WELL_KNOWN) is not None:
                    continue
                reqs = pool.requirements.merge(term)
                domains |= pool.index.domains(key, pool.index.compatible_mask(reqs), reqs)
        for signature in self.signatures.all:
            labels = signature.labels
            if labels is None or key not in labels:
                continue
            if tolerations is not None and not tolerates_every(signature.taints, tolerations):
                continue
            if any(t.satisfied_by(labels) is None for t in terms):
                domains.add(labels[key])
        got = pending.eligible_domains[cache_key] = frozenset(domains)
        return got

    def choices(self, signature: Signature, allowed: Allowed | None,
                active: ActiveConstraints) -> Iterator[tuple[Signature, int]]:
        """Signatures narrowed to one allowed domain per constrained key, best first, with budgets."""
        if not allowed:
            yield signature, UNLIMITED
            return
        yield from self._choose(signature, list(allowed.items()), active, UNLIMITED)

    def _choose(self, signature: Signature, keys: list[tuple[str, dict[str, int]]], active: ActiveConstraints,
                budget: int) -> Iterator[tuple[Signature, int]]:
        if not keys:
            yield signature, budget
            return
        (key, allowed), rest = keys[0], keys[1:]
        possible = signature.domains(key)
        domains = [d for d in possible if d in allowed]
        if not domains:
            return
        if len(possible) == 1:
            yield from self._choose(signature, rest, active, min(budget, allowed[domains[0]]))
            return
        constraints = active.domain_constraints[key]
        domains.sort(key=lambda d: (sum(c.group.count(d) for c in constraints), d))
        for d in domains:
            narrowed = self.signatures.narrowed_to_domain(signature, key, d)
            if narrowed is not None:
                yield from self._choose(narrowed, rest, active, min(budget, allowed[d]))
