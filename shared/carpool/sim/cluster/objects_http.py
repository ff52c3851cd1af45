"""The HTTP face of Karpenter's objects in the simulated cluster: what kube-apiserver answers under
`/apis/karpenter.sh/v1/nodepools[/NAME[/status]]`, `/apis/karpenter.k8s.aws/v1/ec2nodeclasses[...]` and
`/apis/karpenter.sh/v1/nodeclaims[...]` (lists and watches are served by `carpool.sim.cluster.apiserver`
like every other kind's; this module answers the rest).

The answers follow the generic registry's (`staging/src/k8s.io/apiserver/pkg/registry/generic/registry/
store.go`, `pkg/endpoints/handlers`): POST 201 with the object as stored; GET 200; PATCH (JSON merge patch
only: a custom resource has no strategic merge patch) 200, of the object or its status subresource; DELETE
200 with a `Status` of Success naming the object when it went at once, 200 with the object when finalizers
hold it; and the `metav1.Status` failures: 404 NotFound (`nodepools.karpenter.sh "x" not found`), 409
AlreadyExists / Conflict, 415 for another patch type, 422 Invalid with `details.causes`, 400 for a body
that is not the kind of the URL. A kind whose CRD is not installed answers 404 "the server could not find
the requested resource" on every path, as a server without the CRD does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from carpool.karpenter_objects import KARPENTER_KINDS, ObjectConflict, ObjectGone, ObjectInvalid, ObjectKind
from carpool.sim.cluster.api_answers import ApiAnswer, api_status
from carpool.sim.cluster.objects import AlreadyExists, ObjectInvalidProblems, field_errors

if TYPE_CHECKING:
    from carpool.sim.cluster.simulated import SimulatedCluster

__all__ = ["MERGE_PATCH", "NOT_SERVED", "karpenter_kind_at", "object_answer", "served"]

MERGE_PATCH: Final = "application/merge-patch+json"
#: what the API server answers for a path it serves nothing under
NOT_SERVED: Final = "the server could not find the requested resource"
_PATCH_TYPES: Final = ("accepted media types include: application/json-patch+json, application/merge-patch+json, "
                       "application/apply-patch+yaml")


def karpenter_kind_at(segments: list[str]) -> ObjectKind | None:
    """The Karpenter kind whose collection the path (`apis`, group, version, plural, ...) is under."""
    if len(segments) < 4 or segments[0] != "apis":
        return None
    return next((k for k in KARPENTER_KINDS if [k.group, k.version, k.plural] == segments[1:4]), None)


def served(cluster: SimulatedCluster, kind: ObjectKind) -> bool:
    return kind in cluster.karpenter.installed


def object_answer(cluster: SimulatedCluster, method: str, kind: ObjectKind, name: str | None, status: bool,
                  content_type: str, body: bytes) -> ApiAnswer:
    """One request on a collection (`name` None: POST) or an object (GET, PATCH, DELETE; `status`: its
    status subresource)."""
    if not served(cluster, kind):
        return api_status(404, NOT_SERVED, "NotFound")
    try:
        if name is None:
            return _create(cluster, kind, method, body)
        if method == "GET":
            found = cluster.get_object(kind, name)
            return ApiAnswer(200, found) if found is not None else _not_found(kind, name)
        if method == "PATCH":
            return _patch(cluster, kind, name, status, content_type, body)
        if method == "DELETE" and not status:
            return _delete(cluster, kind, name)
    except ObjectGone:
        return _not_found(kind, name or "")
    except AlreadyExists as e:
        return api_status(409, f'{kind.plural}.{kind.group} "{e.name}" already exists', "AlreadyExists",
                          _details(kind, e.name))
    except ObjectConflict as e:
        return api_status(409, (f'Operation cannot be fulfilled on {kind.plural}.{kind.group} "{e.name}": the object '
                                "has been modified; please apply your changes to the latest version and try again"),
                          "Conflict", _details(kind, e.name))
    except ObjectInvalid as e:
        return _invalid(kind, e)
    return api_status(405, f"the server does not allow this method on the requested resource ({method})",
                      "MethodNotAllowed")


def _create(cluster: SimulatedCluster, kind: ObjectKind, method: str, body: bytes) -> ApiAnswer:
    if method != "POST":
        return api_status(405, f"the server does not allow this method on the requested resource ({method})",
                          "MethodNotAllowed")
    obj = _decoded(body)
    if obj is None:
        return api_status(400, "the body of the request is not a JSON object", "BadRequest")
    refused = _not_of_kind(kind, obj)
    if refused is not None:
        return refused
    return ApiAnswer(201, cluster.create_object(kind, obj))


def _patch(cluster: SimulatedCluster, kind: ObjectKind, name: str, status: bool, content_type: str,
           body: bytes) -> ApiAnswer:
    if content_type.split(";")[0].strip() != MERGE_PATCH:
        return api_status(415, f"the body of the request was in an unknown format - {_PATCH_TYPES}",
                          "UnsupportedMediaType")
    patch = _decoded(body)
    if patch is None:
        return api_status(400, "the body of the request is not a JSON merge patch object", "BadRequest")
    wanted = (patch.get("metadata") or {}).get("resourceVersion")
    if status:
        if "status" not in patch:  # a status patch that names no status leaves it as it is
            found = cluster.get_object(kind, name)
            return ApiAnswer(200, found) if found is not None else _not_found(kind, name)
        return ApiAnswer(200, cluster.patch_status(kind, name, patch["status"] or {}, resource_version=wanted)
                         if patch["status"] is not None else _cleared_status(cluster, kind, name, wanted))
    return ApiAnswer(200, cluster.patch_object(kind, name, patch, resource_version=wanted))


def _cleared_status(cluster: SimulatedCluster, kind: ObjectKind, name: str, wanted: str | None) -> dict[str, Any]:
    """`{"status": null}` through the status subresource: every status field removed."""
    current = cluster.get_object(kind, name)
    if current is None:
        raise ObjectGone(kind, name)
    return cluster.patch_status(kind, name, dict.fromkeys(current.get("status") or {}), resource_version=wanted)


def _delete(cluster: SimulatedCluster, kind: ObjectKind, name: str) -> ApiAnswer:
    """DELETE: the object when finalizers hold it, else a `Status` naming it (`finalizeDelete`)."""
    result = cluster.object_deletion(kind, name)
    if result is None:
        return _not_found(kind, name)
    obj, gone = result
    if not gone:
        return ApiAnswer(200, obj)
    return ApiAnswer(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                           "details": {**_details(kind, name), "uid": obj["metadata"].get("uid", "")}})


def _decoded(body: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(body or b"{}")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _not_of_kind(kind: ObjectKind, obj: Mapping[str, Any]) -> ApiAnswer | None:
    """400 for a body that is not the URL's kind, as the API server's decoder refuses it."""
    if not obj.get("kind"):
        return api_status(400, f"Object 'Kind' is missing in '{json.dumps(obj, separators=(',', ':'))}'", "BadRequest")
    if obj.get("apiVersion") != kind.api_version or obj.get("kind") != kind.kind:
        return api_status(400, (f"the API version in the data ({obj.get('apiVersion')}) does not match the expected "
                                f"API version ({kind.api_version})") if obj.get("apiVersion") != kind.api_version
                          else f"the kind in the data ({obj.get('kind')}) does not match the expected kind ({kind.kind})",
                          "BadRequest")
    return None


def _details(kind: ObjectKind, name: str) -> dict[str, Any]:
    """`details` of a Status about one object: the resource (plural) in `kind`, as the API server writes it."""
    return {"name": name, "group": kind.group, "kind": kind.plural}


def _not_found(kind: ObjectKind, name: str) -> ApiAnswer:
    return api_status(404, f'{kind.plural}.{kind.group} "{name}" not found', "NotFound", _details(kind, name))


def _invalid(kind: ObjectKind, e: ObjectInvalid) -> ApiAnswer:
    """422 as `errors.NewInvalid` writes it: the Kind (not the resource) in `details.kind`, one cause per
    field error."""
    causes = field_errors(e.problems) if isinstance(e, ObjectInvalidProblems) else []
    return api_status(422, f'{kind.kind}.{kind.group} "{e.name}" is invalid: {e.message}', "Invalid",
                      {"name": e.name, "group": kind.group, "kind": kind.kind, "causes": causes})
