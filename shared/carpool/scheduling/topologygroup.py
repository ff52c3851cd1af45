"""One topology constraint's counter: pods a selector matches, per domain of one topology key.

This is Karpenter's `TopologyGroup` (topologygroup.go). Pods with the same constraint share one group, so
1,000 replicas with self anti-affinity are one counter with 1,000 owners, not 1,000 counters.

Kinds:
- `SPREAD`: a pod may go to domain d when `count[d] + (1 if it matches itself) - min <= maxSkew`, min taken
  over the domains the pod could use (0 when fewer than `minDomains` exist; always 0 for hostname, since
  a new node is an empty domain).
- `AFFINITY`: only domains with at least one matching pod; a pod that matches its own selector may
  bootstrap into any domain when none has one yet.
- `ANTI`: only domains with no matching pod.
- `INVERSE`: the other side of a required anti-affinity: counts the pods *holding* the term, and a pod
  the term selects may only go where there are none (anti-affinity is symmetric in Kubernetes).

Hostname domains are bins (existing nodes, in-flight and new claims), identified by integer ids; each
group keeps, per tracked threshold t, a bit mask of the bins holding at least t matching pods, so "bins
this pod may use" is one AND-NOT over all bins. Other keys (zone, capacity type, any label) count per
value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from carpool import labels as L
from carpool.requirements import Requirements
from carpool.scheduling.inputs import AffinityTerm, LabelSelector
from carpool.taints import Taint, Toleration

SPREAD = "topology spread"
AFFINITY = "pod affinity"
ANTI = "pod anti-affinity"
INVERSE = "inverse pod anti-affinity"

UNLIMITED = 1 << 60


class TopologyGroup:
    """Counts of selected pods per domain of one topology key."""

    __slots__ = (
        "id", "kind", "key", "selector", "namespaces", "max_skew", "min_domains", "node_filter",
        "taint_filter", "filtered", "hostname", "domain_counts", "host_counts", "at_least",
    )

    def __init__(
        self,
        id: int,
        kind: str,
        key: str,
        selector: LabelSelector,
        namespaces: frozenset[str] | None,
        max_skew: int = UNLIMITED,
        min_domains: int | None = None,
        node_filter: tuple[Requirements, ...] = (),
        taint_filter: tuple[Toleration, ...] | None = None,
    ) -> None:
        self.id = id
        self.kind = kind
        self.key = key
        self.selector = selector
        self.namespaces = namespaces
        self.max_skew = max_skew
        self.min_domains = min_domains
        self.node_filter = node_filter
        self.taint_filter = taint_filter  # the owner's tolerations under nodeTaintsPolicy Honor, else None
        self.filtered = bool(node_filter) or taint_filter is not None
        self.hostname = key == L.HOSTNAME
        self.domain_counts: dict[str, int] = {}
        self.host_counts: dict[int, int] = {}
        self.at_least: dict[int, int] = {1: 0}

    # -- membership ---------------------------------------------------------------------------------
    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        if self.namespaces is not None and namespace not in self.namespaces:
            return False
        return self.selector.matches(labels)

    def filter_matches_labels(self, labels: Mapping[str, str]) -> bool:
        """Spread counts only pods on nodes the owner's node affinity selects (nodeAffinityPolicy Honor)."""
        if not self.node_filter:
            return True
        return any(term.satisfied_by(labels) is None for term in self.node_filter)

    def filter_matches_requirements(self, requirements: Requirements) -> bool:
        if not self.node_filter:
            return True
        return any(requirements.compatible(term, L.WELL_KNOWN) is None for term in self.node_filter)

    def filter_matches_taints(self, taints: Iterable[Taint]) -> bool:
        """Spread counts only pods on nodes whose taints the owner tolerates (nodeTaintsPolicy Honor)."""
        return self.taint_filter is None or tolerates_every(taints, self.taint_filter)

    # -- counting -----------------------------------------------------------------------------------
    def track(self, threshold: int) -> None:
        """Keep a mask of bins holding >= threshold pods (must be called before counting starts)."""
        if threshold >= 1 and threshold not in self.at_least:
            self.at_least[threshold] = 0

    def add(self, domain: str, pods: int) -> None:
        self.domain_counts[domain] = self.domain_counts.get(domain, 0) + pods

    def add_host(self, bin_id: int, pods: int) -> None:
        before = self.host_counts.get(bin_id, 0)
        after = before + pods
        self.host_counts[bin_id] = after
        bit = 1 << bin_id
        for t in self.at_least:
            if before < t <= after:
                self.at_least[t] |= bit

    def count(self, domain: str) -> int:
        return self.domain_counts.get(domain, 0)

    # -- constraint evaluation ----------------------------------------------------------------------
    def allowed(self, eligible: frozenset[str], self_selecting: bool) -> dict[str, int]:
        """Domains (of a non-hostname key) a pod may go to now, each with how many pods of its group may
        go there before the answer can change (UNLIMITED when placing it does not move the counts)."""
        counts = self.domain_counts
        if self.kind == SPREAD:
            low = min((counts.get(d, 0) for d in eligible), default=0)
            if self.min_domains is not None and len(eligible) < self.min_domains:
                low = 0
            inc = 1 if self_selecting else 0
            out = {}
            for d in eligible:
                c = counts.get(d, 0)
                if c + inc - low <= self.max_skew:
                    out[d] = self.max_skew + low - c if self_selecting else UNLIMITED
            return out
        if self.kind == AFFINITY:
            out = {d: UNLIMITED for d in eligible if counts.get(d, 0) > 0}
            if not out and self_selecting and not any(counts.values()):
                out = dict.fromkeys(eligible, UNLIMITED)
            return out
        # ANTI and INVERSE: only empty domains
        budget = 1 if self_selecting else UNLIMITED
        return {d: budget for d in eligible if counts.get(d, 0) == 0}

    def host_exclusion(self, self_selecting: bool) -> int:
        """The threshold t such that bins with >= t pods are excluded (0: no exclusion)."""
        if self.kind == SPREAD:
            return self.max_skew if self_selecting else self.max_skew + 1
        if self.kind in (ANTI, INVERSE):
            return 1
        return 0

    def host_budget(self, bin_id: int, self_selecting: bool) -> int:
        if not self_selecting:
            return UNLIMITED
        if self.kind == SPREAD:
            return self.max_skew - self.host_counts.get(bin_id, 0)
        if self.kind in (ANTI, INVERSE):
            return 1 if self.host_counts.get(bin_id, 0) == 0 else 0
        return UNLIMITED

    def new_host_budget(self, self_selecting: bool) -> int:
        """Pods of the group a brand-new bin may take (0 when the constraint forbids a new bin)."""
        if self.kind == AFFINITY:
            if self.at_least[1]:
                return 0
            return UNLIMITED if self_selecting else 0
        if not self_selecting:
            return UNLIMITED
        if self.kind == SPREAD:
            return self.max_skew
        return 1

    def describe(self) -> str:
        sel = str(self.selector)
        if self.kind == SPREAD:
            extra = f" maxSkew={self.max_skew}"
            if self.min_domains is not None:
                extra += f" minDomains={self.min_domains}"
            return f"{self.kind} on {self.key}{extra} ({sel})"
        return f"{self.kind} on {self.key} ({sel})"


@dataclass(frozen=True, slots=True)
class TopologyConstraint:
    """A topology group constraining a pod group, and whether the pod group matches its selector."""

    group: TopologyGroup
    self_selecting: bool


def namespaces_of(namespace: str, term: AffinityTerm) -> frozenset[str] | None:
    """Where an affinity term's selector looks: every namespace (None), the listed ones, or, as in
    Kubernetes when neither is given, the namespace of the pod that holds the term."""
    if term.all_namespaces:
        return None
    if term.namespaces:
        return term.namespaces
    return frozenset({namespace})


def tolerates_every(taints: Iterable[Taint], tolerations: Iterable[Toleration]) -> bool:
    """Whether the tolerations cover every taint, PreferNoSchedule included: Karpenter's topology node
    filter (`Taints.Tolerates`) is that strict, where placement only minds the hard effects."""
    tolerations = tuple(tolerations)
    return all(any(t.tolerates(taint) for t in tolerations) for taint in taints)
