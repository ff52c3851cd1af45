"""The pods already placed that a batch's topology constraints count, as Karpenter's `Topology.countDomains`.

Why: a topology spread, a pod affinity or an anti-affinity over zones decides where a pod may go by the
pods already there. Planned without them, a batch saw every zone empty: after a spot interruption under
zone spread the node's pods were planned one per zone, where the kube-scheduler only puts them back in
the zone they left (the others hold their share), so nodes came up that no pod used (deleted as empty)
while the pods waited, one 1-pod node a minute in a zone the spread did not allow either (issue 38).

What is read (`Placed.read`, once per invocation): for each (namespace, selector) the batch's constraints
name, one list of the unfinished pods it selects (`Cluster.pods_selected`, as countDomains lists them),
then the nodes those pods are bound to. A hostname spread or anti-affinity needs no node: a new node is
an empty domain to carpool's scheduler, so what matters is only the pods going to claims in flight (the
room it may still fill); hostname *affinity* needs them (its peers already on a node decide that no new
node can serve it).

How they count (`Placed.bins`, each round; Karpenter's rules):
- not the pods being scheduled (they are moving), nor terminating ones (nor, from the read, finished ones);
- a pod nominated to a claim in flight counts on that claim while it is unbound, bound to that claim's
  node, or bound to a node being drained (cordoned: an interrupted or disrupted node): it is going there;
- every other bound pod counts on its node, a bin with no room (`ExistingNode.remaining` empty): the
  kube-scheduler places pods on existing nodes, carpool only counts them; the spread's node filter judges
  the node's labels and taints as the kube-scheduler's PodTopologySpread does;
- an unbound pod nominated nowhere, or one whose node is gone, counts nowhere (it is not placed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from carpool import labels as L
from carpool.api.k8s import Node, Pod
from carpool.ports import Cluster
from carpool.scheduling import convert
from carpool.scheduling import inputs as si
from carpool.scheduling.topologygroup import AFFINITY, ANTI, namespaces_of

#: more distinct nodes than this are read with one list of every node instead of one GET each
MAX_NODE_GETS = 20

#: (namespace or None for every namespace, labelSelector): one list of pods
Query = tuple[str | None, str]


@dataclass(frozen=True)
class InFlight:
    """What `Placed.bins` needs of a claim in flight: its name, the pods nominated to it, and its node
    once that is Ready (None before)."""

    name: str
    pods: Collection[str]
    node: str | None = None


@dataclass(frozen=True)
class Bins:
    """A round's counted pods: those going to each claim in flight, and the no-room bins of the nodes
    holding the others."""

    held: Mapping[str, tuple[si.PodSpec, ...]] = field(default_factory=dict)
    existing: tuple[si.ExistingNode, ...] = ()


@dataclass(frozen=True)
class Placed:
    """The selected pods that are placed or on their way (unfinished, not terminating), and the nodes
    they are bound to."""

    pods: tuple[Pod, ...] = ()
    nodes: Mapping[str, Node] = field(default_factory=dict)

    @classmethod
    def read(cls, cluster: Cluster, batch: Iterable[Pod]) -> Placed:
        """The pods the batch's constraints count and their nodes; nothing is read for a batch without
        such constraints."""
        found: dict[str, Pod] = {}
        bound: set[str] = set()
        for (namespace, selector), needs_nodes in sorted(queries(batch).items(), key=lambda q: (q[0][0] or "", q[0][1])):
            for pod in cluster.pods_selected(namespace, selector):
                if pod.is_terminating():
                    continue
                found.setdefault(pod.key, pod)
                if needs_nodes and pod.spec.node_name:
                    bound.add(pod.spec.node_name)
        return cls(tuple(found.values()), _nodes(cluster, bound))

    def bins(self, scheduling: Collection[str], in_flight: Sequence[InFlight]) -> Bins:
        """Where each counted pod counts this round (see the module's docstring); `scheduling`: the keys of
        the pods this round places, never counted."""
        if not self.pods:
            return Bins()
        going = {key: c for c in in_flight for key in c.pods}
        own_node = {c.node: c.name for c in in_flight if c.node}
        held: dict[str, list[si.PodSpec]] = {}
        on_node: dict[str, list[Pod]] = {}
        for pod in self.pods:
            if pod.key in scheduling:
                continue
            node = pod.spec.node_name or ""
            claim = going.get(pod.key)
            if claim is not None and (not node or node == claim.node or self._leaving(node)):
                held.setdefault(claim.name, []).append(convert.pod_spec(pod))
            elif node in own_node:
                held.setdefault(own_node[node], []).append(convert.pod_spec(pod))
            elif node in self.nodes:
                on_node.setdefault(node, []).append(pod)
        existing = tuple(dataclasses.replace(convert.existing_node(self.nodes[n], pods), remaining={})
                         for n, pods in sorted(on_node.items()))
        return Bins({k: tuple(v) for k, v in held.items()}, existing)

    def _leaving(self, node: str) -> bool:
        """A node being drained (cordoned) or gone, or not read (a hostname constraint's pod: counting it
        where it is nominated only ever launches a node too many, never leaves a pod without one)."""
        found = self.nodes.get(node)
        return found is None or found.spec.unschedulable


def queries(batch: Iterable[Pod]) -> dict[Query, bool]:
    """The pod lists the batch's topology constraints count, one per (namespace, selector) of every spread,
    affinity and anti-affinity term, required or preferred (a preference holds until relaxed), each with
    whether its pods' nodes are needed (not for a hostname spread or anti-affinity alone)."""
    out: dict[Query, bool] = {}
    for pod in batch:
        labels = pod.labels
        for constraint in pod.spec.topology_spread_constraints:
            _add(out, [pod.namespace], convert.spread(constraint, labels).selector, constraint.topology_key != L.HOSTNAME)
        affinity = pod.spec.affinity
        if affinity is None:
            continue
        for kind, terms in ((AFFINITY, affinity.pod_affinity), (ANTI, affinity.pod_anti_affinity)):
            for term in [*terms.required, *(w.pod_affinity_term for w in terms.preferred)] if terms else []:
                converted = convert.affinity_term(term, labels)
                where = namespaces_of(pod.namespace, converted)
                _add(out, sorted(where) if where is not None else [None], converted.selector,
                     kind == AFFINITY or term.topology_key != L.HOSTNAME)
    return out


def _add(out: dict[Query, bool], namespaces: Iterable[str | None], selector: si.LabelSelector, needs_nodes: bool) -> None:
    query = selector.query()
    if query is not None:
        for ns in namespaces:
            out[(ns, query)] = out.get((ns, query), False) or needs_nodes


def _nodes(cluster: Cluster, names: Collection[str]) -> dict[str, Node]:
    """The named nodes that exist: a GET each when they are few, else one list of every node."""
    if len(names) > MAX_NODE_GETS:
        return {n.name: n for n in cluster.list_nodes() if n.name in names}
    found = {name: cluster.get_node(name) for name in sorted(names)}
    return {name: node for name, node in found.items() if node is not None}
