"""The kube-scheduler's InterPodAffinity and PodTopologySpread filters, for the simulated cluster's binder.

Modelled on kubernetes' `pkg/scheduler/framework/plugins/interpodaffinity/filtering.go` and
`podtopologyspread/{common,filtering}.go`, whose PreFilter counts pods per topology pair once per pod and
whose Filter then checks each node against those counts:

- required pod affinity: each term's pair on the node must hold a pod that matches all the terms; when no
  pod anywhere does and the pod matches its own terms, any node with the keys will do (the first pod);
- required pod anti-affinity: no term's pair on the node may hold a pod the term matches, and no existing
  pod's anti-affinity term may match the incoming pod in a pair the node has (the symmetric rule);
- topology spread with `whenUnsatisfiable: DoNotSchedule`: the node needs every key; the matching pods
  (same namespace, not terminating) of its domain, plus one if the pod matches itself, minus those of the
  emptiest domain (0 while there are fewer domains than `minDomains`) may not exceed `maxSkew`. Domains
  are those of every node with all the keys that the pod's node selector and affinity admit
  (nodeAffinityPolicy Honor) whatever its taints (nodeTaintsPolicy Ignore), unless a policy says
  otherwise; `matchLabelKeys` join the selector. `ScheduleAnyway` only scores, so it filters nothing.

Existing pods are those of the scheduler's snapshot: bound to any registered node, Ready or not, cordoned
or not, without the Succeeded and Failed ones its informer leaves out. Counts are made once per binding
pass for each distinct set of terms or constraint, then kept up to date as the pass binds pods, the way the
scheduler sees the pods it has just assumed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

#: the label every namespace carries (what a term's namespaceSelector can match: the simulation keeps no
#: Namespace objects, so no other label)
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

#: (pod spec, node JSON) -> whether the node passes that check for the pod
NodeCheck = Callable[[Mapping[str, Any], Mapping[str, Any]], bool]

Pair = tuple[str, str]


@dataclass(frozen=True)
class Selector:
    """A parsed LabelSelector. A missing selector is `None` and matches nothing (`LabelSelectorAsSelector`);
    an empty one matches everything."""

    match: tuple[Pair, ...]
    expressions: tuple[tuple[str, str, frozenset[str]], ...]

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None, extra: Iterable[tuple[str, str, str]] = ()) -> Selector | None:
        """`extra` adds (key, operator, value) requirements: what matchLabelKeys / mismatchLabelKeys add."""
        if raw is None:
            return None
        exprs = [(e["key"], e["operator"], frozenset(e.get("values") or [])) for e in raw.get("matchExpressions") or []]
        exprs += [(key, op, frozenset({value})) for key, op, value in extra]
        return cls(tuple(sorted((raw.get("matchLabels") or {}).items())), tuple(exprs))

    @property
    def empty(self) -> bool:
        return not self.match and not self.expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match:
            if labels.get(key) != value:
                return False
        return all(expression_holds(labels, key, op, values) for key, op, values in self.expressions)


def expression_holds(labels: Mapping[str, str], key: str, op: str, values: Iterable[str]) -> bool:
    """One LabelSelector `matchExpressions` requirement (In, NotIn, Exists, DoesNotExist)."""
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    return op != "DoesNotExist" or not present


@dataclass(frozen=True)
class Term:
    """A required PodAffinityTerm as the scheduler's `AffinityTerm`: no namespaces and no namespaceSelector
    mean the owning pod's namespace; the owning pod's labels under matchLabelKeys join the selector (what
    the API server merges in at creation)."""

    namespaces: frozenset[str]
    namespace_selector: Selector | None
    selector: Selector | None
    topology_key: str

    @classmethod
    def parse(cls, raw: Mapping[str, Any], namespace: str, labels: Mapping[str, str]) -> Term:
        extra = [(k, "In", labels[k]) for k in raw.get("matchLabelKeys") or [] if k in labels]
        extra += [(k, "NotIn", labels[k]) for k in raw.get("mismatchLabelKeys") or [] if k in labels]
        names, ns_selector = raw.get("namespaces") or [], raw.get("namespaceSelector")
        return cls(frozenset(names) if names or ns_selector is not None else frozenset({namespace}),
                   Selector.parse(ns_selector), Selector.parse(raw.get("labelSelector"), extra), raw.get("topologyKey") or "")

    def matches(self, namespace: str, labels: Mapping[str, str]) -> bool:
        if namespace not in self.namespaces and not (
                self.namespace_selector is not None and self.namespace_selector.matches({NAMESPACE_NAME_LABEL: namespace})):
            return False
        return self.selector is not None and self.selector.matches(labels)


@dataclass(frozen=True)
class Spread:
    """A DoNotSchedule topology spread constraint, with the defaults the scheduler gives its options."""

    max_skew: int
    topology_key: str
    selector: Selector | None
    min_domains: int
    honor_affinity: bool
    honor_taints: bool

    @classmethod
    def parse(cls, raw: Mapping[str, Any], labels: Mapping[str, str]) -> Spread:
        extra = [(k, "In", labels[k]) for k in raw.get("matchLabelKeys") or [] if k in labels]
        return cls(int(raw.get("maxSkew") or 1), raw.get("topologyKey") or "", Selector.parse(raw.get("labelSelector"), extra),
                   int(raw.get("minDomains") or 1), (raw.get("nodeAffinityPolicy") or "Honor") == "Honor",
                   (raw.get("nodeTaintsPolicy") or "Ignore") == "Honor")

    def counts(self, selector_namespace: str, namespace: str, labels: Mapping[str, str], terminating: bool) -> bool:
        """Whether an existing pod counts in its domain (`countPodsMatchSelector`: an empty selector counts
        nothing, though the incoming pod still matches it)."""
        return (not terminating and namespace == selector_namespace and self.selector is not None
                and not self.selector.empty and self.selector.matches(labels))


@dataclass(frozen=True)
class Constraints:
    """What a pending pod asks of the pods around it."""

    namespace: str
    labels: Mapping[str, str]
    affinity: tuple[Term, ...]
    anti_affinity: tuple[Term, ...]
    spread: tuple[Spread, ...]

    def matches_own_affinity(self) -> bool:
        return all(t.matches(self.namespace, self.labels) for t in self.affinity)


def _identity(raw: Mapping[str, Any]) -> tuple[str, Mapping[str, str]]:
    meta = raw.get("metadata") or {}
    return meta.get("namespace") or "default", meta.get("labels") or {}


def _required(affinity: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    return list((affinity.get(kind) or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or [])


def anti_affinity_terms(raw: Mapping[str, Any]) -> tuple[Term, ...]:
    """A pod's required anti-affinity terms (what makes an existing pod refuse others)."""
    affinity = (raw.get("spec") or {}).get("affinity")
    if not affinity or not affinity.get("podAntiAffinity"):
        return ()
    namespace, labels = _identity(raw)
    return tuple(Term.parse(t, namespace, labels) for t in _required(affinity, "podAntiAffinity"))


def constraints_of(raw: Mapping[str, Any]) -> Constraints | None:
    """The pod's required inter-pod terms and DoNotSchedule spread constraints; None when it has none."""
    spec = raw.get("spec") or {}
    affinity = spec.get("affinity") or {}
    if not spec.get("topologySpreadConstraints") and not affinity.get("podAffinity") and not affinity.get("podAntiAffinity"):
        return None  # most pods: the binder's fast path
    spread = [c for c in spec.get("topologySpreadConstraints") or [] if c.get("whenUnsatisfiable") == "DoNotSchedule"]
    namespace, labels = _identity(raw)
    found = Constraints(namespace, labels, tuple(Term.parse(t, namespace, labels) for t in _required(affinity, "podAffinity")),
                        anti_affinity_terms(raw), tuple(Spread.parse(c, labels) for c in spread))
    return found if found.affinity or found.anti_affinity or found.spread else None


@dataclass
class _Domains:
    """One spread constraint's domains for one kind of incoming pod: the nodes that count and the matching
    pods per topology value."""

    nodes: set[str]
    counts: dict[str, int]


@dataclass
class PodCheck:
    """The filters' verdict on each node for one pending pod, from counts as of the moment it is made."""

    own: Constraints | None
    affinity: Counter[Pair] | None = None
    anti_affinity: Counter[Pair] | None = None
    refusals: list[Pair] = field(default_factory=list)
    #: (constraint, its domains, 1 if the pod matches its selector, the emptiest domain's count)
    spread: list[tuple[Spread, _Domains, int, int]] = field(default_factory=list)

    def allows(self, labels: Mapping[str, str]) -> bool:
        """Whether a node with these labels passes InterPodAffinity's and PodTopologySpread's Filter."""
        if self.affinity is not None and not self._affinity_holds(labels):
            return False
        if self.anti_affinity and self._pair_taken(labels, self.anti_affinity):
            return False
        if any(labels.get(key) == value for key, value in self.refusals):
            return False
        return all(self._skew_holds(labels, *entry) for entry in self.spread)

    def _affinity_holds(self, labels: Mapping[str, str]) -> bool:
        assert self.own is not None and self.affinity is not None
        found = True
        for term in self.own.affinity:
            value = labels.get(term.topology_key)
            if value is None:
                return False  # every key must be on the node, even for the first pod
            if self.affinity[(term.topology_key, value)] <= 0:
                found = False
        return found or (not self.affinity and self.own.matches_own_affinity())

    def _pair_taken(self, labels: Mapping[str, str], counts: Counter[Pair]) -> bool:
        assert self.own is not None
        for term in self.own.anti_affinity:
            value = labels.get(term.topology_key)
            if value is not None and counts[(term.topology_key, value)] > 0:
                return True
        return False

    @staticmethod
    def _skew_holds(labels: Mapping[str, str], spread: Spread, domains: _Domains, own: int, lowest: int) -> bool:
        value = labels.get(spread.topology_key)
        if value is None:
            return False
        return domains.counts.get(value, 0) + own - lowest <= spread.max_skew


class PodFilters:
    """One binding pass's counts for the two filters: made on first need, updated by `add` as pods bind.

    `pods` is read again for each count made (the cluster's live pods: those bound earlier in the pass
    are in); nothing is kept per pod, so a pass over pods none of this concerns allocates next to nothing.
    """

    def __init__(self, nodes: Mapping[str, Mapping[str, Any]], pods: Callable[[], Iterable[Mapping[str, Any]]],
                 node_affinity: NodeCheck, tolerated: NodeCheck) -> None:
        self._nodes = nodes
        self._pods = pods
        self._labels: dict[str, Mapping[str, str]] = {n: (raw.get("metadata") or {}).get("labels") or {} for n, raw in nodes.items()}
        self._node_affinity, self._tolerated = node_affinity, tolerated
        #: (an existing pod's anti-affinity term, its node)
        self._holders: list[tuple[Term, str]] = []
        self._affinity: dict[tuple[Term, ...], Counter[Pair]] = {}
        self._anti: dict[tuple[Term, ...], Counter[Pair]] = {}
        self._domains: dict[tuple[Any, ...], _Domains] = {}
        #: (namespace, labels) of incoming pods -> pairs where existing pods' anti-affinity refuses them
        self._refusals: dict[tuple[str, tuple[Pair, ...]], Counter[Pair]] = {}
        for raw in pods():  # the pods with anti-affinity are few: test that first
            affinity = (raw.get("spec") or {}).get("affinity")
            if affinity and affinity.get("podAntiAffinity") and _placed_on(raw, nodes):
                self._hold(raw, raw["spec"]["nodeName"])

    def check(self, raw: Mapping[str, Any]) -> PodCheck | None:
        """The check a pending pod needs, or None when nothing of these filters applies to it (then the
        binder's per-signature fast path places it)."""
        own = constraints_of(raw)
        refusals = self._refusals_of(*_identity(raw)) if self._holders else None
        if own is None and not refusals:
            return None
        out = PodCheck(own, refusals=[pair for pair, n in (refusals or {}).items() if n > 0])
        if own is not None:
            if own.affinity:
                out.affinity = self._counts(self._affinity, own.affinity)
            if own.anti_affinity:
                out.anti_affinity = self._counts(self._anti, own.anti_affinity)
            out.spread = [self._spread_entry(raw, own, s) for s in own.spread]
        return out

    def add(self, raw: Mapping[str, Any], node: str) -> None:
        """A pod the pass has just bound: it counts for every pod placed after it."""
        if node not in self._nodes:
            return
        if self._affinity or self._anti or self._domains:
            self._count_new(raw, node)
        self._hold(raw, node)

    def _count_new(self, raw: Mapping[str, Any], node: str) -> None:
        namespace, labels = _identity(raw)
        for terms, counts in self._affinity.items():
            _count_affinity(counts, terms, namespace, labels, self._labels[node])
        for terms, counts in self._anti.items():
            _count_anti_affinity(counts, terms, namespace, labels, self._labels[node])
        for (spread, ns, *_), domains in self._domains.items():
            if node in domains.nodes and spread.counts(ns, namespace, labels, _terminating(raw)):
                value = self._labels[node][spread.topology_key]
                domains.counts[value] = domains.counts.get(value, 0) + 1

    def _placed(self) -> Iterator[tuple[Mapping[str, Any], str]]:
        """(pod JSON, node) of every pod the scheduler's snapshot holds."""
        for raw in self._pods():
            if _placed_on(raw, self._nodes):
                yield raw, raw["spec"]["nodeName"]

    def _hold(self, raw: Mapping[str, Any], node: str) -> None:
        """Keep the pod's anti-affinity terms: they refuse pods placed after it."""
        for term in anti_affinity_terms(raw):
            self._holders.append((term, node))
            for (ns, items), counts in self._refusals.items():
                _count_anti_affinity(counts, (term,), ns, dict(items), self._labels[node])

    def _refusals_of(self, namespace: str, labels: Mapping[str, str]) -> Counter[Pair]:
        key = (namespace, tuple(sorted(labels.items())))
        found = self._refusals.get(key)
        if found is None:
            found = self._refusals[key] = Counter()
            for term, node in self._holders:
                _count_anti_affinity(found, (term,), namespace, labels, self._labels[node])
        return found

    def _counts(self, store: dict[tuple[Term, ...], Counter[Pair]], terms: tuple[Term, ...]) -> Counter[Pair]:
        found = store.get(terms)
        if found is None:
            found = store[terms] = Counter()
            count = _count_affinity if store is self._affinity else _count_anti_affinity
            for raw, node in self._placed():
                count(found, terms, *_identity(raw), self._labels[node])
        return found

    def _spread_entry(self, raw: Mapping[str, Any], own: Constraints, spread: Spread) -> tuple[Spread, _Domains, int, int]:
        domains = self._spread_domains(raw, own, spread)
        enough = len(domains.counts) >= spread.min_domains
        lowest = min(domains.counts.values()) if enough and domains.counts else 0
        matches_self = int(spread.selector is not None and spread.selector.matches(own.labels))
        return spread, domains, matches_self, lowest

    def _spread_domains(self, raw: Mapping[str, Any], own: Constraints, spread: Spread) -> _Domains:
        spec = raw.get("spec") or {}
        keys = tuple(sorted({s.topology_key for s in own.spread}))
        admitted = json.dumps([spec.get("nodeSelector"), (spec.get("affinity") or {}).get("nodeAffinity")]
                              if spread.honor_affinity else None, sort_keys=True)
        tolerating = json.dumps(spec.get("tolerations") if spread.honor_taints else None, sort_keys=True)
        cache_key = (spread, own.namespace, keys, admitted, tolerating)
        found = self._domains.get(cache_key)
        if found is None:
            found = self._domains[cache_key] = self._count_domains(spec, own.namespace, spread, keys)
        return found

    def _count_domains(self, spec: Mapping[str, Any], namespace: str, spread: Spread, keys: tuple[str, ...]) -> _Domains:
        domains = _Domains(set(), {})
        for name, node_raw in self._nodes.items():
            labels = self._labels[name]
            if all(k in labels for k in keys) and (not spread.honor_affinity or self._node_affinity(spec, node_raw)) and (
                    not spread.honor_taints or self._tolerated(spec, node_raw)):
                domains.nodes.add(name)
                domains.counts.setdefault(labels[spread.topology_key], 0)
        for raw, node in self._placed():
            if node in domains.nodes and spread.counts(namespace, *_identity(raw), _terminating(raw)):
                domains.counts[self._labels[node][spread.topology_key]] += 1
        return domains


def _placed_on(raw: Mapping[str, Any], nodes: Mapping[str, Any]) -> bool:
    """Whether the pod is bound to one of `nodes` and neither Succeeded nor Failed."""
    node = (raw.get("spec") or {}).get("nodeName")
    return bool(node) and node in nodes and (raw.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def _terminating(raw: Mapping[str, Any]) -> bool:
    return bool((raw.get("metadata") or {}).get("deletionTimestamp"))


def _count_affinity(counts: Counter[Pair], terms: tuple[Term, ...], namespace: str, labels: Mapping[str, str],
                    node_labels: Mapping[str, str]) -> None:
    """`updateWithAffinityTerms`: a pod matching all the terms counts in each term's pair on its node."""
    if terms and all(t.matches(namespace, labels) for t in terms):
        for t in terms:
            if t.topology_key in node_labels:
                counts[(t.topology_key, node_labels[t.topology_key])] += 1


def _count_anti_affinity(counts: Counter[Pair], terms: tuple[Term, ...], namespace: str, labels: Mapping[str, str],
                         node_labels: Mapping[str, str]) -> None:
    """`updateWithAntiAffinityTerms`: a pod counts in the pair of each term that matches it."""
    for t in terms:
        if t.topology_key in node_labels and t.matches(namespace, labels):
            counts[(t.topology_key, node_labels[t.topology_key])] += 1


__all__ = ["Constraints", "PodCheck", "PodFilters", "Selector", "Spread", "Term", "anti_affinity_terms", "constraints_of"]
