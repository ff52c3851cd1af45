"""Karpenter's own objects in the cluster (NodePool, EC2NodeClass, NodeClaim), as the app sees them.

Why a port of its own, beside `carpool.ports.Cluster`: these are custom resources that Karpenter's CRDs
define (installed from Karpenter's `karpenter-crd` chart at v1.14.1, the version carpool follows), read and
written as the JSON the API server holds, not as carpool's pydantic models. The API server applies the
CRD's defaults and schema, bumps `metadata.generation` on a spec change only, keeps `status` behind the
status subresource, and holds a deleted object while a finalizer remains (`deletionTimestamp` set). The
implementations: `carpool.adapters.k8s.karpenter_objects` (lightkube, a real cluster) and the simulated
cluster (`carpool.sim.cluster.objects`), which the real kube-apiserver with these CRDs loaded checks.

Objects cross as plain dicts (`metadata`, `spec`, `status`) because three owners write them: the user
(`kubectl apply` of the spec), carpool (status, NodeClaims, finalizers) and the API server (metadata).
carpool's typed views of them live where they are decided on (`carpool.api.nodepool`, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, Protocol

__all__ = [
    "EC2NODECLASS",
    "KARPENTER_KINDS",
    "NODECLAIM",
    "NODEPOOL",
    "TERMINATION_FINALIZER",
    "KarpenterObjects",
    "KindNotServed",
    "ObjectConflict",
    "ObjectGone",
    "ObjectInvalid",
    "ObjectKind",
    "ObjectList",
    "kind_named",
]


@dataclass(frozen=True, slots=True)
class ObjectKind:
    """A Karpenter custom resource as the API server serves it (cluster-scoped, all three)."""

    group: str
    version: str
    kind: str
    plural: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def path(self) -> str:
        """The collection's URL path (`/apis/karpenter.sh/v1/nodepools`)."""
        return f"/apis/{self.group}/{self.version}/{self.plural}"


NODEPOOL: Final = ObjectKind("karpenter.sh", "v1", "NodePool", "nodepools")
EC2NODECLASS: Final = ObjectKind("karpenter.k8s.aws", "v1", "EC2NodeClass", "ec2nodeclasses")
NODECLAIM: Final = ObjectKind("karpenter.sh", "v1", "NodeClaim", "nodeclaims")
KARPENTER_KINDS: Final = (NODEPOOL, EC2NODECLASS, NODECLAIM)

#: Karpenter's finalizer on NodeClaims and its Nodes (`v1.TerminationFinalizer`): a delete of either waits
#: for the drain and the instance's termination before the object goes
TERMINATION_FINALIZER: Final = "karpenter.sh/termination"


def kind_named(kind: str) -> ObjectKind:
    """The Karpenter kind called `kind` ("NodePool"); KeyError for any other."""
    for known in KARPENTER_KINDS:
        if known.kind == kind:
            return known
    raise KeyError(kind)


class ObjectList(NamedTuple):
    """A list of one kind: the objects (name order) and the list's resourceVersion (to watch from)."""

    items: list[dict[str, Any]]
    resource_version: str


class KindNotServed(Exception):
    """The API server does not serve the kind: Karpenter's CRDs are not installed (404 on the collection)."""

    def __init__(self, kind: ObjectKind) -> None:
        super().__init__(
            f"the cluster does not serve {kind.plural}.{kind.group}/{kind.version}: install Karpenter's CRDs "
            "(helm chart karpenter-crd 1.14.1, or kubectl apply of the same files; docs/migrating-from-karpenter.md)"
        )
        self.kind = kind


class ObjectGone(Exception):
    """No such object (404)."""

    def __init__(self, kind: ObjectKind, name: str) -> None:
        super().__init__(f"{kind.kind} {name!r} not found")
        self.kind, self.name = kind, name


class ObjectConflict(Exception):
    """409: a create of a name that exists, or a write whose `resource_version` precondition is stale."""

    def __init__(self, kind: ObjectKind, name: str, message: str) -> None:
        super().__init__(f"{kind.kind} {name!r}: {message}")
        self.kind, self.name = kind, name


class ObjectInvalid(Exception):
    """422: the API server refused the object (its CRD's schema); `message` is the server's, naming fields."""

    def __init__(self, kind: ObjectKind, name: str, message: str) -> None:
        super().__init__(f"{kind.kind} {name!r} is invalid: {message}")
        self.kind, self.name, self.message = kind, name, message


class KarpenterObjects(Protocol):
    """Karpenter's custom resources in the cluster. Every write returns the object as the server stored it
    (its new resourceVersion, generation, defaults)."""

    def list_objects(self, kind: ObjectKind) -> ObjectList:
        """Every object of `kind`. Raises `KindNotServed` when the CRD is not installed."""
        ...

    def get_object(self, kind: ObjectKind, name: str) -> dict[str, Any] | None:
        """The object, None when there is none."""
        ...

    def create_object(self, kind: ObjectKind, obj: Mapping[str, Any]) -> dict[str, Any]:
        """POST the object (its `status` is dropped, as the status subresource drops it: write it with
        `patch_status`). Raises `ObjectConflict` when the name exists, `ObjectInvalid` when refused."""
        ...

    def patch_object(self, kind: ObjectKind, name: str, patch: Mapping[str, Any], *,
                     resource_version: str | None = None) -> dict[str, Any]:
        """A JSON merge patch of the object (metadata, spec; `status` in it is ignored). With
        `resource_version`, only if the object is still at it (`ObjectConflict` otherwise). Raises
        `ObjectGone`, `ObjectInvalid`."""
        ...

    def patch_status(self, kind: ObjectKind, name: str, status: Mapping[str, Any], *,
                     resource_version: str | None = None) -> dict[str, Any]:
        """A JSON merge patch `{"status": status}` through the status subresource (spec and metadata are
        left as they are). Same errors as `patch_object`."""
        ...

    def delete_object(self, kind: ObjectKind, name: str) -> None:
        """DELETE (background propagation): an object with finalizers stays, with `deletionTimestamp`, until
        they are removed. An object already gone is deleted (no error)."""
        ...
