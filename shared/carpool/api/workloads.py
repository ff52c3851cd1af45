"""Workloads (Deployment, ReplicaSet, StatefulSet, Job) expanded into the pods their controllers create.

carpool plans for pods, but users describe what they run as workloads. For `carpool plan`/`simulate`
each workload becomes its pods: deterministic names (`<name>-<index>`), stable uids derived from the
names (so two runs over the same YAML produce identical plans), an owner reference to the workload, the
namespace defaulting to "default", and status PodScheduled=False/Unschedulable - i.e. exactly what the
kube-scheduler leaves behind when no node fits, so the pods count as pending.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any, Literal

from pydantic import ConfigDict, Field

from carpool.api.base import KubeModel
from carpool.api.k8s import (
    Pod,
    PodStamper,
    PodStatus,
    PodTemplateSpec,
)
from carpool.api.meta import DEFAULT_NAMESPACE, NamedObjectMeta, OwnerReference
from carpool.api.selectors import LabelSelector

__all__ = [
    "WORKLOAD_KINDS",
    "Deployment",
    "DeploymentSpec",
    "Job",
    "JobSpec",
    "ReplicaSet",
    "ReplicaSetSpec",
    "StatefulSet",
    "StatefulSetSpec",
    "Workload",
    "as_pending",
    "expand",
    "pending_status",
    "stable_uid",
]

_UID_NAMESPACE = uuid.UUID("6f1d8f7e-2c1b-4a53-9a57-6361727030ff")  # fixed: uids must not change between runs
PENDING_MESSAGE = "0/0 nodes are available (carpool: loaded from a manifest, not yet scheduled)"


_UID_PREFIX = _UID_NAMESPACE.bytes


def stable_uid(kind: str, namespace: str, name: str) -> str:
    """A uid that is the same every time for the same object (uuid5 of kind/namespace/name).

    RFC 9562 section 5.5 computed directly (`uuid.uuid5` builds a `UUID` object per call, which shows
    in a 10,000-replica expansion): the first 16 bytes of SHA-1(namespace + name), version 5, variant
    10."""
    digest = bytearray(hashlib.sha1(_UID_PREFIX + f"{kind}/{namespace}/{name}".encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50
    digest[8] = (digest[8] & 0x3F) | 0x80
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def as_pending(pod: Pod, message: str = PENDING_MESSAGE) -> Pod:
    """Mark `pod` as the kube-scheduler marks a pod no node can take (in place; returned for chaining)."""
    pod.status = PodStatus.model_validate(pending_status(message))
    return pod


def pending_status(message: str = PENDING_MESSAGE) -> dict[str, Any]:
    """The status `as_pending` gives a pod, as JSON."""
    return {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}],
    }


class _WorkloadSpec(KubeModel):
    """A workload's spec, as strict as the API server's field validation: a field Kubernetes does not
    declare (`replica: 20` for `replicas`) is refused with its path instead of silently running one pod.
    The fields carpool does not read are declared as `Any` and left alone, so `kubectl get -o yaml`
    output still loads."""

    model_config = ConfigDict(extra="forbid")

    selector: LabelSelector | None = None
    template: PodTemplateSpec = Field(default_factory=PodTemplateSpec)


class _ReplicatedSpec(_WorkloadSpec):
    replicas: int = Field(default=1, ge=0)
    min_ready_seconds: Any = None


class DeploymentSpec(_ReplicatedSpec):
    """apps/v1 DeploymentSpec."""

    strategy: Any = None
    revision_history_limit: Any = None
    paused: Any = None
    progress_deadline_seconds: Any = None


class ReplicaSetSpec(_ReplicatedSpec):
    """apps/v1 ReplicaSetSpec."""


class StatefulSetSpec(_ReplicatedSpec):
    """apps/v1 StatefulSetSpec."""

    service_name: Any = None
    volume_claim_templates: Any = None
    pod_management_policy: Any = None
    update_strategy: Any = None
    revision_history_limit: Any = None
    persistent_volume_claim_retention_policy: Any = None
    ordinals: Any = None


class JobSpec(_WorkloadSpec):
    """batch/v1 JobSpec."""

    parallelism: int = Field(default=1, ge=0)
    completions: int | None = Field(default=None, ge=0)
    active_deadline_seconds: Any = None
    pod_failure_policy: Any = None
    success_policy: Any = None
    backoff_limit: Any = None
    backoff_limit_per_index: Any = None
    max_failed_indexes: Any = None
    manual_selector: Any = None
    ttl_seconds_after_finished: Any = None
    completion_mode: Any = None
    suspend: Any = None
    pod_replacement_policy: Any = None
    managed_by: Any = None


class _Workload(KubeModel):
    """The object around the spec: its top-level fields are strict too (a `sepc:` would be an empty
    workload); the status the API server writes is read and ignored."""

    model_config = ConfigDict(extra="forbid")

    api_version: str
    kind: str
    metadata: NamedObjectMeta
    status: Any = None

    @property
    def name(self) -> str:
        return self.metadata.name

    def replicas(self) -> int:
        """How many pods the controller keeps running."""
        raise NotImplementedError

    def template(self) -> PodTemplateSpec:
        raise NotImplementedError

    def pods(self) -> list[Pod]:
        """The pods the controller would create right now, all pending."""
        template = self.template()
        namespace = self.metadata.namespace or template.metadata.namespace or DEFAULT_NAMESPACE
        owner = OwnerReference(
            api_version=self.api_version,
            kind=self.kind,
            name=self.name,
            uid=self.metadata.uid or stable_uid(self.kind, namespace, self.name),
            controller=True,
            block_owner_deletion=True,
        )
        names = [f"{self.name}-{i}" for i in range(self.replicas())]
        return PodStamper(template).stamp_many(
            [(name, stable_uid("Pod", namespace, name)) for name in names],
            namespace=namespace, owner=owner, status=pending_status(),
        )


class _Replicated(_Workload):
    spec: _ReplicatedSpec = Field(default_factory=ReplicaSetSpec)

    def replicas(self) -> int:
        return self.spec.replicas

    def template(self) -> PodTemplateSpec:
        return self.spec.template


class Deployment(_Replicated):
    api_version: Literal["apps/v1"] = "apps/v1"
    kind: Literal["Deployment"] = "Deployment"
    spec: DeploymentSpec = Field(default_factory=DeploymentSpec)


class ReplicaSet(_Replicated):
    api_version: Literal["apps/v1"] = "apps/v1"
    kind: Literal["ReplicaSet"] = "ReplicaSet"
    spec: ReplicaSetSpec = Field(default_factory=ReplicaSetSpec)


class StatefulSet(_Replicated):
    """StatefulSet pods really are named `<name>-<ordinal>`."""

    api_version: Literal["apps/v1"] = "apps/v1"
    kind: Literal["StatefulSet"] = "StatefulSet"
    spec: StatefulSetSpec = Field(default_factory=StatefulSetSpec)


class Job(_Workload):
    """A Job runs `parallelism` pods at once, never more than `completions` (when set)."""

    api_version: Literal["batch/v1"] = "batch/v1"
    kind: Literal["Job"] = "Job"
    spec: JobSpec = Field(default_factory=JobSpec)

    def replicas(self) -> int:
        if self.spec.completions is None:
            return self.spec.parallelism
        return min(self.spec.parallelism, self.spec.completions)

    def template(self) -> PodTemplateSpec:
        return self.spec.template


Workload = Deployment | ReplicaSet | StatefulSet | Job

#: (apiVersion, kind) -> model, for the loader's dispatch.
WORKLOAD_KINDS: dict[tuple[str, str], type[_Workload]] = {
    ("apps/v1", "Deployment"): Deployment,
    ("apps/v1", "ReplicaSet"): ReplicaSet,
    ("apps/v1", "StatefulSet"): StatefulSet,
    ("batch/v1", "Job"): Job,
}


def expand(workload: Workload) -> list[Pod]:
    """The pending pods of any workload."""
    return workload.pods()
