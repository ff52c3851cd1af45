"""Topology accounting for one batch: which topology groups exist, which pods they count, and the counts.

Karpenter's `Topology` (topology.go): identical constraints share one `TopologyGroup`
(`topologygroup.py`); every placement is recorded in each group whose selector matches the placed pods;
pods already running on existing nodes and in-flight claims are counted before the batch starts.

Two things are carpool's own:
- a claim whose domain of a key is still open (e.g. its zone is not decided) keeps the counts for that
  key pending and records them once a later pod narrows it to one domain (`Bin.pending_counts`),
  instead of not counting them at all;
- a spread counts only pods on nodes its owner's node affinity selects (nodeAffinityPolicy Honor, the
  default) and, under nodeTaintsPolicy Honor, whose taints its owner tolerates; that verdict is cached per
  (group, requirement signature).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from carpool.requirements import Requirements
from carpool.scheduling.claim import Bin
from carpool.scheduling.inputs import AffinityTerm, PodSpec, TopologySpread
from carpool.scheduling.pending import ActiveConstraints, PendingGroup
from carpool.scheduling.preferences import Variant
from carpool.scheduling.signature import Signature
from carpool.scheduling.topologygroup import (
    AFFINITY,
    ANTI,
    INVERSE,
    SPREAD,
    UNLIMITED,
    TopologyConstraint,
    TopologyGroup,
    namespaces_of,
)
from carpool.taints import Toleration

__all__ = [
    "AFFINITY", "ANTI", "INVERSE", "SPREAD", "UNLIMITED", "Topology", "TopologyConstraint", "TopologyGroup",
    "namespaces_of",
]


class Topology:
    """The registry of topology groups (identical constraints share one) and the batch's counts."""

    def __init__(self) -> None:
        self.groups: dict[tuple, TopologyGroup] = {}
        self._filter_verdicts: dict[tuple[int, int], bool] = {}
        #: Variant.profile -> signature id -> compatible term indices (shared by equal profiles)
        self._terms_by_profile: dict[int, dict[int, tuple[int, ...]]] = {}

    # -- registry -----------------------------------------------------------------------------------
    def _get(self, key: tuple, make) -> TopologyGroup:
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = make(len(self.groups))
        return group

    def spread(self, namespace: str, c: TopologySpread, node_filter: tuple[Requirements, ...],
               taint_filter: tuple[Toleration, ...] | None = None) -> TopologyGroup:
        ns = frozenset({namespace})
        key = (SPREAD, c.topology_key, c.selector, ns, c.max_skew, c.min_domains, node_filter, taint_filter)
        return self._get(
            key,
            lambda i: TopologyGroup(i, SPREAD, c.topology_key, c.selector, ns, c.max_skew, c.min_domains, node_filter,
                                    taint_filter),
        )

    def affinity(self, kind: str, namespace: str, term: AffinityTerm) -> TopologyGroup:
        ns = namespaces_of(namespace, term)
        key = (kind, term.topology_key, term.selector, ns)
        return self._get(key, lambda i: TopologyGroup(i, kind, term.topology_key, term.selector, ns))

    def all(self) -> list[TopologyGroup]:
        return list(self.groups.values())

    # -- what constrains a pod group ----------------------------------------------------------------
    def owned(self, pod: PodSpec, variant: Variant) -> list[TopologyConstraint]:
        """The topology groups of a pod's own spreads and (anti-)affinity terms at one relaxation level."""
        ns, labels = pod.namespace, pod.labels
        out: list[TopologyConstraint] = []
        node_filter = variant.strict_terms if pod.requirements else ()
        # the pod's own tolerations, not the relaxed ones: a group must stay the same across relaxation
        # levels, or it would lose the counts made so far
        taint_filter = pod.tolerations if any(s.honor_node_taints for s in variant.spreads) else None
        for s in variant.spreads:
            group = self.spread(ns, s, node_filter if s.honor_node_affinity else (),
                                taint_filter if s.honor_node_taints else None)
            out.append(TopologyConstraint(group, group.selects(ns, labels)))
        for term in variant.affinity:
            group = self.affinity(AFFINITY, ns, term)
            out.append(TopologyConstraint(group, group.selects(ns, labels)))
        for term in variant.anti_affinity:
            group = self.affinity(ANTI, ns, term)
            out.append(TopologyConstraint(group, group.selects(ns, labels)))
        return out

    def active(self, pending: PendingGroup) -> ActiveConstraints:
        """The group's constraints at its current relaxation level (cached per level)."""
        variant = pending.preferences.current
        active = pending.by_variant.get(variant.id)
        if active is None:
            hostname: list[TopologyConstraint] = []
            domain: dict[str, list[TopologyConstraint]] = {}
            for c in self.owned(pending.pod, variant) + pending.inverse_selecting:
                if c.group.hostname:
                    hostname.append(c)
                else:
                    domain.setdefault(c.group.key, []).append(c)
            terms = self._terms_by_profile.setdefault(variant.profile, {})
            active = pending.by_variant[variant.id] = ActiveConstraints(variant, hostname, domain, terms)
        return active

    # -- setup --------------------------------------------------------------------------------------
    def prepare(self, pending: Sequence[PendingGroup], fixed: Sequence[tuple[Bin, Sequence[PodSpec]]]) -> None:
        """Create every group the batch can need, tell each pod group what counts it, and count the pods
        already on existing nodes and in-flight claims. Must run before any placement."""
        for group in pending:
            group.inverse_owned = [self.affinity(INVERSE, group.pod.namespace, t) for t in group.pod.anti_affinity]
        for _, pods in fixed:
            for p in pods:
                for t in p.anti_affinity:
                    self.affinity(INVERSE, p.namespace, t)
        for group in pending:
            self.owned(group.pod, group.preferences.current)
        every = self.all()
        cache: dict[tuple, list[TopologyGroup]] = {}
        for group in pending:
            selecting = _selecting(group.pod, every, cache)
            group.counted_by = [tg for tg in selecting if tg.kind != INVERSE]
            group.inverse_selecting = [
                TopologyConstraint(tg, tg in group.inverse_owned) for tg in selecting if tg.kind == INVERSE
            ]
            for c in self.active(group).hostname_constraints:
                c.group.track(c.group.host_exclusion(c.self_selecting))
        for target, pods in fixed:
            for p in pods:
                for tg in _selecting(p, every, cache):
                    if tg.kind == INVERSE:
                        continue
                    if tg.kind == SPREAD and not self.filter_admits(tg, target.signature):
                        continue
                    self.count(tg, target, 1)
                for t in p.anti_affinity:
                    self.count(self.affinity(INVERSE, p.namespace, t), target, 1)

    # -- counting -----------------------------------------------------------------------------------
    def filter_admits(self, group: TopologyGroup, signature: Signature) -> bool:
        """Whether pods on bins of this signature count in the group (its owner's node filter)."""
        key = (group.id, signature.id)
        got = self._filter_verdicts.get(key)
        if got is None:
            if signature.labels is not None:
                got = group.filter_matches_labels(signature.labels)
            else:
                got = group.filter_matches_requirements(signature.requirements)
            got = got and group.filter_matches_taints(signature.taints)
            self._filter_verdicts[key] = got
        return got

    def record(self, pending: PendingGroup, target: Bin, pods: int) -> None:
        """Count `pods` pods of the group on the target bin in every topology group that selects them."""
        signature = target.signature
        for tg in pending.counted_by:
            if tg.kind == SPREAD and tg.filtered and not self.filter_admits(tg, signature):
                continue
            self.count(tg, target, pods)
        for tg in pending.inverse_owned:
            self.count(tg, target, pods)

    @staticmethod
    def count(group: TopologyGroup, target: Bin, pods: int) -> None:
        """Add `pods` pods on the target bin; a claim still open between several domains counts
        anti-affinity in all of them and keeps the rest pending until it is narrowed."""
        if group.hostname:
            group.add_host(target.id, pods)
            return
        domains = target.signature.domains(group.key)
        if len(domains) == 1:
            group.add(next(iter(domains)), pods)
        elif group.kind in (ANTI, INVERSE):
            for d in domains:
                group.add(d, pods)
        elif domains:
            target.pending_counts.append((group, pods))

    @staticmethod
    def flush_pending(target: Bin) -> None:
        """Record the pending counts whose key the bin's (new) signature has narrowed to one domain."""
        if not target.pending_counts:
            return
        keep = []
        for group, k in target.pending_counts:
            domains = target.signature.domains(group.key)
            if len(domains) == 1:
                group.add(next(iter(domains)), k)
            else:
                keep.append((group, k))
        target.pending_counts = keep


def _selecting(pod: PodSpec, groups: Iterable[TopologyGroup], cache: dict[tuple, list[TopologyGroup]]) -> list[TopologyGroup]:
    """The groups whose selector matches a pod (cached by namespace and labels)."""
    key = (pod.namespace, frozenset(pod.labels.items()))
    got = cache.get(key)
    if got is None:
        got = cache[key] = [tg for tg in groups if tg.selects(pod.namespace, pod.labels)]
    return got
