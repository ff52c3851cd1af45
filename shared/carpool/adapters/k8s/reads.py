"""How carpool reads lists from the API server: narrow selectors, metadata-only pages, one JSON parse.

A list's cost grows with what the server sends and what the client builds from it. Three levers:
- field selectors (`spec.nodeName`, `status.phase` are selectable pod fields, `PodToSelectableFields` in
  kube-apiserver), so the server sends only the pods a question is about;
- the `PartialObjectMetadataList` representation where names are all that is needed (the server strips
  spec and status before encoding);
- each page's bytes validated straight into carpool's pydantic models (`TypeAdapter.validate_json`), with
  no intermediate lightkube objects or dicts: the Rust JSON parser builds only the fields carpool models.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

#: unbound pods that are still Pending: what a provisioning decision can be about
PENDING_UNBOUND = "spec.nodeName=,status.phase=Pending"
#: pods that hold resources on a node or wait for one (finished pods hold nothing)
NOT_FINISHED = "status.phase!=Succeeded,status.phase!=Failed"
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
    """A list page's JSON bytes, validated into `model` items in one pass."""
    return _page_adapter(model).validate_json(content)  # type: ignore[no-any-return,arg-type]
