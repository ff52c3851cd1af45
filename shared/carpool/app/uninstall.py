"""Removing carpool without leaving objects stuck Terminating (`carpool release-finalizers`,
docs/uninstall.md).

carpool's Nodes and NodeClaims carry Karpenter's termination finalizer (`karpenter.sh/termination`): a
delete of either waits until carpool has drained the node and its instance is gone
(`carpool.app.termination`). Once carpool's functions no longer run, nothing would ever remove it, and
`kubectl delete node` would hang. Before the stack goes, its finalizer is taken off every Node and
NodeClaim carpool launched for this cluster (labelled `carpool.dev/owned-by=<cluster>`); an object already
being deleted then goes at once (the API server deletes an object whose last finalizer goes). Nodes and
NodeClaims Karpenter launched keep theirs: they are Karpenter's to finish when it runs again.

Each object is written under the resourceVersion read (a merge patch replaces the list whole), so a
finalizer another controller adds meanwhile is kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from carpool import labels
from carpool.api.k8s import Node
from carpool.karpenter_objects import (
    NODECLAIM,
    TERMINATION_FINALIZER,
    KarpenterObjects,
    KindNotServed,
    ObjectConflict,
    ObjectGone,
)
from carpool.ports import Cluster, NodeGone, NodePatch

_ATTEMPTS = 3


@dataclass(frozen=True)
class Released:
    """One object whose finalizer was (or, in a dry run, would be) removed."""

    #: `node` or `nodeclaim` (as kubectl names them: `node/<name>`)
    kind: str
    name: str
    #: it is being deleted: it goes once its finalizer does
    deleting: bool

    def __str__(self) -> str:
        tail = " (being deleted: it goes now)" if self.deleting else ""
        return f"{self.kind}/{self.name}: finalizer {TERMINATION_FINALIZER} removed{tail}"


def release_finalizers(cluster: Cluster, karpenter: KarpenterObjects | None, cluster_name: str, *,
                       dry_run: bool = False) -> list[Released]:
    """Remove carpool's termination finalizer from its Nodes and NodeClaims for `cluster_name` (module
    docstring); with `dry_run`, only say which. NodeClaims are skipped when the cluster does not serve them
    (Karpenter's CRDs not installed) or `karpenter` is None."""
    out = [Released("node", n.name, n.metadata.deletion_timestamp is not None)
           for n in _held_nodes(cluster.list_nodes(), cluster_name)]
    if not dry_run:
        for released in out:
            try:
                cluster.patch_node(released.name, NodePatch(remove_finalizers=frozenset({TERMINATION_FINALIZER})))
            except NodeGone:
                continue
    for obj in _held_nodeclaims(karpenter, cluster_name):
        meta = obj["metadata"]
        out.append(Released("nodeclaim", meta["name"], bool(meta.get("deletionTimestamp"))))
        if not dry_run and karpenter is not None:
            _remove(karpenter, meta["name"])
    return out


def _held_nodes(nodes: Iterable[Node], cluster_name: str) -> list[Node]:
    return sorted((n for n in nodes if n.labels.get(labels.OWNED_BY) == cluster_name
                   and TERMINATION_FINALIZER in n.metadata.finalizers), key=lambda n: n.name)


def _held_nodeclaims(karpenter: KarpenterObjects | None, cluster_name: str) -> list[dict[str, Any]]:
    if karpenter is None:
        return []
    try:
        items = karpenter.list_objects(NODECLAIM).items
    except KindNotServed:
        return []
    return [o for o in items if ((o.get("metadata") or {}).get("labels") or {}).get(labels.OWNED_BY) == cluster_name
            and TERMINATION_FINALIZER in ((o.get("metadata") or {}).get("finalizers") or [])]


def _remove(karpenter: KarpenterObjects, name: str) -> None:
    """The finalizer off one NodeClaim, under the resourceVersion read; read again after a conflict."""
    for _ in range(_ATTEMPTS):
        obj = karpenter.get_object(NODECLAIM, name)
        if obj is None:
            return
        meta = obj.get("metadata") or {}
        kept = [f for f in meta.get("finalizers") or [] if f != TERMINATION_FINALIZER]
        try:
            karpenter.patch_object(NODECLAIM, name, {"metadata": {"finalizers": kept}},
                                   resource_version=meta.get("resourceVersion"))
            return
        except ObjectConflict:
            continue
        except ObjectGone:
            return
    raise ObjectConflict(NODECLAIM, name, f"changed on each of {_ATTEMPTS} attempts to remove its finalizer")
