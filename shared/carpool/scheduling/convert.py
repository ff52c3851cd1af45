"""From `carpool.api` models (and catalog types) to the scheduler's own input types.

Why a separate module: the scheduler core must not depend on pydantic models (speed, and independence from
the API's evolution); everything that knows both sides lives here.

Conventions kept from Kubernetes:
- node affinity: `nodeSelector` is ANDed into every required term; the terms are ORed;
- a missing `labelSelector` selects nothing; an empty `namespaceSelector: {}` means every namespace (other
  namespace selectors need Namespace labels, which carpool does not load: they fall back to the listed
  namespaces or the pod's own);
- `matchLabelKeys` adds `key In [pod's value]` to the selector (spread and pod affinity);
- `nodeAffinityPolicy` (default Honor) and `nodeTaintsPolicy` (default Ignore) on a spread decide whether the
  pod's node affinity and tolerations filter the nodes its domains and counts come from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from carpool import labels as L
from carpool.api.k8s import Node, Pod, PodAffinityTerm, TopologySpreadConstraint
from carpool.api.nodepool import NodePool
from carpool.api.selectors import LabelSelector as ApiLabelSelector
from carpool.requirements import Requirements
from carpool.resources import Resources, subtract
from carpool.scheduling import inputs as si
from carpool.scheduling.volumetopology import VolumeTopology, conflict
from carpool.taints import KNOWN_EPHEMERAL_TAINTS, Taint

ORDERED_ANNOTATION = "carpool.dev/ordered-requirements"
SPLIT_ANNOTATION = "carpool.dev/split"
SPLIT_BY_ANNOTATION = "carpool.dev/split-by"


def label_selector(sel: ApiLabelSelector | None, pod_labels: Mapping[str, str] | None = None,
                   match_label_keys: Iterable[str] = ()) -> si.LabelSelector:
    """A LabelSelector (None selects nothing), with `matchLabelKeys` resolved against the pod's labels."""
    if sel is None:
        return si.NOTHING
    exprs = [(e.key, e.operator, e.values) for e in sel.match_expressions]
    for key in match_label_keys:
        if pod_labels is not None and key in pod_labels:
            exprs.append((key, "In", [pod_labels[key]]))
    return si.LabelSelector.of(sel.match_labels, exprs)


def affinity_term(term: PodAffinityTerm, pod_labels: Mapping[str, str]) -> si.AffinityTerm:
    everywhere = term.namespace_selector is not None and term.namespace_selector.is_empty()
    return si.AffinityTerm(
        topology_key=term.topology_key,
        selector=label_selector(term.label_selector, pod_labels, term.match_label_keys),
        namespaces=frozenset(term.namespaces) if term.namespaces else None,
        all_namespaces=everywhere,
    )


def spread(c: TopologySpreadConstraint, pod_labels: Mapping[str, str]) -> si.TopologySpread:
    return si.TopologySpread(
        topology_key=c.topology_key,
        max_skew=c.max_skew,
        when_unsatisfiable=c.when_unsatisfiable,
        selector=label_selector(c.label_selector, pod_labels, c.match_label_keys),
        min_domains=c.min_domains,
        honor_node_affinity=c.node_affinity_policy != "Ignore",
        honor_node_taints=c.node_taints_policy == "Honor",
    )


def node_terms(pod: Pod) -> tuple[Requirements, ...]:
    """The pod's node constraints as OR-terms (each required term ANDed with `nodeSelector`)."""
    base = Requirements.from_labels(pod.spec.node_selector)
    aff = pod.spec.affinity
    required = aff.node_affinity.required if aff is not None and aff.node_affinity is not None else []
    if not required:
        return (base,) if len(base) else ()
    return tuple(base.merge(t.requirements()) for t in required)


def pod_spec(pod: Pod, volume_terms: Sequence[Requirements] = ()) -> si.PodSpec:
    """The scheduler's view of a pod. `volume_terms`: the ORed zones its persistent volumes allow
    (`carpool.scheduling.volumetopology`), combined with its node affinity terms."""
    labels = dict(pod.labels)
    aff = pod.spec.affinity
    node_aff = aff.node_affinity if aff is not None else None
    pod_aff = aff.pod_affinity if aff is not None else None
    anti = aff.pod_anti_affinity if aff is not None else None
    preferred_node = tuple(
        si.PreferredNodeTerm(p.weight, p.preference.requirements()) for p in (node_aff.preferred if node_aff else [])
    )
    owner = next((f"{r.kind}/{r.name}" for r in pod.metadata.owner_references if r.controller), None)
    return si.PodSpec(
        key=pod.key,
        requests=pod.requests(),
        labels=labels,
        namespace=pod.namespace,
        uid=pod.metadata.uid or pod.key,
        requirements=_with_volumes(node_terms(pod), volume_terms),
        preferred_node_affinity=preferred_node,
        tolerations=tuple(pod.tolerations()),
        spread=tuple(spread(c, labels) for c in pod.spec.topology_spread_constraints),
        affinity=tuple(affinity_term(t, labels) for t in (pod_aff.required if pod_aff else [])),
        anti_affinity=tuple(affinity_term(t, labels) for t in (anti.required if anti else [])),
        preferred_affinity=tuple(
            si.WeightedAffinityTerm(w.weight, affinity_term(w.pod_affinity_term, labels))
            for w in (pod_aff.preferred if pod_aff else [])
        ),
        preferred_anti_affinity=tuple(
            si.WeightedAffinityTerm(w.weight, affinity_term(w.pod_affinity_term, labels))
            for w in (anti.preferred if anti else [])
        ),
        host_ports=tuple(si.HostPort(port, proto, "" if ip in ("0.0.0.0", "") else ip) for ip, proto, port in pod.host_ports()),
        owner=owner,
    )


def pod_spec_with_volumes(pod: Pod, volumes: VolumeTopology) -> si.PodSpec | str:
    """The scheduler's view of a pod with persistent volume claims, confined to its volumes' topology;
    or why it cannot be scheduled (its claims are not ready, or no zone suits both it and its volumes).
    The provisioner and `carpool plan` both convert such pods so."""
    problem = volumes.problem(pod)
    if problem is not None:
        return problem
    volume_terms = volumes.requirements(pod)
    converted = pod_spec(pod, volume_terms)
    return conflict(converted.requirements, volume_terms) or converted


def _with_volumes(terms: tuple[Requirements, ...], volume_terms: Sequence[Requirements]) -> tuple[Requirements, ...]:
    """Every node term with every volume alternative: a node must satisfy the pod and one volume topology."""
    if not volume_terms:
        return terms
    merged = tuple(t.merge(v) for t in terms or (Requirements(),) for v in volume_terms)
    return merged if any(len(m) for m in merged) else terms


def pool_spec(
    nodepool: NodePool,
    instance_types: Sequence[si.InstanceOption],
    usage: Mapping[str, int] | None = None,
    daemon_overhead: Resources | None = None,
) -> si.PoolSpec:
    """A NodePool with its (already sized) instance types; carpool annotations become pool settings."""
    ann = nodepool.metadata.annotations or {}
    ordered = tuple(k.strip() for k in ann.get(ORDERED_ANNOTATION, "").split(",") if k.strip())
    split = ann.get(SPLIT_ANNOTATION)
    template_meta = nodepool.spec.template.metadata
    return si.PoolSpec(
        name=nodepool.name,
        instance_types=list(instance_types),
        weight=nodepool.weight,
        requirements=nodepool.requirements(),
        labels=dict(template_meta.labels or {}) if template_meta is not None else {},
        taints=tuple(nodepool.taints()),
        startup_taints=tuple(nodepool.startup_taints()),
        limits=nodepool.limits(),
        usage=dict(usage or {}),
        daemon_overhead=dict(daemon_overhead or {}),
        ordered_keys=ordered,
        split_share=_share(split),
        split_by="cpu" if ann.get(SPLIT_BY_ANNOTATION, "nodes").strip() == "cpu" else "nodes",
    )


def _share(text: str | None) -> float | None:
    if not text:
        return None
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        raise ValueError(f"annotation {SPLIT_ANNOTATION}: expected a number, got {text!r}") from None
    return value if value > 0 else None


def instance_option(name: str, requirements: Requirements, offerings: Iterable, allocatable: Resources,
                    capacity: Resources | None = None,
                    unavailable: set[tuple[str, str, str]] | frozenset[tuple[str, str, str]] = frozenset()) -> si.InstanceOption:
    """An instance type for one pool: its sized allocatable and its offerings (minus unavailable ones)."""
    offers = tuple(
        si.Offering(o.zone, o.capacity_type, o.price, o.available and (name, o.zone, o.capacity_type) not in unavailable)
        for o in offerings
    )
    return si.InstanceOption(name, requirements, dict(allocatable), offers, dict(capacity) if capacity else None)


def existing_node(node: Node, pods: Sequence[Pod], nodepool: NodePool | None = None,
                  claim_allocatable: Mapping[str, int] | None = None) -> si.ExistingNode:
    """A registered node with what its bound pods leave free; the pods count for topology.

    A node of a NodePool (`nodepool`, or just its `karpenter.sh/nodepool` label) that is not initialized
    yet is still coming up: its known ephemeral taints (not-ready, unreachable, cloud-provider
    uninitialized, unregistered) and its pool's startup taints will go, so pods need not tolerate them,
    as Karpenter's in-flight nodes (`StateNode.Taints`). `claim_allocatable`, for such a node, is what its
    claim launched: every resource the kubelet still reports as zero or not at all (extended resources
    appear only once their device plugin registers) takes the claim's figure (`StateNode.Allocatable`)."""
    allocatable = node.allocatable()
    for name, value in (claim_allocatable or {}).items():
        if not allocatable.get(name):
            allocatable[name] = value
    used: Resources = {}
    for p in pods:
        for k, v in p.requests().items():
            used[k] = used.get(k, 0) + v
    return si.ExistingNode(
        name=node.name,
        labels=dict(node.labels),
        remaining=subtract(allocatable, used),
        taints=_lasting_taints(node, nodepool),
        pods=tuple(pod_spec(p) for p in pods),
        pool=node.labels.get("karpenter.sh/nodepool"),
    )


def _lasting_taints(node: Node, nodepool: NodePool | None) -> tuple[Taint, ...]:
    taints = node.taints()
    managed = nodepool is not None or L.NODEPOOL in node.labels
    if not managed or node.labels.get(L.NODE_INITIALIZED) == "true":
        return tuple(taints)
    passing = [*KNOWN_EPHEMERAL_TAINTS, *(nodepool.startup_taints() if nodepool is not None else ())]
    return tuple(t for t in taints if not any(t.key == p.key and t.effect == p.effect for p in passing))
