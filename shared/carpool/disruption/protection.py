"""What keeps a node from being disrupted voluntarily: annotations on its pods or on itself, and
PodDisruptionBudgets that allow no eviction right now.

Why both projects' annotations: with Cluster Autoscaler and carpool in one cluster, a user who protected a
workload with CAS's `cluster-autoscaler.kubernetes.io/scale-down-disabled` (or, on pods,
`cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`) expects it to hold against any autoscaler;
neither Karpenter nor CAS honours the other's. carpool honours both, on pods and nodes.

PDBs: the Eviction API enforces them during a drain anyway; checking here keeps carpool from tainting a
node (and launching its replacement) that could not be drained. A node is blocked when one of its pods is
selected by a PDB that allows 0 disruptions, or by two PDBs (the Eviction API refuses such pods).
Forceful disruption (node repair) ignores all of this, as Karpenter's does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from carpool import labels
from carpool.api.k8s import Node, Pod, PodDisruptionBudget
from carpool.disruption import podview
from carpool.disruption.podview import PodView

CAS_SAFE_TO_EVICT = podview.CAS_SAFE_TO_EVICT
TRUE = podview.TRUE


def pod_protection(pod: Pod) -> str | None:
    """Why this pod keeps its node from voluntary disruption, if it does."""
    return podview.protection_of(pod.key, pod.annotations)


def node_protection(node: Node) -> str | None:
    """Why the node itself is protected (the annotation on the Node object), if it is."""
    ann = node.metadata.annotations
    for key in (labels.DO_NOT_DISRUPT, labels.CAS_SCALE_DOWN_DISABLED):
        if ann.get(key) == TRUE:
            return f"node {node.name} has {key}"
    return None


def pdb_key(pdb: PodDisruptionBudget) -> str:
    return f"{pdb.namespace}/{pdb.name}"


class PdbIndex:
    """Which PDBs select a pod, looked up by namespace and asked once per distinct label set: the pods
    of one workload share their labels, so a cluster of 150,000 pods asks a few hundred times."""

    def __init__(self, pdbs: Iterable[PodDisruptionBudget]) -> None:
        self._by_namespace: dict[str, list[PodDisruptionBudget]] = {}
        for pdb in pdbs:
            self._by_namespace.setdefault(pdb.namespace, []).append(pdb)
        self._seen: dict[tuple[str, frozenset[tuple[str, str]]], tuple[str, ...]] = {}

    def __bool__(self) -> bool:
        return bool(self._by_namespace)

    def keys(self, pod: PodView) -> tuple[str, ...]:
        """Keys of the PDBs that select `pod`, sorted."""
        in_namespace = self._by_namespace.get(pod.namespace)
        if not in_namespace:
            return ()
        lookup = (pod.namespace, frozenset(pod.labels.items()))
        got = self._seen.get(lookup)
        if got is None:
            got = self._seen[lookup] = tuple(sorted(pdb_key(b) for b in in_namespace if podview.pdb_selects(b, pod)))
        return got


def allowances(pdbs: Iterable[PodDisruptionBudget], pods: Sequence[PodView],
               index: PdbIndex | None = None) -> dict[str, int]:
    """Evictions each PDB allows now: `status.disruptionsAllowed` when the API reported it, else computed
    from the pods it selects (the disruption controller's formula)."""
    pdbs = list(pdbs)
    out: dict[str, int] = {}
    counted = [b for b in pdbs if b.status is None or b.status.disruptions_allowed is None]
    expected: dict[str, int] = {}
    healthy: dict[str, int] = {}
    if counted:
        index = index or PdbIndex(pdbs)
        wanted = {pdb_key(b) for b in counted}
        for pod in pods:
            if pod.terminal:
                continue
            for key in index.keys(pod):
                if key in wanted:
                    expected[key] = expected.get(key, 0) + 1
                    healthy[key] = healthy.get(key, 0) + (1 if pod.healthy else 0)
    for pdb in pdbs:
        key = pdb_key(pdb)
        if pdb.status is not None and pdb.status.disruptions_allowed is not None:
            out[key] = pdb.status.disruptions_allowed
        else:
            out[key] = pdb.allowed_disruptions(expected.get(key, 0), healthy.get(key, 0))
    return out


def membership(pods: Iterable[PodView], index: PdbIndex) -> tuple[dict[str, int], str | None]:
    """How many of `pods` each PDB selects, and why they cannot be evicted at all (a pod under two PDBs)."""
    counts: dict[str, int] = {}
    problem = None
    if not index:
        return counts, problem
    for pod in pods:
        keys = index.keys(pod)
        if len(keys) > 1 and problem is None:
            problem = f"pod {pod.key} is selected by {len(keys)} PodDisruptionBudgets ({', '.join(keys)})"
        for k in keys:
            counts[k] = counts.get(k, 0) + 1
    return counts, problem


class PdbTracker:
    """Evictions still allowed per PDB while one run plans several disruptions.

    Blocking only at 0 (not "fewer than the node's pods") lets a node whose pods share one PDB drain
    gradually, one eviction at a time, as `kubectl drain` and Karpenter do; consuming the allowance keeps
    one run from choosing two nodes that the same exhausted PDB would block.
    """

    def __init__(self, allowed: Mapping[str, int]) -> None:
        self._left = dict(allowed)

    def blocker(self, counts: Mapping[str, int]) -> str | None:
        for key in sorted(counts):
            if counts[key] and self._left.get(key, 1) <= 0:
                return f"PodDisruptionBudget {key} allows no disruption now"
        return None

    def consume(self, counts: Mapping[str, int]) -> None:
        for key, n in counts.items():
            if key in self._left:
                self._left[key] = max(0, self._left[key] - n)
