"""Applying a scenario's manifests and workload steps to the simulated cluster.

This plays the Kubernetes controllers the scenario needs: `apply` creates what a manifest describes
(workloads become their pods, DaemonSets, PDBs and storage objects are stored, NodePools/EC2NodeClasses go to carpool's
config), `scale` is the Deployment controller adding or removing replicas, `delete` removes a workload's
pods. carpool never sees these steps; it only sees the pods appear, as in a real cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import yaml

from carpool.sim.cluster import SimulatedCluster
from carpool.sim.scenario import Delete, Scale

WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "Job")
CONFIG_KINDS = ("NodePool", "EC2NodeClass")


def controller_id(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace}/{name}"


@dataclass
class WorkloadDriver:
    """Turns manifests into cluster objects; keeps each workload's document so it can be scaled later.

    `load` is `carpool.api.loader.load` (texts -> Manifests); `on_config` receives the current
    NodePool/EC2NodeClass documents whenever they change.
    """

    cluster: SimulatedCluster
    load: Callable[[list[str]], Any]
    on_config: Callable[[list[dict[str, Any]]], None] = lambda _docs: None
    workloads: dict[str, dict[str, Any]] = field(default_factory=dict)
    config_docs: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def apply(self, texts: Iterable[str]) -> int:
        """Apply YAML texts; returns how many pods were created."""
        texts = list(texts)
        docs = [d for t in texts for d in yaml.safe_load_all(t) if isinstance(d, dict)]
        config_changed = False
        for doc in docs:
            kind = doc.get("kind", "")
            if kind in CONFIG_KINDS:
                self.config_docs[(kind, (doc.get("metadata") or {}).get("name", ""))] = doc
                config_changed = True
            elif kind in WORKLOAD_KINDS:
                meta = doc.get("metadata") or {}
                self.workloads[controller_id(kind, meta.get("namespace") or "default", meta.get("name", ""))] = doc
        manifests = self.load(texts)
        if config_changed:
            self.on_config(list(self.config_docs.values()))
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
        """Scale a Deployment (or StatefulSet/ReplicaSet) to `replicas`; returns the change in pods."""
        key = self._find(step.deployment, step.namespace)
        doc = dict(self.workloads[key])
        doc["spec"] = {**(doc.get("spec") or {}), "replicas": step.replicas}
        self.workloads[key] = doc
        current = self.cluster.pods_of(key)
        if step.replicas < len(current):
            for pod in current[step.replicas:]:
                self.cluster.delete_pod(pod)
            return step.replicas - len(current)
        wanted = self.load([yaml.safe_dump(doc, sort_keys=False)]).pods
        existing = {k.split("/", 1)[1] for k in current}
        added = 0
        for pod in wanted:
            if len(current) + added >= step.replicas:
                break
            if pod.metadata.name not in existing:
                self.cluster.add_pod(pod.to_json_dict(), controller=key, owned=True)
                added += 1
        return added

    def delete(self, step: Delete) -> int:
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
