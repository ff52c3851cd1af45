"""Workloads (Deployment, ReplicaSet, StatefulSet, Job) expanded into the pods their controllers create.

carpool plans for pods, but users describe what they run as workloads. For `carpool plan`/`simulate`
each workload becomes its pods: deterministic names (`<name>-<index>`), stable uids derived from the
names (so two runs over the same YAML produce identical plans), an owner reference to the workload, the
namespace defaulting to "default", and status PodScheduled=False/Unschedulable - i.e. exactly what the
kube-scheduler leaves behind when no node fits, so the pods count as pending.
"""

from __future__ import annotations

import uuid
from typing import Literal

from pydantic import Field

from carpool.api.base import KubeModel
from carpool.api.k8s import (
    Pod,
    PodCondition,
    PodStamper,
    PodStatus,
    PodTemplateSpec,
)
from carpool.api.meta import DEFAULT_NAMESPACE, NamedObjectMeta, OwnerReference
from carpool.api.selectors import LabelSelector

__all__ = [
    "WORKLOAD_KINDS",
    "Deployment",
    "Job",
    "ReplicaSet",
    "StatefulSet",
    "Workload",
    "as_pending",
    "expand",
    "stable_uid",
]

_UID_NAMESPACE = uuid.UUID("6f1d8f7e-2c1b-4a53-9a57-6361727030ff")  # fixed: uids must not change between runs
PENDING_MESSAGE = "0/0 nodes are available (carpool: loaded from a manifest, not yet scheduled)"


def stable_uid(kind: str, namespace: str, name: str) -> str:
    """A uid that is the same every time for the same object (uuid5 of kind/namespace/name)."""
    return str(uuid.uuid5(_UID_NAMESPACE, f"{kind}/{namespace}/{name}"))


def as_pending(pod: Pod, message: str = PENDING_MESSAGE) -> Pod:
    """Mark `pod` as the kube-scheduler marks a pod no node can take (in place; returned for chaining)."""
    pod.status = PodStatus(
        phase="Pending",
        conditions=[
            PodCondition(type="PodScheduled", status="False", reason="Unschedulable", message=message)
        ],
    )
    return pod


class _ReplicatedSpec(KubeModel):
    replicas: int = Field(default=1, ge=0)
    selector: LabelSelector | None = None
    template: PodTemplateSpec = Field(default_factory=PodTemplateSpec)


class JobSpec(KubeModel):
    parallelism: int = Field(default=1, ge=0)
    completions: int | None = Field(default=None, ge=0)
    selector: LabelSelector | None = None
    template: PodTemplateSpec = Field(default_factory=PodTemplateSpec)


class _Workload(KubeModel):
    api_version: str
    kind: str
    metadata: NamedObjectMeta

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
        stamper = PodStamper(template)
        out = []
        for i in range(self.replicas()):
            name = f"{self.name}-{i}"
            pod = stamper.stamp(
                name=name, namespace=namespace, owner=owner, uid=stable_uid("Pod", namespace, name)
            )
            out.append(as_pending(pod))
        return out


class _Replicated(_Workload):
    spec: _ReplicatedSpec = Field(default_factory=_ReplicatedSpec)

    def replicas(self) -> int:
        return self.spec.replicas

    def template(self) -> PodTemplateSpec:
        return self.spec.template


class Deployment(_Replicated):
    api_version: Literal["apps/v1"] = "apps/v1"
    kind: Literal["Deployment"] = "Deployment"


class ReplicaSet(_Replicated):
    api_version: Literal["apps/v1"] = "apps/v1"
    kind: Literal["ReplicaSet"] = "ReplicaSet"


class StatefulSet(_Replicated):
    """StatefulSet pods really are named `<name>-<ordinal>`."""

    api_version: Literal["apps/v1"] = "apps/v1"
    kind: Literal["StatefulSet"] = "StatefulSet"


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
