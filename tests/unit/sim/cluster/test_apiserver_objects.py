"""Karpenter's objects over the simulated API server's HTTP (`carpool.sim.cluster.objects_http` and the lists
and watches of `carpool.sim.cluster.apiserver`), answering as kube-apiserver answers with Karpenter's CRDs
loaded: codes, `metav1.Status` bodies, paged and label-selected lists, watches, a kind not installed."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from datetime import UTC, datetime
from typing import Any

import pytest

from carpool.karpenter_objects import NODECLAIM, NODEPOOL, TERMINATION_FINALIZER
from carpool.sim.cluster.apiserver import SimApiServer, bookmark_object, watch_line
from carpool.sim.cluster.objects_http import NOT_SERVED
from carpool.sim.cluster.simulated import SimulatedCluster

NOW = datetime(2026, 5, 1, tzinfo=UTC)
POOLS = "/apis/karpenter.sh/v1/nodepools"
CLAIMS = "/apis/karpenter.sh/v1/nodeclaims"
MERGE = "application/merge-patch+json"


def nodepool(name: str = "default", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name, "labels": {"team": name}},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": []}}, **spec}}


@pytest.fixture
def server() -> SimApiServer:
    return SimApiServer(SimulatedCluster(lambda: NOW))


def call(server: SimApiServer, method: str, url: str, body: Any = None, content_type: str = "application/json"):
    data = json.dumps(body).encode() if body is not None else b""
    return server.answer(method, url, content_type, data)


def test_post_creates_with_201_and_the_object_as_stored(server):
    created = call(server, "POST", POOLS, nodepool())
    assert created.code == 201
    assert created.body["metadata"]["generation"] == 1 and created.body["metadata"]["uid"]
    assert created.body["spec"]["disruption"]["consolidateAfter"] == "0s"  # the CRD's default
    got = call(server, "GET", f"{POOLS}/default")
    assert got.code == 200 and got.body == created.body


def test_post_of_a_name_taken_is_409_already_exists(server):
    call(server, "POST", POOLS, nodepool())
    again = call(server, "POST", POOLS, nodepool())
    assert again.code == 409 and again.body["reason"] == "AlreadyExists"
    assert again.body["message"] == 'nodepools.karpenter.sh "default" already exists'
    assert again.body["details"] == {"name": "default", "group": "karpenter.sh", "kind": "nodepools"}


def test_post_refused_by_the_schema_is_422_with_a_cause_per_field(server):
    refused = call(server, "POST", POOLS, nodepool(weight=0, limits={"cpu": "lots"}))
    assert refused.code == 422 and refused.body["reason"] == "Invalid"
    assert refused.body["message"].startswith('NodePool.karpenter.sh "default" is invalid: [')
    details = refused.body["details"]
    assert details["kind"] == "NodePool" and details["group"] == "karpenter.sh" and details["name"] == "default"
    fields = {c["field"]: c["reason"] for c in details["causes"]}
    assert fields == {"spec.weight": "FieldValueInvalid", "spec.limits[cpu]": "FieldValueInvalid"}
    assert call(server, "GET", f"{POOLS}/default").code == 404


def test_post_of_another_kind_is_400(server):
    wrong = {**nodepool(), "kind": "NodeClaim"}
    assert call(server, "POST", POOLS, wrong).code == 400
    no_kind = {k: v for k, v in nodepool().items() if k != "kind"}
    answer = call(server, "POST", POOLS, no_kind)
    assert answer.code == 400 and "Object 'Kind' is missing" in answer.body["message"]


def test_get_of_a_missing_object_is_404_as_worded_by_the_server(server):
    answer = call(server, "GET", f"{POOLS}/nope")
    assert answer.code == 404 and answer.body["message"] == 'nodepools.karpenter.sh "nope" not found'
    assert answer.body["details"] == {"name": "nope", "group": "karpenter.sh", "kind": "nodepools"}
    assert call(server, "PATCH", f"{POOLS}/nope", {"spec": {}}, MERGE).code == 404
    assert call(server, "DELETE", f"{POOLS}/nope").code == 404


def test_merge_patch_of_spec_and_of_status(server):
    call(server, "POST", POOLS, nodepool())
    patched = call(server, "PATCH", f"{POOLS}/default", {"spec": {"weight": 4}, "status": {"nodes": 9}}, MERGE)
    assert patched.code == 200 and patched.body["spec"]["weight"] == 4 and "status" not in patched.body
    assert patched.body["metadata"]["generation"] == 2
    status = call(server, "PATCH", f"{POOLS}/default/status", {"status": {"nodes": 2}, "spec": {"weight": 9}}, MERGE)
    assert status.code == 200 and status.body["status"] == {"nodes": 2} and status.body["spec"]["weight"] == 4
    assert status.body["metadata"]["generation"] == 2
    assert call(server, "GET", f"{POOLS}/default/status").body["status"] == {"nodes": 2}
    cleared = call(server, "PATCH", f"{POOLS}/default/status", {"status": None}, MERGE)
    assert cleared.code == 200 and "status" not in cleared.body


def test_patch_types_other_than_merge_patch_are_415(server):
    call(server, "POST", POOLS, nodepool())
    answer = call(server, "PATCH", f"{POOLS}/default", {"spec": {"weight": 4}},
                  "application/strategic-merge-patch+json")
    assert answer.code == 415 and answer.body["reason"] == "UnsupportedMediaType"


def test_patch_with_a_stale_resource_version_is_409_conflict(server):
    read = call(server, "POST", POOLS, nodepool()).body["metadata"]["resourceVersion"]
    call(server, "PATCH", f"{POOLS}/default", {"spec": {"weight": 4}}, MERGE)
    stale = call(server, "PATCH", f"{POOLS}/default", {"metadata": {"resourceVersion": read}, "spec": {"weight": 5}}, MERGE)
    assert stale.code == 409 and stale.body["reason"] == "Conflict"
    assert stale.body["message"].startswith('Operation cannot be fulfilled on nodepools.karpenter.sh "default"')


def test_delete_answers_a_status_or_the_object_held_by_finalizers(server):
    pool = call(server, "POST", POOLS, nodepool()).body
    gone = call(server, "DELETE", f"{POOLS}/default")
    assert gone.code == 200 and gone.body["status"] == "Success"
    assert gone.body["details"] == {"name": "default", "group": "karpenter.sh", "kind": "nodepools",
                                    "uid": pool["metadata"]["uid"]}
    held = nodepool("held")
    held["metadata"]["finalizers"] = [TERMINATION_FINALIZER]
    call(server, "POST", POOLS, held)
    marked = call(server, "DELETE", f"{POOLS}/held")
    assert marked.code == 200 and marked.body["kind"] == "NodePool" and marked.body["metadata"]["deletionTimestamp"]
    adding = call(server, "PATCH", f"{POOLS}/held", {"metadata": {"finalizers": [TERMINATION_FINALIZER, "a.io/b"]}}, MERGE)
    assert adding.code == 422 and adding.body["details"]["causes"][0] == {
        "reason": "FieldValueForbidden", "field": "metadata.finalizers",
        "message": 'Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"a.io/b"}'}
    removed = call(server, "PATCH", f"{POOLS}/held", {"metadata": {"finalizers": None}}, MERGE)
    assert removed.code == 200 and call(server, "GET", f"{POOLS}/held").code == 404


def test_lists_page_with_limit_and_continue_and_select_by_label(server):
    for name in ("c", "a", "b"):
        call(server, "POST", POOLS, nodepool(name))
    first = call(server, "GET", f"{POOLS}?limit=2")
    assert first.code == 200 and first.body["kind"] == "NodePoolList" and first.body["apiVersion"] == "karpenter.sh/v1"
    assert [o["metadata"]["name"] for o in first.body["items"]] == ["a", "b"]
    token = first.body["metadata"]["continue"]
    rest = call(server, "GET", f"{POOLS}?limit=2&continue={token}")
    assert [o["metadata"]["name"] for o in rest.body["items"]] == ["c"] and "continue" not in rest.body["metadata"]
    assert rest.body["metadata"]["resourceVersion"] == first.body["metadata"]["resourceVersion"]
    selected = call(server, "GET", f"{POOLS}?labelSelector=team%20in%20(a,c)")
    assert [o["metadata"]["name"] for o in selected.body["items"]] == ["a", "c"]
    by_field = call(server, "GET", f"{POOLS}?fieldSelector=spec.weight%3D1")
    assert by_field.code == 400 and by_field.body["message"] == "field label not supported: spec.weight"


def test_a_kind_whose_crd_is_not_installed_is_404_on_every_path(server):
    server.cluster.karpenter.installed.discard(NODECLAIM)
    for method, url in (("GET", CLAIMS), ("POST", CLAIMS), ("GET", f"{CLAIMS}/x"), ("DELETE", f"{CLAIMS}/x")):
        answer = call(server, method, url, {"kind": "NodeClaim", "apiVersion": "karpenter.sh/v1"} if method == "POST" else None)
        assert (answer.code, answer.body["message"]) == (404, NOT_SERVED)
    refused, lines = server.watch(f"{CLAIMS}?watch=true&resourceVersion=0")
    assert refused is not None and refused.code == 404 and list(lines) == []
    assert call(server, "GET", POOLS).code == 200  # the others are served


def test_watch_streams_karpenter_changes_after_a_version(server):
    call(server, "POST", POOLS, nodepool("before"))
    since = server.cluster.resource_version
    call(server, "POST", POOLS, nodepool())
    call(server, "PATCH", f"{POOLS}/default", {"spec": {"weight": 3}}, MERGE)
    server.cluster.add_node({"metadata": {"name": "n1"}})  # another kind: not in this watch
    refused, lines = server.watch(f"{POOLS}?watch=true&resourceVersion={since}&timeoutSeconds=0")
    assert refused is None
    sent = [json.loads(line) for line in lines]
    assert [(e["type"], e["object"]["kind"], e["object"]["spec"].get("weight")) for e in sent] == [("ADDED", "NodePool", 3)]


def test_a_custom_resource_bookmark_carries_its_api_version_and_version_only():
    assert json.loads(watch_line("BOOKMARK", bookmark_object("NodeClaim", "7"))) == {
        "type": "BOOKMARK", "object": {"kind": "NodeClaim", "apiVersion": "karpenter.sh/v1",
                                       "metadata": {"resourceVersion": "7"}}}


def test_node_delete_answers_the_node_while_finalizers_hold_it(server):
    server.cluster.add_node({"metadata": {"name": "n1", "uid": "u1", "finalizers": [TERMINATION_FINALIZER]}})
    held = call(server, "DELETE", "/api/v1/nodes/n1")
    assert held.code == 200 and held.body["metadata"]["deletionTimestamp"]
    call(server, "PATCH", "/api/v1/nodes/n1", {"metadata": {"finalizers": None}}, MERGE)
    assert call(server, "GET", "/api/v1/nodes/n1").code == 404
    server.cluster.add_node({"metadata": {"name": "n2", "uid": "u2"}})
    gone = call(server, "DELETE", "/api/v1/nodes/n2")
    assert gone.code == 200 and gone.body["details"] == {"name": "n2", "kind": "nodes", "uid": "u2"}


def test_over_http_with_a_real_client(server):
    """The same answers through the socket (what lightkube reads)."""
    with server:
        request = urllib.request.Request(server.url + POOLS, data=json.dumps(nodepool()).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request) as answer:
            assert answer.status == 201 and json.load(answer)["metadata"]["name"] == "default"
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(server.url + f"{POOLS}/nope")
        assert missing.value.code == 404 and json.load(missing.value)["reason"] == "NotFound"
    assert server.cluster.get_object(NODEPOOL, "default") is not None
