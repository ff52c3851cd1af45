"""`LightkubeKarpenterObjects` and the Karpenter kinds of `LightkubeCluster.watch` against an in-process fake
API server (httpx mock transport): the requests the adapter sends (paths, merge-patch content type,
preconditions, paging, propagation) and how each answer of kube-apiserver maps to the port's errors. The
answers' bodies are the real server's (seen on kube-apiserver v1.24 with Karpenter v1.14.1's CRDs loaded,
`tests/integration/test_karpenter_objects_api.py` checks them side by side)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2
import pytest
from lightkube import ApiError, AsyncClient, Client

from carpool.adapters.k8s.cluster import ClusterAccess, LightkubeCluster
from carpool.adapters.k8s.karpenter_objects import MERGE_PATCH, LightkubeKarpenterObjects, with_precondition
from carpool.karpenter_objects import (
    EC2NODECLASS,
    NODECLAIM,
    NODEPOOL,
    KindNotServed,
    ObjectConflict,
    ObjectGone,
    ObjectInvalid,
)

SERVER = "https://k8s.test"
POOLS = "/apis/karpenter.sh/v1/nodepools"


class FixedToken:
    stale = False

    def token(self) -> str:
        return "k8s-aws-v1.test"


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> httpx2.Response:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": message, "reason": reason, "code": code}
    if details is not None:
        body["details"] = details
    return httpx2.Response(code, json=body)


def not_found(name: str, plural: str = "nodepools", group: str = "karpenter.sh") -> httpx2.Response:
    return status(404, "NotFound", f'{plural}.{group} "{name}" not found',
                  {"name": name, "group": group, "kind": plural})


#: what kube-apiserver answers for a path no CRD serves after v1.24 (its `notfoundhandler`); v1.24 answers
#: a plain-text `404 page not found` (`test_a_plain_text_404_is_kind_not_served_too`)
NOT_SERVED = ("NotFound", "the server could not find the requested resource")


def pool(name: str, rv: str = "5", generation: int = 1) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": name, "resourceVersion": rv, "generation": generation, "uid": f"uid-{name}",
                         "managedFields": [{"manager": "kubectl", "operation": "Update"}]},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                            "name": "default"}, "requirements": []}}}}


class FakeApi:
    """Routes requests by (method, path); records every request with its decoded body."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Callable[[httpx2.Request], Any]] = {}
        self.requests: list[httpx2.Request] = []

    def on(self, method: str, path: str, handler: Callable[[httpx2.Request], Any]) -> None:
        self.routes[(method, path)] = handler

    def __call__(self, request: httpx2.Request) -> Any:
        self.requests.append(request)
        handler = self.routes.get((request.method, request.url.path))
        if handler is None:
            return status(404, *NOT_SERVED)
        return handler(request)

    def body(self, index: int = -1) -> Any:
        return json.loads(self.requests[index].content)


def cluster_on(api: FakeApi) -> LightkubeCluster:
    transport = httpx2.MockTransport(api)
    return LightkubeCluster("test", "us-east-1", access=ClusterAccess(SERVER, ""), tokens=FixedToken(),
                            client_factory=lambda config: Client(config=config, field_manager="carpool",
                                                                 transport=transport),
                            async_client_factory=lambda config: AsyncClient(config=config, transport=transport))


def objects_on(api: FakeApi) -> LightkubeKarpenterObjects:
    return LightkubeKarpenterObjects(cluster_on(api).client)


# -- reads --------------------------------------------------------------------------------------------------
def test_a_list_is_paged_by_500_and_its_items_come_without_managed_fields() -> None:
    api = FakeApi()

    def pages(request: httpx2.Request) -> httpx2.Response:
        token = request.url.params.get("continue")
        items, meta = ([pool("a", "3"), pool("b", "4")], {"resourceVersion": "9", "continue": "page2"}) if not token \
            else ([pool("c", "6")], {"resourceVersion": "9"})
        return httpx2.Response(200, json={"apiVersion": "karpenter.sh/v1", "kind": "NodePoolList", "metadata": meta,
                                          "items": items})

    api.on("GET", POOLS, pages)
    listed = objects_on(api).list_objects(NODEPOOL)
    assert [o["metadata"]["name"] for o in listed.items] == ["a", "b", "c"]
    assert listed.resource_version == "9"
    assert all("managedFields" not in o["metadata"] for o in listed.items)
    assert [dict(r.url.params) for r in api.requests] == [{"limit": "500"}, {"limit": "500", "continue": "page2"}]


def test_a_list_whose_continue_token_expired_starts_again_from_the_first_page() -> None:
    api, expired = FakeApi(), [1]

    def pages(request: httpx2.Request) -> httpx2.Response:
        if request.url.params.get("continue"):
            if expired:
                expired.pop()
                return status(410, "Expired", "The provided continue parameter is too old to display a consistent "
                                              "list result.")
            return httpx2.Response(200, json={"metadata": {"resourceVersion": "12"}, "items": [pool("b")]})
        return httpx2.Response(200, json={"metadata": {"resourceVersion": "12", "continue": "t"}, "items": [pool("a")]})

    api.on("GET", POOLS, pages)
    listed = objects_on(api).list_objects(NODEPOOL)
    assert [o["metadata"]["name"] for o in listed.items] == ["a", "b"], "the first page is read again, not kept"
    assert len(api.requests) == 4


def test_an_empty_list_with_null_items_is_empty() -> None:
    api = FakeApi()
    api.on("GET", "/apis/karpenter.k8s.aws/v1/ec2nodeclasses",
           lambda r: httpx2.Response(200, json={"metadata": {"resourceVersion": "3"}, "items": None}))
    assert objects_on(api).list_objects(EC2NODECLASS) == ([], "3")


def test_a_kind_no_crd_serves_is_kind_not_served_on_list_get_and_writes() -> None:
    objects = objects_on(FakeApi())  # every path answers the server's "could not find the requested resource"
    for call in (lambda: objects.list_objects(NODECLAIM), lambda: objects.get_object(NODECLAIM, "x"),
                 lambda: objects.patch_object(NODECLAIM, "x", {"metadata": {"labels": {"a": "b"}}}),
                 lambda: objects.delete_object(NODECLAIM, "x"),
                 lambda: objects.create_object(NODECLAIM, {"metadata": {"name": "x"}})):
        with pytest.raises(KindNotServed) as refused:
            call()
        assert "nodeclaims.karpenter.sh/v1" in str(refused.value) and "karpenter-crd" in str(refused.value)


def test_a_plain_text_404_is_kind_not_served_too() -> None:
    api = FakeApi()
    api.on("GET", POOLS, lambda r: httpx2.Response(404, text="404 page not found\n"))
    with pytest.raises(KindNotServed):
        objects_on(api).list_objects(NODEPOOL)


def test_get_answers_the_object_or_none_when_the_server_names_it_not_found() -> None:
    api = FakeApi()
    api.on("GET", f"{POOLS}/a", lambda r: httpx2.Response(200, json=pool("a", "7")))
    api.on("GET", f"{POOLS}/gone", lambda r: not_found("gone"))
    objects = objects_on(api)
    found = objects.get_object(NODEPOOL, "a")
    assert found is not None and found["metadata"]["resourceVersion"] == "7" and "managedFields" not in found["metadata"]
    assert objects.get_object(NODEPOOL, "gone") is None


def test_forbidden_is_the_servers_error_not_a_missing_object() -> None:
    api = FakeApi()
    api.on("DELETE", f"{POOLS}/a", lambda r: status(403, "Forbidden", 'nodepools.karpenter.sh "a" is forbidden: User '
                                                    '"carpool" cannot delete resource "nodepools"'))
    with pytest.raises(ApiError) as refused:
        objects_on(api).delete_object(NODEPOOL, "a")
    assert refused.value.status.code == 403 and "cannot delete" in str(refused.value)


# -- writes -------------------------------------------------------------------------------------------------
def test_create_posts_the_object_with_its_api_version_and_kind_as_carpool() -> None:
    api = FakeApi()
    api.on("POST", POOLS, lambda r: httpx2.Response(201, json={**json.loads(r.content),
                                                               "metadata": {"name": "a", "resourceVersion": "8",
                                                                            "generation": 1}}))
    created = objects_on(api).create_object(NODEPOOL, {"metadata": {"name": "a"}, "spec": {"weight": 5}})
    assert created["metadata"]["resourceVersion"] == "8"
    assert api.body() == {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "a"},
                          "spec": {"weight": 5}}
    assert api.requests[-1].url.params["fieldManager"] == "carpool"


def test_a_create_of_a_name_that_exists_is_a_conflict() -> None:
    api = FakeApi()
    api.on("POST", POOLS, lambda r: status(409, "AlreadyExists", 'nodepools.karpenter.sh "a" already exists',
                                           {"name": "a", "group": "karpenter.sh", "kind": "nodepools"}))
    with pytest.raises(ObjectConflict) as refused:
        objects_on(api).create_object(NODEPOOL, {"metadata": {"name": "a"}})
    assert refused.value.name == "a" and "already exists" in str(refused.value)


def test_an_invalid_object_is_refused_with_the_servers_message_and_each_cause() -> None:
    api = FakeApi()
    message = ('NodePool.karpenter.sh "bad" is invalid: spec.weight: Invalid value: 200: spec.weight in body should '
               'be less than or equal to 100')
    api.on("POST", POOLS, lambda r: status(422, "Invalid", message, {"name": "bad", "group": "karpenter.sh",
                                                                      "kind": "NodePool", "causes": [
        {"reason": "FieldValueInvalid", "field": "spec.weight",
         "message": "Invalid value: 200: spec.weight in body should be less than or equal to 100"},
        {"reason": "FieldValueRequired", "field": "spec.template", "message": "Required value"}]}))
    with pytest.raises(ObjectInvalid) as refused:
        objects_on(api).create_object(NODEPOOL, {"metadata": {"name": "bad"}, "spec": {"weight": 200}})
    assert refused.value.message == f"{message}; spec.template: Required value"
    assert refused.value.name == "bad"


def test_a_patch_is_a_merge_patch_and_a_precondition_is_its_resource_version() -> None:
    api = FakeApi()
    api.on("PATCH", f"{POOLS}/a", lambda r: httpx2.Response(200, json=pool("a", "11", generation=2)))
    written = objects_on(api).patch_object(NODEPOOL, "a", {"metadata": {"labels": {"team": "x"}}, "spec": {"weight": 3}},
                                           resource_version="10")
    assert written["metadata"]["generation"] == 2
    request = api.requests[-1]
    assert request.headers["Content-Type"] == MERGE_PATCH
    assert api.body() == {"metadata": {"labels": {"team": "x"}, "resourceVersion": "10"}, "spec": {"weight": 3}}
    objects_on(api).patch_object(NODEPOOL, "a", {"spec": {"weight": 4}})
    assert api.body() == {"spec": {"weight": 4}}, "no precondition unless asked"


def test_a_stale_precondition_is_a_conflict_and_a_gone_object_gone() -> None:
    api = FakeApi()
    api.on("PATCH", f"{POOLS}/a", lambda r: status(
        409, "Conflict", 'Operation cannot be fulfilled on nodepools.karpenter.sh "a": the object has been modified; '
                         'please apply your changes to the latest version and try again',
        {"name": "a", "group": "karpenter.sh", "kind": "nodepools"}))
    api.on("PATCH", f"{POOLS}/gone/status", lambda r: not_found("gone"))
    objects = objects_on(api)
    with pytest.raises(ObjectConflict) as refused:
        objects.patch_object(NODEPOOL, "a", {"spec": {"weight": 1}}, resource_version="1")
    assert "the object has been modified" in str(refused.value)
    with pytest.raises(ObjectGone):
        objects.patch_status(NODEPOOL, "gone", {"nodes": "0"})


def test_patch_status_goes_through_the_status_subresource() -> None:
    api = FakeApi()
    api.on("PATCH", f"{POOLS}/a/status", lambda r: httpx2.Response(200, json={**pool("a", "12"),
                                                                              **json.loads(r.content)}))
    conditions = [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                   "lastTransitionTime": "2026-05-01T12:00:00Z", "observedGeneration": 1}]
    written = objects_on(api).patch_status(NODEPOOL, "a", {"conditions": conditions, "nodes": "2"}, resource_version="11")
    assert written["status"]["nodes"] == "2"
    assert api.requests[-1].headers["Content-Type"] == MERGE_PATCH
    assert api.body() == {"status": {"conditions": conditions, "nodes": "2"}, "metadata": {"resourceVersion": "11"}}


def test_delete_propagates_in_the_background_and_a_gone_object_is_deleted() -> None:
    api = FakeApi()
    api.on("DELETE", "/apis/karpenter.sh/v1/nodeclaims/c1",
           lambda r: httpx2.Response(200, json={"metadata": {"name": "c1", "deletionTimestamp": "2026-05-01T12:00:00Z",
                                                             "finalizers": ["karpenter.sh/termination"]}}))
    api.on("DELETE", "/apis/karpenter.sh/v1/nodeclaims/gone", lambda r: not_found("gone", "nodeclaims"))
    objects = objects_on(api)
    objects.delete_object(NODECLAIM, "c1")
    objects.delete_object(NODECLAIM, "gone")
    assert [r.url.params["propagationPolicy"] for r in api.requests] == ["Background", "Background"]


def test_with_precondition_leaves_the_callers_patch_alone() -> None:
    patch = {"metadata": {"labels": {"a": "b"}}}
    assert with_precondition(patch, "4") == {"metadata": {"labels": {"a": "b"}, "resourceVersion": "4"}}
    assert with_precondition(patch, "") == patch == with_precondition(patch, None)
    assert patch == {"metadata": {"labels": {"a": "b"}}}


def test_nothing_is_requested_until_first_used() -> None:
    api = FakeApi()
    LightkubeKarpenterObjects(cluster_on(api).client)
    assert api.requests == []


# -- the watch ------------------------------------------------------------------------------------------------
def watch_lines(*events: tuple[str, dict[str, Any]]) -> bytes:
    return b"".join(json.dumps({"type": t, "object": o}).encode() + b"\n" for t, o in events)


async def quiet_server() -> AsyncIterator[bytes]:
    await asyncio.sleep(3600)
    yield b""


def consume(cluster: LightkubeCluster, versions: dict[str, str], timeout: float) -> list[Any]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.extend(cluster.watch(versions, timeout))
        except Exception as e:  # noqa: BLE001 - handed to the assertion below
            out.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=20)
    assert not thread.is_alive(), "watch did not stop at its deadline"
    return out


def quiet(request: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(200, content=quiet_server())


def test_a_named_karpenter_kind_is_watched_and_its_objects_come_as_dicts() -> None:
    api, seen = FakeApi(), []

    def pools(request: httpx2.Request) -> httpx2.Response:
        seen.append(dict(request.url.params))
        if len(seen) > 1:
            return quiet(request)
        return httpx2.Response(200, content=watch_lines(
            ("BOOKMARK", {"kind": "NodePool", "apiVersion": "karpenter.sh/v1", "metadata": {"resourceVersion": "30"}}),
            ("ADDED", pool("a", "31")), ("MODIFIED", pool("a", "32", generation=2)), ("DELETED", pool("a", "33"))))

    api.on("GET", POOLS, pools)
    api.on("GET", "/api/v1/pods", quiet)
    api.on("GET", "/api/v1/nodes", quiet)
    cluster = cluster_on(api)
    events = consume(cluster, {"Pod": "1", "Node": "1", "NodePool": "29"}, timeout=0.5)
    assert [(e.type, e.kind, e.resource_version) for e in events] == [
        ("ADDED", "NodePool", "31"), ("MODIFIED", "NodePool", "32"), ("DELETED", "NodePool", "33")]
    assert all(isinstance(e.obj, dict) and "managedFields" not in e.obj["metadata"] for e in events)
    assert events[1].obj["metadata"]["generation"] == 2
    assert seen[0]["resourceVersion"] == "29" and seen[0]["allowWatchBookmarks"] == "true"
    assert cluster.resource_versions["NodePool"] == "33"
    watched = {r.url.path for r in api.requests}
    assert watched == {"/api/v1/pods", "/api/v1/nodes", POOLS}, "only the Karpenter kinds named are watched"


def test_a_karpenter_kind_named_without_a_version_is_watched_from_now() -> None:
    api = FakeApi()
    asked: list[dict[str, str]] = []
    api.on("GET", "/apis/karpenter.sh/v1/nodeclaims", lambda r: asked.append(dict(r.url.params)) or quiet(r))
    api.on("GET", "/api/v1/pods", quiet)
    api.on("GET", "/api/v1/nodes", quiet)
    consume(cluster_on(api), {"Pod": "1", "Node": "1", "NodeClaim": ""}, timeout=0.3)
    assert asked and "resourceVersion" not in asked[0]


def test_a_410_relists_the_karpenter_kind_as_dicts() -> None:
    api = FakeApi()

    def claims(request: httpx2.Request) -> httpx2.Response:
        if "watch" not in request.url.params:
            return httpx2.Response(200, json={"metadata": {"resourceVersion": "90"}, "items": [
                {"metadata": {"name": "c1", "resourceVersion": "80", "managedFields": []}}]})
        if request.url.params.get("resourceVersion") == "5":
            return status(410, "Expired", "too old resource version: 5 (80)")
        return quiet(request)

    api.on("GET", "/apis/karpenter.sh/v1/nodeclaims", claims)
    api.on("GET", "/api/v1/pods", quiet)
    api.on("GET", "/api/v1/nodes", quiet)
    cluster = cluster_on(api)
    events = consume(cluster, {"Pod": "1", "Node": "1", "NodeClaim": "5"}, timeout=0.6)
    assert [(e.type, e.kind, e.obj, e.resource_version) for e in events] == [
        ("ADDED", "NodeClaim", {"metadata": {"name": "c1", "resourceVersion": "80"}}, "80")]
    assert cluster.resource_versions["NodeClaim"] == "90"


def test_a_kind_the_server_does_not_serve_ends_its_watch_alone(caplog: pytest.LogCaptureFixture) -> None:
    api = FakeApi()
    api.on("GET", "/api/v1/pods", quiet)
    api.on("GET", "/api/v1/nodes", lambda r: httpx2.Response(200, content=watch_lines(
        ("ADDED", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "resourceVersion": "41"}})))
        if r.url.params.get("resourceVersion") == "40" else quiet(r))
    events = consume(cluster_on(api), {"Pod": "1", "Node": "40", "EC2NodeClass": "3"}, timeout=0.8)
    assert [(e.kind, e.obj.name) for e in events] == [("Node", "n1")]
    class_watches = [r for r in api.requests if "ec2nodeclasses" in r.url.path]
    assert len(class_watches) == 1, "a kind that is not served is not asked again and again"
    assert "EC2NodeClass watch ends" in caplog.text and "install Karpenter's CRDs" in caplog.text
