"""Applying a scenario's manifests and workload steps to the simulated cluster.

This plays the Kubernetes controllers the scenario needs: `apply` creates what a manifest describes
(workloads become their pods, DaemonSets, PDBs and storage objects are stored, NodePools/EC2NodeClasses are
`kubectl apply`d to the cluster's API, where carpool reads its config), `scale` is the Deployment controller
adding or removing replicas, `delete` removes a workload's pods, or a NodePool or EC2NodeClass. carpool
never sees these steps; it only sees the objects change, as in a real cluster.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cmp_to_key, partial
from typing import Any

import yaml

from carpool.karpenter_objects import EC2NODECLASS, NODECLAIM, NODEPOOL
from carpool.labels import NODEPOOL as NODEPOOL_LABEL
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.sim.cluster.specs import Delete, NodeTarget, Scale

WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "Job")
CONFIG_KINDS = ("NodePool", "EC2NodeClass")


def controller_id(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace}/{name}"


@dataclass
class WorkloadDriver:
    """Turns manifests into cluster objects; keeps each workload's document so it can be scaled later.

    `load` is `carpool.api.loader.load` (texts -> Manifests). NodePool/EC2NodeClass documents go to the
    cluster as `kubectl apply` sends them (`SimulatedCluster.apply_object`: the CRD's schema judges them
    there, and a refusal is the apply's error); `config_docs` keeps the last applied of each.
    """

    cluster: SimulatedCluster
    load: Callable[[list[str]], Any]
    workloads: dict[str, dict[str, Any]] = field(default_factory=dict)
    config_docs: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def apply(self, texts: Iterable[str]) -> int:
        """Apply YAML texts; returns how many pods were created."""
        texts = list(texts)
        docs = [d for t in texts for d in yaml.safe_load_all(t) if isinstance(d, dict)]
        config = []
        for doc in docs:
            kind = doc.get("kind", "")
            if kind in CONFIG_KINDS:
                self.config_docs[(kind, (doc.get("metadata") or {}).get("name", ""))] = doc
                config.append(doc)
            elif kind in WORKLOAD_KINDS:
                meta = doc.get("metadata") or {}
                self.workloads[controller_id(kind, meta.get("namespace") or "default", meta.get("name", ""))] = doc
        manifests = self.load(texts)
        for doc in config:
            self.cluster.apply_object(doc)
        created = 0
        for pod in manifests.pods:
            self.cluster.add_pod(pod.to_json_dict(), controller=_owner_id(pod), owned=True)
            created += 1
        for ds in manifests.daemonsets:
            self.cluster.add_daemonset(ds.to_json_dict())
        for pdb in manifests.pdbs:
            self.cluster.add_pdb(pdb.to_json_dict())
        for node in manifests.nodes:
            self.cluster.add_node(node.to_json_dict())
        for obj in [*manifests.storageclasses, *manifests.persistentvolumes, *manifests.persistentvolumeclaims]:
            self.cluster.add_storage(obj.to_json_dict())
        return created

    def scale(self, step: Scale) -> int:
        """Scale a Deployment (or StatefulSet/ReplicaSet) to `replicas`; returns the change in pods. Active
        pods (not Succeeded, Failed or terminating) are the replicas; the extra ones go in the order their
        controller deletes them (`pods_to_delete`)."""
        key = self._find(step.deployment, step.namespace)
        doc = dict(self.workloads[key])
        doc["spec"] = {**(doc.get("spec") or {}), "replicas": step.replicas}
        self.workloads[key] = doc
        pods = self.cluster.controller_pods(key)
        active = [(k, raw) for k, raw in pods if _active(raw)]
        if step.replicas < len(active):
            doomed = pods_to_delete(key.split("/", 1)[0], active, len(active) - step.replicas, self.cluster.now())
            for pod in doomed:
                self.cluster.delete_pod(pod)
            return -len(doomed)
        wanted = self.load([yaml.safe_dump(doc, sort_keys=False)]).pods
        existing = {k.split("/", 1)[1] for k, _ in pods}
        added = 0
        for pod in wanted:
            if len(active) + added >= step.replicas:
                break
            if pod.metadata.name not in existing:
                self.cluster.add_pod(pod.to_json_dict(), controller=key, owned=True)
                added += 1
        return added

    def delete(self, step: Delete) -> int:
        """Carry out a delete step; returns how many pods were removed (a NodePool's nodes go as its
        NodeClaims are deleted, not here)."""
        for kind, name in ((NODEPOOL, step.nodepool), (EC2NODECLASS, step.ec2nodeclass)):
            if name:
                self.cluster.delete_object(kind, name)
                self.config_docs.pop((kind.kind, name), None)
        removed = 0
        if step.deployment:
            key = self._find(step.deployment, step.namespace)
            self.workloads.pop(key, None)
            for pod in self.cluster.pods_of(key):
                self.cluster.delete_pod(pod)
                removed += 1
        for pod in step.pods:
            self.cluster.delete_pod(pod if "/" in pod else f"default/{pod}")
            removed += 1
        return removed

    def delete_nodes(self, step: Delete) -> list[str]:
        """`kubectl delete nodeclaim|node` of the nodes a delete step names (`NodeTarget`): the objects'
        deletion as the API server does it (held by their finalizers until carpool lets them go). Returns
        what was deleted ("NodeClaim <name>", "Node <name>")."""
        out = []
        if step.node_claims is not None:
            for name in self._oldest(self.cluster.list_objects(NODECLAIM).items, step.node_claims):
                self.cluster.delete_object(NODECLAIM, name)
                out.append(f"NodeClaim {name}")
        if step.nodes is not None:
            for name in self._oldest([rec.raw for rec in self.cluster.nodes.values()], step.nodes):
                self.cluster.delete_node(name)
                out.append(f"Node {name}")
        return out

    @staticmethod
    def _oldest(objects: Iterable[Mapping[str, Any]], target: NodeTarget) -> list[str]:
        """The names of the `target.count` oldest launched objects of its NodePool not being deleted."""
        picked = []
        for obj in objects:
            meta = obj.get("metadata") or {}
            pool = (meta.get("labels") or {}).get(NODEPOOL_LABEL)
            if pool is None or meta.get("deletionTimestamp") or (target.node_pool and pool != target.node_pool):
                continue
            picked.append((str(meta.get("creationTimestamp") or ""), str(meta.get("name"))))
        return [name for _created, name in sorted(picked)[: target.count]]

    def _find(self, name: str, namespace: str) -> str:
        for kind in WORKLOAD_KINDS:
            key = controller_id(kind, namespace, name)
            if key in self.workloads:
                return key
        known = ", ".join(sorted(self.workloads)) or "none"
        raise KeyError(f"workload {namespace}/{name} was never applied (known: {known})")


def _owner_id(pod: Any) -> str | None:
    for ref in pod.metadata.owner_references:
        if ref.kind in WORKLOAD_KINDS:
            return controller_id(ref.kind, pod.metadata.namespace or "default", ref.name)
    return None


#: `podPhaseToOrdinal`: Pending pods go before Unknown ones, Unknown before Running (any other phase as Pending)
_PHASE_ORDINAL = {"Pending": 0, "Unknown": 1, "Running": 2}

#: the annotation by which a pod of a ReplicaSet asks to go before (lower) or after (higher) its siblings
POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


def pods_to_delete(kind: str, pods: Sequence[tuple[str, Mapping[str, Any]]], count: int, now: datetime) -> list[str]:
    """The `count` active pods (key, JSON) a controller of `kind` deletes when scaled down.

    A StatefulSet removes its highest ordinals. A ReplicaSet, and a Deployment through its ReplicaSet,
    sorts as `getPodsToDelete` with `controller.ActivePodsWithRanks` (pkg/controller/replicaset/
    replica_set.go, pkg/controller/controller_utils.go; LogarithmicScaleDown and PodDeletionCost on, as by
    default): unassigned, then Pending/Unknown/Running, not ready, lower deletion cost, more pods of the
    set on the same node, ready more recently, more restarts, created more recently; times within the same
    power-of-two age compare by UID. A Job lowering its parallelism sorts as `controller.ActivePods`: no
    ranks nor costs, times as they are. Pods the source leaves tied keep the newest first (Go's sort
    leaves their order unspecified)."""
    if kind == "StatefulSet":
        return [k for k, _ in sorted(pods, key=lambda p: _ordinal(p[0]), reverse=True)][:count]
    ranked = kind != "Job"
    on_node = Counter(_node_of(raw) for _, raw in pods) if ranked else Counter[str]()
    candidates = [_Candidate.of(k, raw, on_node[_node_of(raw)], ranked) for k, raw in reversed(pods)]
    candidates.sort(key=cmp_to_key(partial(_compare, now=now if ranked else None)))
    return [c.key for c in candidates[:count]]


@dataclass(frozen=True)
class _Candidate:
    """What `ActivePodsWithRanks.Less` reads of one pod."""

    key: str
    assigned: bool
    phase: int
    ready: bool
    cost: int
    #: active pods of the same controller on the pod's node (the pod included)
    rank: int
    ready_since: datetime | None
    restarts: int
    created: datetime | None
    uid: str

    @classmethod
    def of(cls, key: str, raw: Mapping[str, Any], rank: int, ranked: bool) -> _Candidate:
        meta, status = raw.get("metadata") or {}, raw.get("status") or {}
        ready: Mapping[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
        is_ready = ready.get("status") == "True"
        restarts = max((int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or []), default=0)
        return cls(key, bool(_node_of(raw)), _PHASE_ORDINAL.get(status.get("phase") or "", 0), is_ready,
                   _deletion_cost(meta.get("annotations") or {}) if ranked else 0, rank if ranked else 0,
                   _time(ready.get("lastTransitionTime")) if is_ready else None, restarts,
                   _time(meta.get("creationTimestamp")), str(meta.get("uid") or ""))


def _compare(a: _Candidate, b: _Candidate, now: datetime | None) -> int:
    return -1 if _less(a, b, now) else 1 if _less(b, a, now) else 0


def _less(a: _Candidate, b: _Candidate, now: datetime | None) -> bool:
    """`ActivePodsWithRanks.Less`: whether `a` is deleted before `b`."""
    if a.assigned != b.assigned:
        return not a.assigned
    if a.phase != b.phase:
        return a.phase < b.phase
    if a.ready != b.ready:
        return not a.ready
    if a.cost != b.cost:
        return a.cost < b.cost
    if a.rank != b.rank:
        return a.rank > b.rank  # the pod on the more crowded node goes first
    if a.ready and b.ready and a.ready_since != b.ready_since:
        return _more_recent(a.ready_since, b.ready_since, a.uid, b.uid, now)
    if a.restarts != b.restarts:
        return a.restarts > b.restarts
    if a.created != b.created:
        return _more_recent(a.created, b.created, a.uid, b.uid, now)
    return False


def _more_recent(t1: datetime | None, t2: datetime | None, uid1: str, uid2: str, now: datetime | None) -> bool:
    """`afterOrZero`, or with a `now` the logarithmic comparison: ages within one power of two tie, and
    ties go by UID (pseudorandom in a real cluster)."""
    if now is None or t1 is None or t2 is None:
        return t1 is None if t1 is None or t2 is None else t1 > t2
    diff = _log_age(now - t1) - _log_age(now - t2)
    return uid1 < uid2 if diff == 0 else diff < 0


def _log_age(age: timedelta) -> int:
    nanos = age // timedelta(microseconds=1) * 1000
    return int(math.log2(nanos)) if nanos > 0 else -1


def _deletion_cost(annotations: Mapping[str, str]) -> int:
    """`GetDeletionCostFromPodAnnotations`: an int32, 0 when absent or invalid."""
    try:
        cost = int(annotations.get(POD_DELETION_COST, "0"))
    except ValueError:
        return 0
    return cost if -(2**31) <= cost < 2**31 else 0


def _active(raw: Mapping[str, Any]) -> bool:
    """`controller.IsPodActive`: neither finished nor being deleted."""
    return ((raw.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            and not (raw.get("metadata") or {}).get("deletionTimestamp"))


def _node_of(raw: Mapping[str, Any]) -> str:
    return str((raw.get("spec") or {}).get("nodeName") or "")


def _ordinal(key: str) -> int:
    suffix = key.rsplit("-", 1)[-1]
    return int(suffix) if suffix.isdigit() else -1


def _time(text: Any) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
