"""Pure helpers between lightkube objects / Kubernetes JSON and carpool's pydantic models.

Kept apart from `cluster.py` so they can be tested without a cluster or even `carpool.api`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, TypeVar

import msgspec

from carpool.ports import NodeChange
from carpool.taints import Taint


class _Validates(Protocol):
    @classmethod
    def model_validate(cls, obj: Any) -> Any: ...


M = TypeVar("M", bound=_Validates)


def as_dict(obj: Any) -> dict[str, Any]:
    """A lightkube object (`to_dict()`, camelCase, defaults omitted) or an already-plain mapping."""
    if hasattr(obj, "to_dict"):
        return dict(obj.to_dict())
    if isinstance(obj, Mapping):
        return dict(obj)
    raise TypeError(f"cannot convert {type(obj).__name__} to a Kubernetes dict")


def to_model(obj: Any, model: type[M]) -> M:
    """`model.model_validate(obj.to_dict())`: lightkube speaks Kubernetes JSON, so do carpool's models."""
    return model.model_validate(as_dict(obj))  # type: ignore[no-any-return]


def container_env(workload: Mapping[str, Any], container_name: str) -> dict[str, str]:
    """Literal env vars (`name`/`value`) of one container of a workload's pod template. Vars set from
    `valueFrom` have no value to read here and are skipped."""
    containers = workload.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
    for container in containers:
        if container.get("name") == container_name:
            return {
                e["name"]: str(e.get("value", "")) for e in container.get("env") or [] if "valueFrom" not in e
            }
    return {}


def split_pod_key(key: str) -> tuple[str, str]:
    """("namespace", "name") from "namespace/name" (a bare name is in `default`)."""
    namespace, sep, name = key.partition("/")
    return (namespace, name) if sep else ("default", namespace)


def taint_dict(taint: Taint) -> dict[str, str]:
    out = {"key": taint.key, "effect": taint.effect}
    if taint.value:
        out["value"] = taint.value
    return out


def taints_with(existing: Iterable[Mapping[str, Any]], taint: Taint) -> list[dict[str, Any]] | None:
    """The node's taint list with `taint` added or its value updated; None when nothing changes.

    Node taints have no merge key, so a patch must carry the whole list (a strategic merge would replace
    it): read, add, patch with the resourceVersion that was read."""
    current = [dict(t) for t in existing]
    for t in current:
        if t.get("key") == taint.key and t.get("effect") == taint.effect:
            if t.get("value", "") == taint.value:
                return None
            t["value"] = taint.value
            return current
    return [*current, taint_dict(taint)]


def resource_version(obj: Any) -> str | None:
    metadata = getattr(obj, "metadata", None)
    if metadata is not None:
        return getattr(metadata, "resourceVersion", None)
    if isinstance(obj, Mapping):
        return obj.get("metadata", {}).get("resourceVersion")
    return None


def node_merge_patch(resource_version: str | None, change: NodeChange) -> dict[str, Any]:
    """A JSON merge patch (RFC 7386) body for `change`: changed label and annotation keys only (a merge
    patch merges maps key by key), the whole taint or finalizer list when it changes (a merge patch
    replaces lists), and `metadata.resourceVersion` as the precondition that turns a concurrent write into
    409 Conflict."""
    metadata: dict[str, Any] = {"resourceVersion": resource_version}
    if change.labels:
        metadata["labels"] = dict(change.labels)
    if change.annotations:
        metadata["annotations"] = dict(change.annotations)
    if change.finalizers is not None:
        metadata["finalizers"] = list(change.finalizers)
    if change.owner_references is not None:
        metadata["ownerReferences"] = [dict(o) for o in change.owner_references]
    body: dict[str, Any] = {"metadata": metadata}
    if change.taints is not None:
        body["spec"] = {"taints": change.taints}
    return body


def is_budget_refusal(message: str | None) -> bool:
    """Whether an eviction's 500 is the API server refusing a pod that several PodDisruptionBudgets
    select ("This pod has more than one PodDisruptionBudget, which the eviction subresource does not
    support."), rather than a server fault."""
    text = (message or "").lower()
    return "poddisruptionbudget" in text or "disruption budget" in text


def status_text(status: Any) -> str:
    """A `metav1.Status` as one line: its message, then its causes' messages (where the eviction API says
    which budget refused and how many healthy pods it has)."""
    details = getattr(status, "details", None)
    causes = [c.message for c in (getattr(details, "causes", None) or []) if getattr(c, "message", None)]
    message = getattr(status, "message", None) or ""
    return f"{message} ({'; '.join(causes)})" if causes else message


# -- watch lines ----------------------------------------------------------------------------------------------
class WatchLine(msgspec.Struct):
    """One line of a watch stream: `type` (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR) and the object's
    bytes, left undecoded: a BOOKMARK's object is its kind's zero value (`"spec":{"containers":null}` for a
    pod), which no typed Pod decode accepts, so what the object is decoded into depends on the type."""

    type: str
    object: msgspec.Raw = msgspec.Raw(b"{}")


class _Version(msgspec.Struct):
    resourceVersion: str | None = None  # noqa: N815 - the Kubernetes field name


class _Versioned(msgspec.Struct):
    metadata: _Version = msgspec.field(default_factory=_Version)


class WatchStatus(msgspec.Struct):
    """The `metav1.Status` of a watch ERROR event (410 Expired when the resume version was compacted)."""

    code: int = 0
    reason: str = ""
    message: str = ""


_line_decoder = msgspec.json.Decoder(WatchLine)
_version_decoder = msgspec.json.Decoder(_Versioned)
_status_decoder = msgspec.json.Decoder(WatchStatus)


def watch_line(line: str | bytes) -> WatchLine:
    """The envelope of one watch line. Raises ValueError (`msgspec.DecodeError`) when it is not one."""
    return _line_decoder.decode(line)


def raw_version(raw: msgspec.Raw) -> str | None:
    """`metadata.resourceVersion` of a watch event's object, whatever its kind or shape (a bookmark too).
    Raises ValueError when the object is not a JSON object with that shape."""
    return _version_decoder.decode(raw).metadata.resourceVersion


def watch_status(raw: msgspec.Raw) -> WatchStatus:
    """The Status an ERROR event carries (an undecodable one as code 0, an unknown failure)."""
    try:
        return _status_decoder.decode(raw)
    except msgspec.DecodeError:
        return WatchStatus(message=bytes(raw)[:200].decode(errors="replace"))
