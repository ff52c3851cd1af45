"""The Kubernetes objects the autoscaler reads: Pod (and its scheduling parts), Node, DaemonSet, PDB.

Only the fields carpool decides on are modelled; everything else is ignored (`extra="ignore"`), so real
objects from the API server, `kubectl get -o yaml` output and hand-written test pods all load.
Quantities stay as written; `Pod.requests()`, `Node.allocatable()` and friends convert them into
`carpool.resources.Resources` (cpu in millicores, memory in bytes) when asked.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from datetime import datetime
from functools import cache
from typing import Any, Literal

from pydantic import Field, TypeAdapter, model_validator

from carpool import resources
from carpool import taints as domain
from carpool.api.base import KubeModel
from carpool.api.fields import IntOrPercent, ResourceList, scaled_int_or_percent
from carpool.api.meta import Named, Namespaced, ObjectMeta, OwnerReference
from carpool.api.selectors import LabelSelector, NodeSelector, NodeSelectorTerm
from carpool.api.taints import Taint, Toleration
from carpool.resources import Resources

__all__ = [
    "Affinity",
    "Container",
    "ContainerPort",
    "DaemonSet",
    "Node",
    "NodeAffinity",
    "Pod",
    "PodAffinity",
    "PodAffinityTerm",
    "PodCondition",
    "PodDisruptionBudget",
    "PodSpec",
    "PodStatus",
    "PodStamper",
    "PodTemplateSpec",
    "PreferredSchedulingTerm",
    "ResourceRequirements",
    "TopologySpreadConstraint",
    "Volume",
    "WeightedPodAffinityTerm",
    "pod_from_template",
]

SIDECAR_RESTART_POLICY = "Always"
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


# --- containers and resources -----------------------------------------------------------------------
class ResourceRequirements(KubeModel):
    """Container `resources`. As the API server does, a limit with no request sets the request."""

    requests: ResourceList = Field(default_factory=dict)
    limits: ResourceList = Field(default_factory=dict)

    @model_validator(mode="after")
    def _requests_default_to_limits(self) -> ResourceRequirements:
        if not self.limits:  # most containers: nothing to default
            return self
        missing = {k: v for k, v in self.limits.items() if k not in self.requests}
        if missing:
            self.requests = {**self.requests, **missing}
        return self

    def parsed_requests(self) -> Resources:
        return resources.parse(self.requests)


class ContainerPort(KubeModel):
    container_port: int | None = None
    host_port: int | None = Field(default=None, ge=0, le=65535)
    host_ip: str | None = Field(default=None, alias="hostIP")
    protocol: str = "TCP"
    name: str | None = None


class Container(KubeModel):
    """A container or init container. `restartPolicy: Always` on an init container makes it a sidecar."""

    name: str = ""
    image: str | None = None
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    ports: list[ContainerPort] = Field(default_factory=list)
    restart_policy: str | None = None

    def is_sidecar(self) -> bool:
        return self.restart_policy == SIDECAR_RESTART_POLICY


# --- affinity -----------------------------------------------------------------------------------------
class PreferredSchedulingTerm(KubeModel):
    weight: int = Field(ge=1, le=100)
    preference: NodeSelectorTerm


class NodeAffinity(KubeModel):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = Field(
        default_factory=list
    )

    @property
    def required(self) -> list[NodeSelectorTerm]:
        """The ORed required terms (empty when there is no required node affinity)."""
        sel = self.required_during_scheduling_ignored_during_execution
        return sel.node_selector_terms if sel is not None else []

    @property
    def preferred(self) -> list[PreferredSchedulingTerm]:
        return self.preferred_during_scheduling_ignored_during_execution


class PodAffinityTerm(KubeModel):
    """Pods matching `labelSelector` (in `namespaces`, default the pod's own) share/avoid a topology domain."""

    label_selector: LabelSelector | None = None
    namespaces: list[str] = Field(default_factory=list)
    namespace_selector: LabelSelector | None = None
    topology_key: str = Field(min_length=1)
    match_label_keys: list[str] = Field(default_factory=list)
    mismatch_label_keys: list[str] = Field(default_factory=list)

    def selects(self, pod: Pod, owner_namespace: str) -> bool:
        """Whether `pod` is one of the pods this term is about (seen from a pod in `owner_namespace`).

        A `namespaceSelector` needs Namespace labels, which carpool does not load: an empty one means
        "all namespaces", any other is treated as "the listed namespaces / own namespace".
        """
        if self.label_selector is None:
            return False
        if self.namespace_selector is not None and self.namespace_selector.is_empty():
            in_scope = True
        else:
            in_scope = pod.namespace in (self.namespaces or [owner_namespace])
        return in_scope and self.label_selector.matches(pod.labels)


class WeightedPodAffinityTerm(KubeModel):
    weight: int = Field(ge=1, le=100)
    pod_affinity_term: PodAffinityTerm


class PodAffinity(KubeModel):
    """Used for both `podAffinity` and `podAntiAffinity` (same shape)."""

    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = Field(default_factory=list)
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] = Field(
        default_factory=list
    )

    @property
    def required(self) -> list[PodAffinityTerm]:
        return self.required_during_scheduling_ignored_during_execution

    @property
    def preferred(self) -> list[WeightedPodAffinityTerm]:
        return self.preferred_during_scheduling_ignored_during_execution


class Affinity(KubeModel):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class TopologySpreadConstraint(KubeModel):
    max_skew: int = Field(ge=1)
    topology_key: str = Field(min_length=1)
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"]
    label_selector: LabelSelector | None = None
    min_domains: int | None = Field(default=None, ge=1)
    node_affinity_policy: Literal["Honor", "Ignore"] | None = None
    node_taints_policy: Literal["Honor", "Ignore"] | None = None
    match_label_keys: list[str] = Field(default_factory=list)


# --- volumes ------------------------------------------------------------------------------------------
class PersistentVolumeClaimVolumeSource(KubeModel):
    claim_name: str = Field(min_length=1)
    read_only: bool = False


class Volume(KubeModel):
    """A pod volume. Only the kinds backed by a PersistentVolumeClaim matter for placement: a named claim,
    or a generic ephemeral volume, whose claim the ephemeral-volume controller names `<pod>-<volume>`."""

    name: str = ""
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None
    #: presence only (its claim template's fields do not decide placement)
    ephemeral: dict[str, Any] | None = None

    def claim_name(self, pod_name: str) -> str | None:
        """The PersistentVolumeClaim this volume mounts, or None for volumes without one (emptyDir...)."""
        if self.persistent_volume_claim is not None:
            return self.persistent_volume_claim.claim_name
        if self.ephemeral is not None:
            return f"{pod_name}-{self.name}"
        return None


# --- pod ----------------------------------------------------------------------------------------------
class PodSpec(KubeModel):
    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] = Field(default_factory=list)
    overhead: ResourceList = Field(default_factory=dict)
    node_selector: dict[str, str] = Field(default_factory=dict)
    affinity: Affinity | None = None
    tolerations: list[Toleration] = Field(default_factory=list)
    topology_spread_constraints: list[TopologySpreadConstraint] = Field(default_factory=list)
    node_name: str | None = None
    priority: int | None = None
    priority_class_name: str | None = None
    preemption_policy: str | None = None
    scheduler_name: str | None = None
    restart_policy: str | None = None
    termination_grace_period_seconds: int | None = None
    volumes: list[Volume] = Field(default_factory=list)


class PodCondition(KubeModel):
    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_transition_time: datetime | None = None
    last_probe_time: datetime | None = None


class PodStatus(KubeModel):
    phase: str | None = None
    conditions: list[PodCondition] = Field(default_factory=list)
    nominated_node_name: str | None = None
    start_time: datetime | None = None


class Pod(Namespaced, KubeModel):
    """A pod as the scheduler sees it."""

    api_version: str = "v1"
    kind: str = "Pod"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus = Field(default_factory=PodStatus)

    # -- identity -----------------------------------------------------------------------------------

    @property
    def key(self) -> str:
        """ "namespace/name", unique in a cluster (and what `kubectl` prints)."""
        return f"{self.namespace}/{self.name}"

    @property
    def labels(self) -> dict[str, str]:
        return self.metadata.labels

    @property
    def annotations(self) -> dict[str, str]:
        return self.metadata.annotations

    # -- resources ----------------------------------------------------------------------------------
    def requests(self) -> Resources:
        """The pod's effective request, computed as the kube-scheduler does (sidecar-aware).

        Regular containers run together with every sidecar (init container with `restartPolicy:
        Always`); each regular init container runs alone with the sidecars started before it. The pod
        needs the larger of the two phases, plus `overhead` (RuntimeClass), plus one pod slot.
        """
        spec = self.spec
        if not spec.init_containers and not spec.overhead:  # most pods: the sum of their containers
            containers = spec.containers
            total = (containers[0].resources.parsed_requests() if len(containers) == 1
                     else resources.add(*(c.resources.parsed_requests() for c in containers)))
            total[resources.PODS] = 1
            return total
        running = resources.add(*(c.resources.parsed_requests() for c in self.spec.containers))
        sidecars: Resources = {}
        init_peak: Resources = {}
        for c in self.spec.init_containers:
            request = c.resources.parsed_requests()
            if c.is_sidecar():
                sidecars = resources.add(sidecars, request)
                running = resources.add(running, request)
                phase = sidecars
            else:
                phase = resources.add(request, sidecars)
            init_peak = resources.maximum(init_peak, phase)
        total = resources.add(resources.maximum(running, init_peak), resources.parse(self.spec.overhead))
        total[resources.PODS] = 1
        return total

    # -- scheduling state ---------------------------------------------------------------------------
    def condition(self, condition_type: str) -> PodCondition | None:
        return next((c for c in self.status.conditions if c.type == condition_type), None)

    def is_unschedulable(self) -> bool:
        """The kube-scheduler tried and found no node (PodScheduled=False, reason Unschedulable)."""
        cond = self.condition("PodScheduled")
        return cond is not None and cond.status == "False" and cond.reason == "Unschedulable"

    def is_daemonset_pod(self) -> bool:
        return self.metadata.owned_by_kind("DaemonSet")

    def is_static_pod(self) -> bool:
        """A mirror of a static pod: owned by its Node, never rescheduled elsewhere."""
        return self.metadata.owned_by_kind("Node")

    def is_terminal(self) -> bool:
        return self.status.phase in TERMINAL_PHASES

    def is_terminating(self) -> bool:
        return self.metadata.deletion_timestamp is not None

    def is_provisionable(self) -> bool:
        """Whether new capacity could help this pod (Karpenter's rule, see reference.md section 2).

        The scheduler marked it Unschedulable; it is neither bound (`nodeName`) nor waiting for a
        preemption (`nominatedNodeName`); it is not a DaemonSet or static pod (those follow nodes, they
        do not ask for them); and it is not finished or being deleted.
        """
        return (
            self.is_unschedulable()
            and not self.spec.node_name
            and not self.status.nominated_node_name
            and not self.is_daemonset_pod()
            and not self.is_static_pod()
            and not self.is_terminal()
            and not self.is_terminating()
        )

    def tolerations(self) -> list[domain.Toleration]:
        return [t.to_domain() for t in self.spec.tolerations]

    def host_ports(self) -> list[tuple[str, str, int]]:
        """(hostIP, protocol, hostPort) of every port the pod claims on its node (regular and sidecars)."""
        out = []
        for c in self._long_running_containers():
            for p in c.ports:
                if p.host_port:
                    out.append((p.host_ip or "0.0.0.0", p.protocol or "TCP", p.host_port))
        return out

    def _long_running_containers(self) -> Iterable[Container]:
        yield from self.spec.containers
        yield from (c for c in self.spec.init_containers if c.is_sidecar())


class PodTemplateSpec(KubeModel):
    """`spec.template` of DaemonSets and workloads."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSpec = Field(default_factory=PodSpec)


class PodStamper:
    """Stamps pods out of one template, as its controller would create them.

    The template is serialised once and each pod is validated from that data, so every pod owns its
    spec (binding one never touches another) at a fraction of the cost of deep-copying models: a
    20,000-replica Deployment is a realistic `carpool simulate` input.
    """

    def __init__(self, template: PodTemplateSpec) -> None:
        self._metadata = template.metadata.model_dump(by_alias=True, exclude_none=True)
        self._spec = template.spec.model_dump(by_alias=True, exclude_none=True)

    def stamp(
        self, *, name: str, namespace: str, owner: OwnerReference | None, uid: str | None = None
    ) -> Pod:
        metadata = {
            **self._metadata,
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "ownerReferences": [owner.model_dump(by_alias=True, exclude_none=True)]
            if owner is not None
            else [],
        }
        return Pod.model_validate({"metadata": metadata, "spec": self._pod_spec()})

    def _pod_spec(self) -> dict[str, Any]:
        """The spec data of one pod. Validation builds every pod's containers anew, but keeps a value of
        type `Any` as given: a generic ephemeral volume's claim template gets its own copy per pod."""
        volumes = self._spec.get("volumes")
        if volumes and any("ephemeral" in v for v in volumes):
            return {**self._spec, "volumes": copy.deepcopy(volumes)}
        return self._spec

    def stamp_many(
        self,
        names: Iterable[tuple[str, str | None]],
        *,
        namespace: str,
        owner: OwnerReference | None,
        status: dict[str, Any] | None = None,
    ) -> list[Pod]:
        """`stamp` for many (name, uid) pairs of one owner, with `status` (JSON) as each pod's status.

        All pods are validated in one call, the owner reference dumped once: per pod, only the
        validation remains (a 10,000-replica Deployment would otherwise pay the per-call costs 10,000
        times)."""
        owners = [owner.model_dump(by_alias=True, exclude_none=True)] if owner is not None else []
        extra = {"status": status} if status is not None else {}
        docs = [
            {
                "metadata": {**self._metadata, "name": name, "namespace": namespace, "uid": uid,
                             "ownerReferences": list(owners)},
                "spec": self._pod_spec(),
                **extra,
            }
            for name, uid in names
        ]
        return _pod_list().validate_python(docs)


@cache
def _pod_list() -> TypeAdapter[list[Pod]]:
    """Built on first use, like every model's validator (`defer_build`)."""
    return TypeAdapter(list[Pod])


def pod_from_template(
    template: PodTemplateSpec,
    *,
    name: str,
    namespace: str,
    owner: OwnerReference | None,
    uid: str | None = None,
) -> Pod:
    """One pod stamped out of a template (spec copied, not shared); see `PodStamper` for many."""
    return PodStamper(template).stamp(name=name, namespace=namespace, owner=owner, uid=uid)


# --- node ---------------------------------------------------------------------------------------------
class NodeSpec(KubeModel):
    provider_id: str | None = Field(default=None, alias="providerID")
    taints: list[Taint] = Field(default_factory=list)
    unschedulable: bool = False


class NodeCondition(KubeModel):
    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_heartbeat_time: datetime | None = None
    last_transition_time: datetime | None = None


class NodeSystemInfo(KubeModel):
    architecture: str | None = None
    operating_system: str | None = None
    kubelet_version: str | None = None
    kube_proxy_version: str | None = None
    container_runtime_version: str | None = None
    kernel_version: str | None = None
    os_image: str | None = None
    machine_id: str | None = Field(default=None, alias="machineID")
    system_uuid: str | None = Field(default=None, alias="systemUUID")
    boot_id: str | None = Field(default=None, alias="bootID")


class NodeAddress(KubeModel):
    type: str
    address: str


class NodeStatus(KubeModel):
    capacity: ResourceList = Field(default_factory=dict)
    allocatable: ResourceList = Field(default_factory=dict)
    conditions: list[NodeCondition] = Field(default_factory=list)
    node_info: NodeSystemInfo | None = None
    addresses: list[NodeAddress] = Field(default_factory=list)


class Node(Named, KubeModel):
    api_version: str = "v1"
    kind: str = "Node"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodeSpec = Field(default_factory=NodeSpec)
    status: NodeStatus = Field(default_factory=NodeStatus)


    @property
    def labels(self) -> dict[str, str]:
        return self.metadata.labels

    @property
    def provider_id(self) -> str | None:
        return self.spec.provider_id

    def instance_id(self) -> str | None:
        """The EC2 instance id from `providerID` (`aws:///us-east-1a/i-0abc` -> `i-0abc`)."""
        pid = self.spec.provider_id
        if not pid or not pid.startswith("aws://"):
            return None
        last = pid.rstrip("/").rsplit("/", 1)[-1]
        return last if last.startswith("i-") else None

    def capacity(self) -> Resources:
        return resources.parse(self.status.capacity)

    def allocatable(self) -> Resources:
        return resources.parse(self.status.allocatable)

    def is_ready(self) -> bool:
        cond = next((c for c in self.status.conditions if c.type == "Ready"), None)
        return cond is not None and cond.status == "True"

    def taints(self) -> list[domain.Taint]:
        return [t.to_domain() for t in self.spec.taints]


# --- daemonset ----------------------------------------------------------------------------------------
class DaemonSetSpec(KubeModel):
    selector: LabelSelector | None = None
    template: PodTemplateSpec = Field(default_factory=PodTemplateSpec)


class DaemonSet(Namespaced, KubeModel):
    """A DaemonSet: every new node will also run one of its pods, so it is per-node overhead."""

    api_version: str = "apps/v1"
    kind: str = "DaemonSet"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: DaemonSetSpec = Field(default_factory=DaemonSetSpec)


    def template_pod(self) -> Pod:
        """The pod this DaemonSet would put on a new node (owned by it), for overhead and fit checks."""
        owner = OwnerReference(
            api_version=self.api_version,
            kind="DaemonSet",
            name=self.name,
            uid=self.metadata.uid or "",
            controller=True,
        )
        return pod_from_template(
            self.spec.template, name=f"{self.name}-template", namespace=self.namespace, owner=owner
        )


# --- pod disruption budget ----------------------------------------------------------------------------
class PodDisruptionBudgetSpec(KubeModel):
    min_available: IntOrPercent | None = None
    max_unavailable: IntOrPercent | None = None
    selector: LabelSelector | None = None
    unhealthy_pod_eviction_policy: str | None = None

    @model_validator(mode="after")
    def _one_of(self) -> PodDisruptionBudgetSpec:
        if self.min_available is not None and self.max_unavailable is not None:
            raise ValueError("minAvailable and maxUnavailable cannot both be set")
        return self


class PodDisruptionBudgetStatus(KubeModel):
    disruptions_allowed: int | None = None
    current_healthy: int | None = None
    desired_healthy: int | None = None
    expected_pods: int | None = None


class PodDisruptionBudget(Namespaced, KubeModel):
    api_version: str = "policy/v1"
    kind: str = "PodDisruptionBudget"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodDisruptionBudgetSpec = Field(default_factory=PodDisruptionBudgetSpec)
    status: PodDisruptionBudgetStatus | None = None


    def matches(self, pod: Pod) -> bool:
        """policy/v1: an empty selector selects every pod of the namespace, a missing one selects none."""
        selector = self.spec.selector
        return selector is not None and pod.namespace == self.namespace and selector.matches(pod.labels)

    def allowed_disruptions(self, expected: int, healthy: int) -> int:
        """How many of the `expected` selected pods may be evicted now, `healthy` of them being healthy.

        Percentages round up, as the disruption controller does.
        """
        if self.spec.min_available is not None:
            desired = scaled_int_or_percent(self.spec.min_available, expected, round_up=True)
        elif self.spec.max_unavailable is not None:
            desired = expected - scaled_int_or_percent(self.spec.max_unavailable, expected, round_up=True)
        else:
            return max(0, healthy)  # no constraint: a PDB without either field allows everything
        return max(0, healthy - desired)
