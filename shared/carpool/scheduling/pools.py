"""NodePools as the scheduler sees them, and the order new claims try them in.

Order rules (documented, deterministic, tested):
- **Weight is strict priority**: higher `spec.weight` first; a lower-weight pool only gets a new claim for
  a pod when no higher-weight pool can take it.
- **Equal weights: alphabetical by name** (ascending). Karpenter breaks ties reverse-alphabetically and
  does not document it (kubernetes-sigs/karpenter#2976); carpool picks the order people read.
- **Proportional split (carpool extension)**: pools of equal weight annotated `carpool.dev/split: "<share>"`
  (and `carpool.dev/split-by: nodes|cpu`, default nodes) share new claims: the next claim goes to the
  split pool furthest below its share, i.e. the lowest `amount / share`, where amount is the pool's nodes
  (or cpu) already in use plus the claims opened in this batch (a claim counts the cpu of its cheapest
  remaining option). Ties go alphabetically. Within a weight, split pools come before unsplit ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from carpool import labels as L
from carpool.requirements import Requirement, Requirements
from carpool.resources import CPU, PODS, Resources, add
from carpool.scheduling.inputs import HostPort, PodSpec, PoolSpec
from carpool.scheduling.limits import PoolLimits
from carpool.scheduling.options import InstanceIndex
from carpool.taints import untolerated

if TYPE_CHECKING:
    from carpool.scheduling.indexcache import IndexCache


class PoolState:
    """One pool during a batch: normalized requirements, instance index, overhead, limits, split count."""

    def __init__(self, id: int, spec: PoolSpec, daemonsets: Sequence[PodSpec],
                 indexes: IndexCache | None = None) -> None:
        self.id = id
        self.spec = spec
        self.name = spec.name
        self.weight = spec.weight
        reqs = spec.requirements
        if L.NODEPOOL not in reqs:
            reqs = reqs.add(Requirement.in_(L.NODEPOOL, spec.name))
        if spec.labels:
            reqs = reqs.merge(Requirements.from_labels(spec.labels))
        self.requirements = reqs
        self.taints = spec.taints
        # batches scheduled one after another against the same pools may share the index (`IndexCache`)
        self.index = (indexes.index(spec.instance_types, reqs) if indexes is not None
                      else InstanceIndex(spec.instance_types, reqs))
        daemons = daemons_on(reqs, spec.taints, daemonsets)
        self.overhead: Resources = add(daemon_overhead(daemons), spec.daemon_overhead)
        #: host ports the pool's DaemonSet pods hold on every new node (Karpenter reserves them on a new
        #: NodeClaim, so a pod asking for the same port needs another node)
        self.daemon_ports: tuple[HostPort, ...] = tuple(hp for ds in daemons for hp in ds.host_ports)
        self.limits = PoolLimits(spec.limits, spec.usage)
        self.min_values = {k: r.min_values for k, r in reqs.items() if r.min_values}
        ordered = [k for k in spec.ordered_keys if k in reqs and not reqs[k].complement and len(reqs[k].order) > 1]
        self.tiers: list[int] | None = self.index.tiers(reqs, ordered) if ordered else None
        self.split_share = spec.split_share if spec.split_share and spec.split_share > 0 else None
        self.split_by = spec.split_by
        self.split_amount = float(spec.usage.get("nodes" if spec.split_by == "nodes" else CPU, 0))

    def __repr__(self) -> str:
        return f"PoolState({self.name}, weight={self.weight})"


def daemons_on(requirements: Requirements, taints: Sequence, daemonsets: Sequence[PodSpec]) -> list[PodSpec]:
    """The DaemonSet pods that would run on a node of this pool (they tolerate its taints and their node
    affinity is compatible with its requirements).

    The node will be registered and initialized by the time such pods run, so a DaemonSet that selects
    `karpenter.sh/registered` or `karpenter.sh/initialized` nodes counts too (Karpenter adds both to its
    NodeClaim template for this check only; they never become claim requirements or labels)."""
    requirements = requirements.add(*_LIFECYCLE)
    found = []
    for ds in daemonsets:
        if untolerated(taints, ds.tolerations) is not None:
            continue
        terms = ds.requirements or (Requirements(),)
        if any(requirements.compatible(t, L.WELL_KNOWN) is None for t in terms):
            found.append(ds)
    return found


def daemon_overhead(daemons: Sequence[PodSpec]) -> Resources:
    """Requests of the DaemonSet pods a node runs (each is at least one pod)."""
    total: Resources = {}
    for ds in daemons:
        req = dict(ds.requests)
        req[PODS] = max(req.get(PODS, 0), 1)
        total = add(total, req)
    return total


# labels every node of a pool carries once up, seen only by the DaemonSet overhead check
_LIFECYCLE = (Requirement.in_(L.REGISTERED, "true"), Requirement.in_(L.NODE_INITIALIZED, "true"))


class PoolOrder:
    """The order a new claim tries pools in (see module docstring)."""

    def __init__(self, pools: Sequence[PoolState]) -> None:
        classes: dict[int, list[PoolState]] = {}
        for p in pools:
            classes.setdefault(p.weight, []).append(p)
        self._classes = [sorted(classes[w], key=lambda p: p.name) for w in sorted(classes, reverse=True)]
        self._dynamic = any(p.split_share for p in pools)
        self._static = [p for cls in self._classes for p in cls]

    def __iter__(self):
        if not self._dynamic:
            return iter(self._static)
        return iter(self._ordered())

    def _ordered(self) -> list[PoolState]:
        out: list[PoolState] = []
        for cls in self._classes:
            split = [p for p in cls if p.split_share]
            split.sort(key=lambda p: (p.split_amount / p.split_share, p.name))  # type: ignore[operator]
            out.extend(split)
            out.extend(p for p in cls if not p.split_share)
        return out
