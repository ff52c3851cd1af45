"""A cluster Karpenter built, as it leaves it when its controller is scaled to zero: for each node a NodeClaim,
an EC2 instance tagged as Karpenter tags it, and the Node that joined from it.

What each one holds follows Karpenter v1.14.1 and its AWS provider:
- the NodeClaim (`pkg/apis/v1/nodeclaim.go`; created by `pkg/controllers/provisioning/scheduling/nodeclaim.go`
  from the NodePool's template, so `spec.expireAfter` and the `karpenter.sh/nodepool-hash` annotations are
  the pool's of that moment): labels `karpenter.sh/nodepool`, the instance's type, zone and capacity type
  (`lifecycle/launch.go` `PopulateNodeClaimDetails`), owner reference to its NodePool, the termination
  finalizer, and the status `lifecycle` wrote: providerID, imageID, nodeName, capacity, allocatable,
  conditions Launched, Registered, Initialized and Ready;
- the instance's tags (the AWS provider's `pkg/utils/utils.go` `GetTags` at launch: `kubernetes.io/cluster/
  <name>: owned`, `karpenter.sh/nodepool`, `eks:eks-cluster-name`, `karpenter.k8s.aws/ec2nodeclass`, then
  `pkg/controllers/nodeclaim/tagging/controller.go`: `Name`, `karpenter.sh/nodeclaim`), never carpool's;
- the Node as `lifecycle/registration.go` leaves it: the NodeClaim's labels synced onto it,
  `karpenter.sh/registered` and (`initialization.go`) `karpenter.sh/initialized`, the termination finalizer,
  owned by its NodeClaim, `karpenter.sh/unregistered` gone.
Builders of JSON only: the run (`carpool.sim.run.karpenter_cluster`) puts them into local EC2 and the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from carpool import labels as L
from carpool.karpenter_objects import NODECLAIM, NODEPOOL, TERMINATION_FINALIZER

__all__ = ["EKS_CLUSTER_NAME_TAG", "NAME_TAG", "hash_annotations", "instance_tags", "karpenter_node", "nodeclaim",
           "nodeclaim_status"]

#: the AWS provider's `v1.EKSClusterNameTagKey` and `v1.NameTagKey`
EKS_CLUSTER_NAME_TAG: Final = "eks:eks-cluster-name"
NAME_TAG: Final = "Name"
_NODEPOOL_HASH_VERSION: Final = "v3"  # Karpenter v1.14.1 `v1.NodePoolHashVersion`
_NODECLASS_HASH_VERSION: Final = "v5"  # the AWS provider's v1.14.1 `v1.EC2NodeClassHashVersion`


def _time(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _labels(pool: str, nodeclass: str, instance_type: str, zone: str, capacity_type: str) -> dict[str, str]:
    return {L.NODEPOOL: pool, L.EC2NODECLASS: nodeclass, L.INSTANCE_TYPE: instance_type, L.ZONE: zone,
            L.CAPACITY_TYPE: capacity_type}


def nodeclaim(name: str, pool: Mapping[str, Any], instance_type: str, zone: str, capacity_type: str,
              hashes: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The NodeClaim Karpenter created from NodePool `pool` (its object, with its uid) for an instance of
    this type, zone and capacity type; `hashes` are the pool's and its class's hash annotations then."""
    template = (pool.get("spec") or {}).get("template") or {}
    spec = template.get("spec") or {}
    meta = pool.get("metadata") or {}
    ref = spec.get("nodeClassRef") or {}
    annotations = {k: v for k, v in (hashes or {}).items()}
    annotations.update((template.get("metadata") or {}).get("annotations") or {})
    claim_spec: dict[str, Any] = {
        "nodeClassRef": dict(ref),
        "requirements": [dict(r) for r in spec.get("requirements") or []],
        "resources": {"requests": {"cpu": "100m", "pods": "1"}},
        "expireAfter": spec.get("expireAfter", "720h"),
    }
    for key in ("taints", "startupTaints", "terminationGracePeriod"):
        if spec.get(key):
            claim_spec[key] = spec[key]
    return {
        "apiVersion": NODECLAIM.api_version, "kind": NODECLAIM.kind,
        "metadata": {
            "name": name,
            "labels": {**((template.get("metadata") or {}).get("labels") or {}),
                       **_labels(str(meta.get("name")), str(ref.get("name")), instance_type, zone, capacity_type)},
            "annotations": annotations,
            "finalizers": [TERMINATION_FINALIZER],
            "ownerReferences": [{"apiVersion": NODEPOOL.api_version, "kind": NODEPOOL.kind, "name": meta.get("name"),
                                 "uid": meta.get("uid", ""), "blockOwnerDeletion": True}],
        },
        "spec": claim_spec,
    }


def nodeclaim_status(instance_id: str, zone: str, image_id: str, node_name: str, capacity: Mapping[str, str],
                     allocatable: Mapping[str, str], at: datetime) -> dict[str, Any]:
    """The status `lifecycle` wrote once the node joined and initialized."""
    conditions = [{"type": kind, "status": "True", "reason": kind, "message": "", "lastTransitionTime": _time(at),
                   "observedGeneration": 1} for kind in ("Launched", "Registered", "Initialized", "Ready")]
    return {"providerID": f"aws:///{zone}/{instance_id}", "imageID": image_id, "nodeName": node_name,
            "capacity": dict(capacity), "allocatable": dict(allocatable), "conditions": conditions}


def instance_tags(cluster: str, pool: str, nodeclass: str, claim: str, node_name: str,
                  extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The tags Karpenter's instance carries: its EC2NodeClass's `spec.tags`, then its own."""
    return {**dict(extra or {}), L.TAG_CLUSTER_OWNED.format(cluster=cluster): "owned", L.TAG_NODEPOOL: pool,
            EKS_CLUSTER_NAME_TAG: cluster, L.TAG_NODECLASS: nodeclass, NAME_TAG: node_name, L.TAG_NODECLAIM: claim}


def karpenter_node(node: Mapping[str, Any], claim: Mapping[str, Any]) -> dict[str, Any]:
    """`node` (a joined, Ready Node) as Karpenter's registration and initialization leave it."""
    out = {**node, "metadata": dict(node.get("metadata") or {})}
    meta = out["metadata"]
    claim_meta = claim.get("metadata") or {}
    meta["labels"] = {**(meta.get("labels") or {}), **(claim_meta.get("labels") or {}),
                      L.REGISTERED: "true", L.NODE_INITIALIZED: "true"}
    meta["finalizers"] = [TERMINATION_FINALIZER]
    meta["ownerReferences"] = [{"apiVersion": NODECLAIM.api_version, "kind": NODECLAIM.kind,
                                "name": claim_meta.get("name"), "uid": claim_meta.get("uid", ""),
                                "blockOwnerDeletion": True}]
    return out


def hash_annotations(nodepool_hash: str, nodeclass_hash: str) -> dict[str, str]:
    """Karpenter's hash annotations (the same on a NodePool or EC2NodeClass and on its NodeClaims)."""
    return {"karpenter.sh/nodepool-hash": nodepool_hash, "karpenter.sh/nodepool-hash-version": _NODEPOOL_HASH_VERSION,
            "karpenter.k8s.aws/ec2nodeclass-hash": nodeclass_hash,
            "karpenter.k8s.aws/ec2nodeclass-hash-version": _NODECLASS_HASH_VERSION}
