"""`carpool.karpenter_objects.KarpenterObjects` on lightkube: Karpenter's NodePools, EC2NodeClasses and
NodeClaims as the API server holds them, as plain JSON dicts.

A module of its own, as `leases.py` is: `LightkubeCluster.client` hands the client (with its EKS token,
re-signed when due) on each call, so nothing is requested before the first use (a cold start costs nothing).

Requests are built by lightkube's HTTP layer for the kinds' generic resources (`RESOURCES`: auth, TLS,
base URL, `fieldManager=carpool` on writes) and answered as JSON, never as lightkube objects: carpool reads
these objects as dicts and decides on them through its own typed views. What the server answers, mapped to
the port's named errors (as controller-runtime's `IsNotFound`/`IsConflict`/`IsInvalid` read a Status):
- 404 naming the object (`details.name`, `nodepools.karpenter.sh "x" not found`): `ObjectGone` (a get
  answers None, a delete of what is gone is done);
- 404 naming nothing (no CRD serves the path: kube-apiserver v1.24 answers a plain `404 page not found`,
  later ones a Status "the server could not find the requested resource"): `KindNotServed`;
- 409 (AlreadyExists on a create; Conflict on a write whose `metadata.resourceVersion` is stale):
  `ObjectConflict`;
- 422 Invalid (the CRD's OpenAPI schema or CEL rules) and 400 BadRequest (a body the server cannot
  decode): `ObjectInvalid`, with the server's message and each cause naming its field;
- anything else (403 Forbidden: the ClusterRole of `infra/rbac.yaml` is not bound; 5xx) is lightkube's
  `ApiError`, with the server's Status.

Writes are JSON merge patches (`application/merge-patch+json`, RFC 7386), as Karpenter's controllers write
with `client.MergeFrom` (`pkg/controllers/nodeclaim/lifecycle/controller.go` patches status with
`client.MergeFromWithOptions(..., client.MergeFromWithOptimisticLock{})`); the optimistic lock is
`metadata.resourceVersion` in the patch, which the server checks (409 when stale). Status is written
through the `/status` subresource, so a status write never bumps `metadata.generation` and a spec write
never touches status. Lists are paged (`limit` 500 + `continue`), restarted from the first page when a
continue token expires (410), as `LightkubeCluster` lists. `metadata.managedFields` is dropped from every
object read: the server sends it with each one and carpool never reads it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import msgspec
from lightkube import Client
from lightkube.core.generic_client import BasicRequest
from lightkube.generic_resource import GenericGlobalResource, create_global_resource

from carpool.karpenter_objects import (
    KARPENTER_KINDS,
    KindNotServed,
    ObjectConflict,
    ObjectGone,
    ObjectInvalid,
    ObjectKind,
    ObjectList,
)

__all__ = ["MERGE_PATCH", "RESOURCES", "LightkubeKarpenterObjects", "decode_object", "decode_page",
           "object_version", "refusal", "watched_kinds", "with_precondition"]

log = logging.getLogger(__name__)

#: the `Content-Type` of a JSON merge patch
MERGE_PATCH: Final = "application/merge-patch+json"
#: list page size (as `LightkubeCluster` pages pods and nodes)
LIST_CHUNK: Final = 500
#: how many times a list starts again after its continue token expired (410) before giving up
LIST_RESTARTS: Final = 3
#: lightkube's generic resource of each kind (by `ObjectKind.kind`): what its request builder and the
#: watch (`LightkubeCluster.watch`) build URLs from
RESOURCES: Final[Mapping[str, type[GenericGlobalResource]]] = {
    k.kind: create_global_resource(k.group, k.version, k.kind, k.plural) for k in KARPENTER_KINDS
}


class LightkubeKarpenterObjects:
    """Karpenter's custom resources through the cluster's lightkube client. `client` answers the current
    client each call (`LightkubeCluster.client`: rebuilt when its EKS token is due)."""

    def __init__(self, client: Callable[[], Client]) -> None:
        self._client = client

    def list_objects(self, kind: ObjectKind) -> ObjectList:
        """Every object of `kind`, paged; a continue token that expires mid-list (410) starts the list
        again, at most `LIST_RESTARTS` times (a list mixing two points in time is not one carpool decides
        on). `KindNotServed` without the CRD."""
        for attempt in range(1, LIST_RESTARTS + 1):
            try:
                return self._read_pages(kind)
            except _Refused as e:
                if e.code != 410 or attempt == LIST_RESTARTS:
                    raise e.error from None
                log.warning("listing %s: continue token expired (%s); listing again from the start (%d of %d)",
                            kind.plural, e, attempt + 1, LIST_RESTARTS)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def get_object(self, kind: ObjectKind, name: str) -> dict[str, Any] | None:
        try:
            return self._send(kind, "get", name)
        except ObjectGone:
            return None

    def create_object(self, kind: ObjectKind, obj: Mapping[str, Any]) -> dict[str, Any]:
        """POST, with `apiVersion` and `kind` filled in when the object leaves them out (the server would
        refuse it: "Object 'Kind' is missing"). The server drops `status` (the status subresource)."""
        body = {"apiVersion": kind.api_version, "kind": kind.kind, **obj}
        name = str((obj.get("metadata") or {}).get("name") or "")
        return self._send(kind, "post", name, body=body)

    def patch_object(self, kind: ObjectKind, name: str, patch: Mapping[str, Any], *,
                     resource_version: str | None = None) -> dict[str, Any]:
        return self._send(kind, "patch", name, body=with_precondition(patch, resource_version))

    def patch_status(self, kind: ObjectKind, name: str, status: Mapping[str, Any], *,
                     resource_version: str | None = None) -> dict[str, Any]:
        body = with_precondition({"status": dict(status)}, resource_version)
        return self._send(kind, "patch", name, body=body, status=True)

    def delete_object(self, kind: ObjectKind, name: str) -> None:
        """DELETE with background propagation (a NodePool's NodeClaims, which it owns, go after it as the
        garbage collector deletes dependents). An object already gone is deleted."""
        try:
            self._send(kind, "delete", name, params={"propagationPolicy": "Background"})
        except ObjectGone:
            return

    # -- requests -------------------------------------------------------------------------------------------
    def _read_pages(self, kind: ObjectKind) -> ObjectList:
        """One paged list. Raises `_Refused` for an error answer (`list_objects` restarts on a 410)."""
        items: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": LIST_CHUNK}
        while True:
            page, version, token = decode_page(self._request(kind, "list", params=params))
            items.extend(page)
            if not token:
                return ObjectList(items, version)
            params["continue"] = token

    def _send(self, kind: ObjectKind, method: str, name: str, *, body: Mapping[str, Any] | None = None,
              params: Mapping[str, Any] | None = None, status: bool = False) -> dict[str, Any]:
        """One request about one object; its answer as the object (a DELETE answers the object or a
        Status: either is returned as sent). Raises the named error of a refusal."""
        try:
            content = self._request(kind, method, name, body=body, params=params, status=status)
        except _Refused as e:
            raise e.error from None
        return decode_object(content)

    def _request(self, kind: ObjectKind, method: str, name: str | None = None, *,
                 body: Mapping[str, Any] | None = None, params: Mapping[str, Any] | None = None,
                 status: bool = False) -> bytes:
        """The answer's bytes; `_Refused` carrying the named error for an HTTP error answer."""
        generic = self._client()._client
        resource = resource_of(kind)
        request: BasicRequest = generic.prepare_request(
            method, res=resource.Status if status else resource, name=name, obj=body,
            params=dict(params or {}), headers={"Content-Type": MERGE_PATCH} if method == "patch" else None,
        )
        response = generic.send(generic.build_adapter_request(request))
        if response.is_error:
            raise _Refused(response.status_code, refusal(kind, name or "", response, generic.raise_for_status))
        return bytes(response.content)


def resource_of(kind: ObjectKind) -> type[GenericGlobalResource]:
    """lightkube's generic resource for `kind`: one of `RESOURCES`, or made (and kept by lightkube's
    registry) for another cluster-scoped kind, such as a kind of a group no CRD serves."""
    known = RESOURCES.get(kind.kind)
    if known is not None and known._api_info.plural == kind.plural:
        return known
    return create_global_resource(kind.group, kind.version, kind.kind, kind.plural)


def with_precondition(patch: Mapping[str, Any], resource_version: str | None) -> dict[str, Any]:
    """The merge patch with `metadata.resourceVersion` set when a precondition is asked: the server
    applies the patch only to the object at that version, else answers 409 Conflict ("the object has
    been modified; please apply your changes to the latest version and try again"). An empty version is
    no precondition (the server would refuse it as invalid: "must be specified for an update")."""
    body = dict(patch)
    if resource_version:
        body["metadata"] = {**(body.get("metadata") or {}), "resourceVersion": resource_version}
    return body


def refusal(kind: ObjectKind, name: str, response: Any, raise_for_status: Callable[[Any], None]) -> Exception:
    """The port's error for an HTTP error answer (the module docstring's table); for a code the port does
    not name, what `raise_for_status` raises (lightkube's `ApiError` with the Status)."""
    status = _status(response.content)
    code = response.status_code
    if code == 404:
        named = status.details.name if status.details else ""
        return ObjectGone(kind, name) if named and name else KindNotServed(kind)
    if code == 409:
        return ObjectConflict(kind, name, status.message or status.reason or "Conflict")
    if code in (400, 422):
        return ObjectInvalid(kind, name, _with_causes(status))
    try:
        raise_for_status(response)
    except Exception as e:  # noqa: BLE001 - lightkube's ApiError or httpx's error, handed to the caller
        return e
    return RuntimeError(f"{kind.kind} {name!r}: HTTP {code}")  # an error answer raise_for_status let pass


def _with_causes(status: _Status) -> str:
    """The server's message, then each cause it does not already say (`spec.weight: Invalid value...`)."""
    message = status.message or status.reason or "Invalid"
    causes = status.details.causes if status.details else []
    extra = [f"{c.field}: {c.message}" if c.field else c.message for c in causes
             if c.message and c.message not in message]
    return "; ".join([message, *extra])


# -- decoding -----------------------------------------------------------------------------------------------
def decode_object(content: bytes) -> dict[str, Any]:
    """One object's JSON as a dict, without `metadata.managedFields`. Raises ValueError when not an object."""
    obj = msgspec.json.decode(content)
    if not isinstance(obj, dict):
        raise ValueError(f"not a JSON object: {content[:80]!r}")
    return _without_managed_fields(obj)


def decode_page(content: bytes) -> tuple[list[dict[str, Any]], str, str | None]:
    """A list page's items (without managed fields), the list's resourceVersion and its continue token."""
    page = _page_decoder.decode(content)
    return ([_without_managed_fields(item) for item in page.items or ()], page.metadata.resourceVersion,
            page.metadata.continue_token or None)


def object_version(obj: Mapping[str, Any]) -> str | None:
    """An object's `metadata.resourceVersion`."""
    return (obj.get("metadata") or {}).get("resourceVersion")


def _without_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("managedFields", None)
    return obj


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""  # noqa: N815 - the Kubernetes field name
    continue_token: str | None = msgspec.field(default=None, name="continue")


class _Page(msgspec.Struct):
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[dict[str, Any]] | None = None


class _Cause(msgspec.Struct):
    field: str = ""
    message: str = ""
    reason: str = ""


class _Details(msgspec.Struct):
    name: str = ""
    causes: list[_Cause] = msgspec.field(default_factory=list)


class _Status(msgspec.Struct):
    """A `metav1.Status` as far as the refusal needs it."""

    code: int = 0
    reason: str = ""
    message: str = ""
    details: _Details | None = None


_page_decoder = msgspec.json.Decoder(_Page)
_status_decoder = msgspec.json.Decoder(_Status)


def _status(content: bytes) -> _Status:
    """The answer's Status; a body that is not one (a plain `404 page not found`) as its text."""
    try:
        return _status_decoder.decode(content)
    except msgspec.DecodeError:
        return _Status(message=content[:200].decode(errors="replace").strip())


class _Refused(Exception):
    """An HTTP error answer: its code and the port's error for it (a list's 410 needs the code)."""

    def __init__(self, code: int, error: Exception) -> None:
        super().__init__(str(error))
        self.code, self.error = code, error


def watched_kinds(names: Iterable[str]) -> list[str]:
    """The Karpenter kinds among `names` (a watch's `resource_versions` keys), in `KARPENTER_KINDS` order."""
    named = set(names)
    return [k.kind for k in KARPENTER_KINDS if k.kind in named]
