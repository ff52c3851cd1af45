"""The outside world as the app sees it: the Kubernetes cluster, EC2 and friends, the event bus.

Adapters in `carpool.adapters` implement these for real AWS/EKS; `carpool.sim` implements `Cluster` for
the simulation. Only adapters import boto3 or lightkube.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from carpool.api.k8s import DaemonSet, Node, Pod, PodDisruptionBudget
from carpool.api.storage import PersistentVolume, PersistentVolumeClaim, StorageClass
from carpool.taints import Taint

if TYPE_CHECKING:
    from datetime import datetime

    from carpool.disruption.podview import PodView
    from carpool.k8s_events import KubeEvent
    from carpool.karpenter_lease import Lease
    from carpool.launch.profiles import ExistingProfile, ProfileRequest


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One change seen by the watcher: `type` is ADDED, MODIFIED or DELETED; `kind` Pod or Node, or one of
    Karpenter's kinds (`carpool.karpenter_objects`: NodePool, EC2NodeClass, NodeClaim), whose object is
    its JSON as the API server holds it."""

    type: str
    kind: str
    obj: Pod | Node | dict[str, Any]
    resource_version: str | None = None


class ResourceVersionExpired(Exception):
    """A watch was asked to resume from a resource version the API server no longer holds the changes
    after (HTTP 410 Gone, or an ERROR event with a 410 Status): list again, then resume from the list's
    version (the informer pattern)."""

    def __init__(self, kind: str, version: str) -> None:
        super().__init__(f"{kind} watch from resource version {version}: expired (410), list again")
        self.kind, self.version = kind, version


@dataclass(frozen=True, slots=True)
class PodViewChange:
    """One pod's change as a watch of the unfinished pods reports it: its view while it is unfinished,
    None once it was deleted or finished (the field selector's watch then sends DELETED)."""

    key: str
    view: PodView | None


@dataclass(frozen=True)
class PodViewChanges:
    """The changes to the unfinished pods after a resource version, in order, and the version to resume
    from next (the last change's or bookmark's; the one asked from when nothing came)."""

    changes: list[PodViewChange]
    resource_version: str


class OutcomeUnknown(Exception):
    """A call was sent but its answer never came (read timeouts on every retry, the connection closed
    mid-answer): it may or may not have taken effect. Not a failure: what it did is read back from AWS."""


class LaunchTemplateMissing(Exception):
    """CreateFleet named a launch template EC2 does not have (deleted by the clean-up, or by hand)."""


#: CreateFleet's per-override error codes for a launch template EC2 does not have
LAUNCH_TEMPLATE_MISSING_CODES = frozenset({"InvalidLaunchTemplateName.NotFoundException",
                                           "InvalidLaunchTemplateId.NotFound"})


class EvictionBlocked(Exception):
    """The API refused an eviction (a PodDisruptionBudget would be violated)."""


class NodeGone(Exception):
    """The node does not exist (HTTP 404): it was deleted before or while carpool changed it."""

    def __init__(self, node_name: str) -> None:
        super().__init__(f"node {node_name} not found")
        self.node_name = node_name


class TerminationRefused(Exception):
    """EC2 refused to terminate an instance: termination protection (`OperationNotPermitted`), or IAM or a
    service control policy denying `ec2:TerminateInstances` (`UnauthorizedOperation`). No retry changes
    that until someone does; the instance keeps running."""

    def __init__(self, instance_ids: Sequence[str], code: str, message: str) -> None:
        super().__init__(f"TerminateInstances of {', '.join(instance_ids)} refused: {code}: {message}")
        self.instance_ids = list(instance_ids)
        self.code = code
        self.message = message


class LeaseForbidden(Exception):
    """The API server refused to let carpool read a Lease (HTTP 403): its Kubernetes RBAC lacks `get` on
    `leases` in `coordination.k8s.io` (`infra/rbac.yaml` grants it for Karpenter's Lease). Not "no Lease":
    carpool cannot tell whether Karpenter's controller runs, so it does not act."""

    def __init__(self, namespace: str, name: str, message: str) -> None:
        super().__init__(f"cannot read Lease {namespace}/{name}: the API server refused (403: {message}); "
                         f"grant get on leases in coordination.k8s.io (apply infra/rbac.yaml again)")
        self.namespace, self.name = namespace, name


class NodeConflict(Exception):
    """Every attempt to patch the node lost the optimistic-lock race (HTTP 409): another writer keeps
    changing it. Safe to retry later; nothing was half-applied."""

    def __init__(self, node_name: str, attempts: int) -> None:
        super().__init__(f"node {node_name}: still conflicting after {attempts} attempts")
        self.node_name = node_name
        self.attempts = attempts


@dataclass(frozen=True, slots=True)
class NodeChange:
    """What a `NodePatch` changes on one node as read: only the keys whose value changes, and the whole
    new taint, finalizer and ownerReference lists (None when they stay as they are)."""

    labels: dict[str, str]
    annotations: dict[str, str]
    taints: list[dict[str, str]] | None
    finalizers: list[str] | None = None
    owner_references: list[dict[str, Any]] | None = None

    def __bool__(self) -> bool:
        return bool(self.labels or self.annotations or self.taints is not None or self.finalizers is not None
                    or self.owner_references is not None)


@dataclass(frozen=True, slots=True)
class NodePatch:
    """A change to a node's labels, annotations and taints, applied to the node as last read.

    Taints are a list without a merge key, so every implementation writes the whole list under the
    resourceVersion it read (an optimistic lock) and starts again from a fresh read when another writer
    got there first: a blind list write would drop a taint the kubelet or a CNI agent changed meanwhile.
    Taints match by key and effect, as Kubernetes and Karpenter match them.
    """

    #: set whatever the node has
    labels: Mapping[str, str] = field(default_factory=dict)
    #: set only where the node has no value (the node's own value, e.g. from its kubelet, wins)
    labels_if_absent: Mapping[str, str] = field(default_factory=dict)
    annotations_if_absent: Mapping[str, str] = field(default_factory=dict)
    #: every taint with one of these keys goes (any effect, any value)
    remove_taint_keys: frozenset[str] = frozenset()
    #: added unless the node has a taint with the same key and effect
    add_taints: tuple[Taint, ...] = ()
    #: `metadata.finalizers` added unless present: never to a node being deleted (the API server refuses
    #: "no new finalizers can be added if the object is being deleted"), so a patch skips them there
    add_finalizers: frozenset[str] = frozenset()
    #: `metadata.finalizers` removed (the last one gone from a node being deleted lets the node go)
    remove_finalizers: frozenset[str] = frozenset()
    #: `metadata.ownerReferences` added unless one with the same uid is there (the node's NodeClaim, as
    #: Karpenter's `UpdateNodeOwnerReferences`); a list without a merge key, written whole like the others
    add_owner_references: tuple[Mapping[str, Any], ...] = ()

    def change(
        self, labels: Mapping[str, str], annotations: Mapping[str, str], taints: Sequence[Mapping[str, Any]],
        finalizers: Sequence[str] = (), *, deleting: bool = False, owner_references: Sequence[Mapping[str, Any]] = (),
    ) -> NodeChange:
        """The change this patch makes to a node with these labels, annotations, taints (Kubernetes JSON
        taints: key, effect, optional value and timeAdded) and finalizers; `deleting`: the node has a
        `deletionTimestamp`. Finalizers are a list without a merge key too: written whole, under the
        resourceVersion read."""
        new_labels = {k: v for k, v in self.labels_if_absent.items() if k not in labels}
        new_labels.update({k: v for k, v in self.labels.items() if labels.get(k) != v})
        new_annotations = {k: v for k, v in self.annotations_if_absent.items() if k not in annotations}
        kept = [dict(t) for t in taints if t.get("key") not in self.remove_taint_keys]
        for taint in self.add_taints:
            if not any(t.get("key") == taint.key and t.get("effect") == taint.effect for t in kept):
                kept.append({"key": taint.key, "effect": taint.effect, **({"value": taint.value} if taint.value else {})})
        return NodeChange(new_labels, new_annotations, kept if kept != [dict(t) for t in taints] else None,
                          self._finalizers(list(finalizers), deleting), self._owners(owner_references))

    def _owners(self, present: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]] | None:
        """The node's new ownerReference list, None when it stays as it is."""
        uids = {o.get("uid") for o in present}
        added = [dict(o) for o in self.add_owner_references if o.get("uid") not in uids]
        return [*(dict(o) for o in present), *added] if added else None

    def _finalizers(self, present: list[str], deleting: bool) -> list[str] | None:
        """The node's new finalizer list, None when it stays as it is."""
        wanted = [f for f in present if f not in self.remove_finalizers]
        if not deleting:
            wanted += sorted(f for f in self.add_finalizers - set(present) if f not in self.remove_finalizers)
        return wanted if wanted != present else None


class StorageObjects(NamedTuple):
    """The storage objects that decide where some pods may run: their claims, the volumes those claims
    are bound to, and every StorageClass (an unset class means the default one)."""

    claims: list[PersistentVolumeClaim]
    volumes: list[PersistentVolume]
    classes: list[StorageClass]


def claimed(pods: Iterable[Pod]) -> dict[str, set[str]]:
    """The claim names each namespace's pods use: `persistentVolumeClaim` volumes and the claims of
    generic ephemeral volumes (named `<pod>-<volume>` by the ephemeral volume controller)."""
    out: dict[str, set[str]] = {}
    for pod in pods:
        for volume in pod.spec.volumes:
            name = volume.claim_name(pod.name)
            if name is not None:
                out.setdefault(pod.namespace, set()).add(name)
    return out


class Cluster(Protocol):
    """The Kubernetes API, reduced to what carpool reads and does."""

    def list_pods(self) -> list[Pod]: ...

    def pods_on_node(self, node_name: str) -> list[Pod]:
        """Pods bound to one node (field selector `spec.nodeName=<node>`): a drain's cost follows the
        node's pods, not the cluster's."""
        ...

    def pod_views(self, node_name: str | None = None) -> list[PodView]:
        """Pods not in phase Succeeded or Failed as compact `PodView`s (what the disruption pass reads):
        every node's with `node_name` None, one node's (field selector `spec.nodeName=<node>`), or the
        unbound ones with "". The views of one read share the scheduling shapes of a workload's pods."""
        ...

    def pod_views_versioned(self) -> tuple[list[PodView], str]:
        """`pod_views()` of every node, and the list's resource version: where `pod_view_changes` resumes."""
        ...

    def pod_view_changes(self, since: str) -> PodViewChanges:
        """The unfinished pods' changes after resource version `since`: one watch request of the
        `status.phase!=Succeeded,status.phase!=Failed` selection, read while the API server sends what
        it holds (a watch starts with every change after its version at once), then closed. Raises
        `ResourceVersionExpired` when the API server no longer holds the changes after `since`."""
        ...

    def pod_keys(self) -> set[str]:
        """"namespace/name" of every pod that exists (cheaper than `list_pods` where the cluster allows)."""
        ...

    def pods_selected(self, namespace: str | None, selector: str) -> list[Pod]:
        """The unfinished pods of one namespace (every namespace with None) that a label selector selects
        (server-side `labelSelector`, plus the `status.phase` field selector): what a topology spread or
        pod affinity term counts, read as Karpenter's `Topology.countDomains` reads it, so the cost
        follows the workload's pods, not the cluster's."""
        ...

    def pending_pods(self) -> list[Pod]:
        """Pods not bound to a node and in phase Pending: the only pods a `Pod Unschedulable` event can
        still be about. One list with the server-side field selector `spec.nodeName=,status.phase=Pending`,
        so its cost follows the pending pods, not every pod of the cluster."""
        ...

    def list_nodes(self) -> list[Node]: ...

    def node_names(self) -> set[str]:
        """Every node's name (a metadata-only list: no spec or status is sent or decoded)."""
        ...

    def uninitialized_node_pages(self) -> Iterator[list[Node]]:
        """Nodes launched for a NodePool (`karpenter.sh/nodepool`) and not initialized yet, one list page at
        a time (label selector `karpenter.sh/nodepool,karpenter.sh/initialized!=true`): the only nodes a
        registration step can be due for, read without reading the cluster's other nodes."""
        ...

    def pending_pod_pages(self) -> Iterator[list[Pod]]:
        """`pending_pods`, one list page at a time: a reader that keeps only what it needs from each page
        (the watcher's resync) holds one page of pods, however many are pending."""
        ...

    def joining_nodes(self) -> list[Node]:
        """Nodes registered for a carpool claim (`carpool.dev/nodeclaim`) and not initialized yet: the
        few between joining and initialization, whose claims may still be in flight while pods already
        bind to them. One list with the label selector `carpool.dev/nodeclaim,!karpenter.sh/initialized`."""
        ...

    def get_node(self, name: str) -> Node | None:
        """The node as the API has it now (None when it does not exist)."""
        ...

    def list_daemonsets(self) -> list[DaemonSet]: ...

    def get_lease(self, namespace: str, name: str) -> Lease | None:
        """The `coordination.k8s.io/v1` Lease as the API has it now (None when there is none): who holds
        it and when it was last renewed (`carpool.karpenter_lease`). Raises `LeaseForbidden` on 403."""
        ...

    def record_event(self, event: KubeEvent, now: datetime) -> None:
        """Create `event` (`carpool.k8s_events`), or when it already exists (409: written before, with the
        same name) add one to its `count` and move its `lastTimestamp`, as Kubernetes aggregates repeats."""
        ...

    def list_pdbs(self) -> list[PodDisruptionBudget]: ...

    def cni_env(self) -> dict[str, str]:
        """The `aws-node` DaemonSet's container env (prefix delegation / custom networking detection)."""
        ...

    def storage_for(self, pods: Sequence[Pod]) -> StorageObjects:
        """The claims `pods` name (read per namespace; a missing one is simply absent), the volumes those
        claims are bound to, and the StorageClasses. Nothing is read when no pod names a claim."""
        ...

    def cordon(self, node_name: str) -> None: ...

    def uncordon(self, node_name: str) -> None:
        """Mark the node schedulable again (a disruption abandoned). Raises NodeGone (404)."""
        ...

    def taint(self, node_name: str, taint: Taint) -> None: ...

    def patch_node(self, name: str, patch: NodePatch, *, attempts: int = 5) -> Node:
        """Apply `patch` to the node as read, under its resourceVersion; on a conflict (409) read again and
        re-apply, at most `attempts` times. Returns the node as written (as read when nothing changed, in
        which case nothing is written). Raises NodeGone (404) or NodeConflict."""
        ...

    def evict(self, pod_key: str) -> None:
        """Evict through the Eviction API. Raises EvictionBlocked when a PDB forbids it."""
        ...

    def delete_pod(self, pod_key: str, grace_period_seconds: int) -> None:
        """DELETE the pod with this grace period (no PodDisruptionBudget is consulted: the drain
        deadline's last resort). A pod already gone is deleted."""
        ...

    def delete_node(self, node_name: str) -> None: ...

    def watch(self, resource_versions: Mapping[str, str], timeout_seconds: float,
              idle_seconds: float | None = None) -> Iterator[WatchEvent | None]:
        """Changes to each kind named in `resource_versions` (Pod, Node; NodePool, EC2NodeClass, NodeClaim)
        since its resource version, for about `timeout_seconds`. A kind named with an empty version starts
        like a fresh watch (ADDED for every object).

        With `idle_seconds`, a None is yielded each time that long passes without a change: a caller that
        gathers changes in micro-batches flushes on it. Without it, no None is ever yielded."""
        ...


class Compute(Protocol):
    """EC2 as carpool uses it (boto3 response shapes pass through unchanged)."""

    def create_fleet(self, request: Mapping[str, Any]) -> dict[str, Any]: ...

    def terminate_instances(self, instance_ids: Sequence[str]) -> None: ...

    def tag_instance(self, instance_id: str, tags: Mapping[str, str]) -> None:
        """Add `tags` to one running instance (a claim's name, after a batched launch)."""
        ...

    def describe_instances(self, filters: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]: ...

    def ensure_launch_template(self, request: Mapping[str, Any]) -> str:
        """Create the launch template unless one of that name exists; returns its name."""
        ...

    def list_launch_templates(self, cluster: str) -> list[dict[str, Any]]: ...

    def delete_launch_template(self, name: str) -> None: ...

    def describe_subnets(self, filters: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]: ...

    def describe_security_groups(self, filters: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]: ...


class EventPublisher(Protocol):
    def put_events(self, entries: Iterable[Mapping[str, Any]]) -> int:
        """Send PutEvents entries in batches of 10; returns the number that failed."""
        ...


class RoleNotFound(Exception):
    """IAM has no role of that name: a node class's `spec.role` names a role that does not exist."""

    def __init__(self, role: str) -> None:
        super().__init__(f"spec.role: IAM role {role!r} does not exist")
        self.role = role


class InstanceProfiles(Protocol):
    """IAM instance profiles as carpool manages them for `EC2NodeClass.spec.role`
    (`carpool.launch.profiles` decides names, path, tags and what to delete)."""

    def ensure(self, request: ProfileRequest) -> None:
        """Create the profile with its path and tags unless it exists, and make `request.role` its one
        role (a different role is removed first: a profile holds at most one). Raises RoleNotFound."""
        ...

    def list_profiles(self, path: str) -> list[ExistingProfile]:
        """Every instance profile under `path`."""
        ...

    def delete(self, name: str) -> None:
        """Remove the profile's role, then the profile; a profile already gone is no error."""
        ...
