"""The storage objects that pin a pod to a zone: StorageClass, PersistentVolume, PersistentVolumeClaim.

A pod's zonal volume decides where its node may be: a bound volume lives in one zone (its PV's
`nodeAffinity`), and a volume still to be provisioned with `volumeBindingMode: WaitForFirstConsumer` may be
created only where its StorageClass's `allowedTopologies` allow. Only the fields that decide that (and the
validity checks Karpenter and the kube-scheduler apply) are modelled; everything else is ignored.
Defaults are the API server's, because carpool reads objects as the cluster would hold them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from carpool.api.base import KubeModel
from carpool.api.meta import Named, Namespaced, ObjectMeta
from carpool.api.selectors import NodeSelector

__all__ = [
    "BIND_COMPLETED_ANNOTATION",
    "DEFAULT_CLASS_ANNOTATION",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "StorageClass",
]

#: set by the PV controller once a claim and its volume are bound; without it the scheduler treats a claim
#: naming a volume as still unbound
BIND_COMPLETED_ANNOTATION = "pv.kubernetes.io/bind-completed"
#: marks the class the DefaultStorageClass admission plugin gives claims created without `storageClassName`
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"


class TopologySelectorRequirement(KubeModel):
    key: str = Field(min_length=1)
    values: list[str] = Field(min_length=1)


class TopologySelectorTerm(KubeModel):
    match_label_expressions: list[TopologySelectorRequirement] = Field(default_factory=list)


class StorageClass(Named, KubeModel):
    """storage.k8s.io/v1 StorageClass (cluster-scoped). The API server defaults `volumeBindingMode` to
    Immediate: the volume is provisioned before any pod uses it, so a pending claim of such a class cannot
    guide where a node goes."""

    api_version: str = "storage.k8s.io/v1"
    kind: str = "StorageClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    provisioner: str = ""
    volume_binding_mode: Literal["Immediate", "WaitForFirstConsumer"] = "Immediate"
    allowed_topologies: list[TopologySelectorTerm] = Field(default_factory=list)


    def is_default(self) -> bool:
        return self.metadata.annotations.get(DEFAULT_CLASS_ANNOTATION) == "true"


class VolumeNodeAffinity(KubeModel):
    required: NodeSelector | None = None


class PersistentVolumeSpec(KubeModel):
    storage_class_name: str | None = None
    node_affinity: VolumeNodeAffinity | None = None
    #: presence only: local and hostPath volumes are tied to one node's hostname
    local: dict[str, object] | None = None
    host_path: dict[str, object] | None = None


class PersistentVolume(Named, KubeModel):
    """v1 PersistentVolume (cluster-scoped)."""

    api_version: str = "v1"
    kind: str = "PersistentVolume"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PersistentVolumeSpec = Field(default_factory=PersistentVolumeSpec)


    def is_node_local(self) -> bool:
        return self.spec.local is not None or self.spec.host_path is not None


class PersistentVolumeClaimSpec(KubeModel):
    #: None (unset) and "" differ: admission gives an unset claim the default class, "" asks for none
    storage_class_name: str | None = None
    volume_name: str | None = None


class PersistentVolumeClaimStatus(KubeModel):
    phase: str | None = None


class PersistentVolumeClaim(Namespaced, KubeModel):
    """v1 PersistentVolumeClaim (namespaced)."""

    api_version: str = "v1"
    kind: str = "PersistentVolumeClaim"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PersistentVolumeClaimSpec = Field(default_factory=PersistentVolumeClaimSpec)
    status: PersistentVolumeClaimStatus = Field(default_factory=PersistentVolumeClaimStatus)

