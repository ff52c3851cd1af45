"""How carpool reads lists from the API server: narrow selectors, metadata-only pages, one JSON parse.

A list's cost grows with what the server sends and what the client builds from it. Three levers:
- field selectors (`spec.nodeName`, `status.phase` are selectable pod fields, `PodToSelectableFields` in
  kube-apiserver), so the server sends only the pods a question is about;
- the `PartialObjectMetadataList` representation where names are all that is needed (the server strips
  spec and status before encoding);
- each page's bytes validated straight into carpool's pydantic models (`TypeAdapter.validate_json`), with
  no intermediate lightkube objects or dicts: the Rust JSON parser builds only the fields carpool models;
- for the disruption pass's read of every pod, a projection (`PodProjection`, msgspec structs) that
  decodes only the fields a `PodView` is made of and is turned into views page by page.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any, Generic, TypeVar

import msgspec
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from carpool import labels
from carpool.api.k8s import TERMINAL_PHASES, Pod
from carpool.disruption.podview import Owner, PodView, Shapes

#: unbound pods that are still Pending: what a provisioning decision can be about
PENDING_UNBOUND = "spec.nodeName=,status.phase=Pending"
#: pods that hold resources on a node or wait for one (finished pods hold nothing)
NOT_FINISHED = "status.phase!=Succeeded,status.phase!=Failed"
#: nodes registered for a carpool claim and not initialized yet: the ones joining (`Cluster.joining_nodes`)
JOINING_NODES = f"{labels.CLAIM},!{labels.NODE_INITIALIZED}"
#: nodes carpool (or Karpenter) launched that are not initialized yet: the only ones a registrar step can
#: be due for (`Cluster.uninitialized_node_pages`)
UNINITIALIZED_NODES = f"{labels.NODEPOOL},{labels.NODE_INITIALIZED}!=true"
#: `Accept` that asks the API server for `PartialObjectMetadataList` (metadata of each object only)
METADATA_ACCEPT = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"

T = TypeVar("T")


def on_node(node_name: str) -> str:
    """Pods bound to one node."""
    return f"spec.nodeName={node_name}"


class ListMeta(BaseModel):
    """A list's `metadata`: its resource version and the continue token of the next page."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    resource_version: str = Field("", alias="resourceVersion")
    continue_token: str | None = Field(None, alias="continue")


class ListPage(BaseModel, Generic[T]):
    """One page of a `<Kind>List` or `PartialObjectMetadataList` (`items` is null in an empty answer from
    some servers)."""

    model_config = ConfigDict(extra="ignore")

    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[T] | None = None


class NameMeta(BaseModel):
    """The part of `metadata` a key is made of."""

    model_config = ConfigDict(extra="ignore")

    name: str = ""
    namespace: str | None = None


class ObjectName(BaseModel):
    """One item of a `PartialObjectMetadataList`, reduced to its name."""

    model_config = ConfigDict(extra="ignore")

    metadata: NameMeta = Field(default_factory=NameMeta)

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace or 'default'}/{self.metadata.name}"


def without_managed_fields(items: Iterable[T]) -> Iterable[T]:
    """The items with `metadata.managedFields` dropped as they arrive: the server sends them with every
    object (a third of a typical pod's JSON) and carpool never reads them, so a long list keeps them for
    one page at most."""
    for item in items:
        metadata = getattr(item, "metadata", None)
        if getattr(metadata, "managed_fields", None) is not None:
            metadata.managed_fields = None  # type: ignore[union-attr]
        yield item


@cache
def _page_adapter(model: type[Any]) -> TypeAdapter[Any]:
    return TypeAdapter(ListPage[model])  # type: ignore[valid-type]


def parse_page(content: bytes, model: type[T]) -> ListPage[T]:
    """A list page's JSON bytes, validated into `model` items in one pass (a msgspec struct `model`, such
    as `PodProjection`, is decoded by msgspec into a page of the same shape)."""
    if isinstance(model, type) and issubclass(model, msgspec.Struct):
        return _struct_page_decoder(model).decode(content)  # type: ignore[no-any-return]
    return _page_adapter(model).validate_json(content)  # type: ignore[no-any-return,arg-type]


# -- the disruption projection: a pod page straight into `PodView`s --------------------------------------
# msgspec structs (msgspec ships with lightkube): its decoder skips every field a struct does not name (env,
# probes, volumes, statuses, managed fields: most of a pod's JSON) while it scans, building nothing for them,
# where a pydantic model first parses the whole document. On a page of 500 typical pods that is the
# difference between the projection costing less than the HTTP read and costing several times more.
class _Owner(msgspec.Struct, rename="camel"):
    kind: str = ""
    name: str = ""
    controller: bool | None = None


class _Meta(msgspec.Struct, rename="camel"):
    name: str = ""
    namespace: str | None = None
    uid: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[_Owner] | None = None
    deletion_timestamp: str | None = None


class _Container(msgspec.Struct, rename="camel"):
    name: str = ""
    resources: dict[str, Any] | None = None
    ports: list[dict[str, Any]] | None = None
    restart_policy: str | None = None

    def shape(self) -> tuple[Any, ...]:
        return (self.resources, self.ports, self.restart_policy)

    def raw(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "resources": self.resources or {}, "ports": self.ports or []}
        if self.restart_policy:
            out["restartPolicy"] = self.restart_policy
        return out


class _Spec(msgspec.Struct, rename="camel"):
    node_name: str | None = None
    priority: int | None = None
    containers: list[_Container] | None = None
    init_containers: list[_Container] | None = None
    overhead: dict[str, Any] | None = None
    node_selector: dict[str, str] | None = None
    affinity: dict[str, Any] | None = None
    tolerations: list[dict[str, Any]] | None = None
    topology_spread_constraints: list[dict[str, Any]] | None = None


class _Condition(msgspec.Struct):
    type: str = ""
    status: str = ""


class _Status(msgspec.Struct):
    phase: str | None = None
    conditions: list[_Condition] | None = None


class PodProjection(msgspec.Struct):
    """The fields of a pod that `carpool.disruption.podview.PodView` is made of, as the API sends them."""

    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: _Spec = msgspec.field(default_factory=_Spec)
    status: _Status = msgspec.field(default_factory=_Status)

    @property
    def key(self) -> str:
        """"namespace/name", as `PodView.key` (a pod without a namespace is in `default`)."""
        return f"{self.metadata.namespace or 'default'}/{self.metadata.name}"

    @property
    def finished(self) -> bool:
        """Succeeded or Failed: it holds nothing on its node, and `NOT_FINISHED` leaves it out."""
        return self.status.phase in TERMINAL_PHASES

    def shape_key(self) -> str:
        """Everything the pod's scheduling shape is made of, as one string (the `Shapes` key): the `repr`
        of the parsed values, which is faithful (equal strings, equal values) and several times cheaper
        than sorted JSON. Pods of one workload come from one template, so their fields arrive in the same
        order; two orders of equal values would only build the same shape twice."""
        m, s = self.metadata, self.spec
        controller = next(((o.kind, o.name) for o in m.owner_references or () if o.controller), None)
        return repr((m.namespace, m.labels, controller, [c.shape() for c in s.containers or ()],
                     [c.shape() for c in s.init_containers or ()], s.overhead, s.node_selector,
                     s.affinity, s.tolerations, s.topology_spread_constraints))

    def to_pod(self) -> Pod:
        """A `Pod` model of the projected fields (the first pod of a new shape is converted from it)."""
        m, s = self.metadata, self.spec
        spec: dict[str, Any] = {"containers": [c.raw() for c in s.containers or ()],
                                "initContainers": [c.raw() for c in s.init_containers or ()],
                                "overhead": s.overhead or {}, "nodeSelector": s.node_selector or {},
                                "tolerations": s.tolerations or [],
                                "topologySpreadConstraints": s.topology_spread_constraints or []}
        if s.affinity:
            spec["affinity"] = s.affinity
        owners = [{"kind": o.kind, "name": o.name, "controller": o.controller} for o in m.owner_references or ()]
        return Pod.model_validate({"metadata": {"name": m.name, "namespace": m.namespace, "uid": m.uid,
                                                "labels": m.labels or {}, "ownerReferences": owners},
                                   "spec": spec})

    def view(self, shapes: Shapes) -> PodView:
        """This pod as a `PodView`, its scheduling shape shared through `shapes`."""
        m, s, st = self.metadata, self.spec, self.status
        ready = next((c.status for c in st.conditions or () if c.type == "Ready"), None)
        return shapes.view(
            key=self.key, uid=m.uid or "", node=s.node_name or "",
            phase=st.phase or "", annotations=m.annotations or {},
            owners=[Owner(o.kind, o.name, bool(o.controller)) for o in m.owner_references or ()],
            priority=s.priority, terminating=m.deletion_timestamp is not None, ready=ready,
            shape=self.shape_key(), make_pod=self.to_pod)


class _StructListMeta(msgspec.Struct):
    resource_version: str = msgspec.field(default="", name="resourceVersion")
    continue_token: str | None = msgspec.field(default=None, name="continue")


@cache
def _struct_page_decoder(model: type[Any]) -> msgspec.json.Decoder[Any]:
    page = msgspec.defstruct(f"{model.__name__}Page", [
        ("metadata", _StructListMeta, msgspec.field(default_factory=_StructListMeta)),
        ("items", list[model] | None, None),  # type: ignore[valid-type]
    ])
    return msgspec.json.Decoder(page)


_projection_decoder = msgspec.json.Decoder(PodProjection)


def parse_projection(content: bytes | msgspec.Raw) -> PodProjection:
    """One pod's JSON (a watch event's object) as a `PodProjection`. Raises ValueError
    (`msgspec.ValidationError`) when it is not a pod's shape."""
    return _projection_decoder.decode(content)
