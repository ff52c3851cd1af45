"""Karpenter's objects over HTTP, side by side: the simulated API server (always) and the real kube-apiserver
with Karpenter v1.14.1's CRDs loaded (`../shared/kube-apiserver`; skipped without KUBE_ENDPOINT: `start.sh`,
load the CRDs, then `source <RUN>/env`). The same requests, the same answers: codes, the fields the server
sets, defaults, pruning, generation, the status subresource, finalizers and deletion, `metav1.Status` bodies,
paged lists, a watch's DELETED event; and a Node held by a finalizer.

Not compared here: the CRDs' CEL rules (the v1.24 test server has `CustomResourceValidationExpressions` off;
EKS's servers apply them, and so does the simulated one) and garbage collection (the test server runs no
kube-controller-manager)."""

from __future__ import annotations

import json
import os
import ssl
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx2
import pytest

from carpool.sim.cluster.apiserver import SimApiServer
from carpool.sim.cluster.simulated import SimulatedCluster

ENDPOINT = os.environ.get("KUBE_ENDPOINT", "")
NOW = datetime(2026, 5, 1, 12, 0, 5, tzinfo=UTC)
POOLS = "/apis/karpenter.sh/v1/nodepools"
MERGE = "application/merge-patch+json"
FINALIZER = "karpenter.sh/termination"


class Api:
    """One API server as the test sees it: raw requests with an admin's token."""

    def __init__(self, endpoint: str, http: httpx2.Client, token: str, cluster: SimulatedCluster | None = None) -> None:
        self.endpoint, self.http, self.token = endpoint, http, token
        #: the simulated server's cluster (its nodes come from kubelets, not from a POST)
        self.cluster = cluster

    def add_node(self, raw: dict[str, Any]) -> None:
        if self.cluster is not None:
            self.cluster.add_node(raw)
        else:
            assert self("POST", "/api/v1/nodes", raw).status_code == 201

    def __call__(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> httpx2.Response:
        data = json.dumps(body).encode() if body is not None else None
        return self.http.request(method, f"{self.endpoint}{path}", content=data,
                                 headers={"Authorization": f"Bearer {self.token}", "Content-Type": content_type})


@pytest.fixture
def simulated() -> Iterator[Api]:
    with SimApiServer(SimulatedCluster(lambda: NOW)) as server, httpx2.Client() as http:
        yield Api(server.url, http, "k8s-aws-v1.test", server.cluster)


@pytest.fixture
def real() -> Iterator[Api]:
    if not ENDPOINT:
        pytest.skip("needs a real kube-apiserver with Karpenter's CRDs (KUBE_ENDPOINT)")
    with httpx2.Client(verify=ssl.create_default_context(cafile=os.environ["KUBE_CA_FILE"])) as http:
        api = Api(ENDPOINT, http, os.environ["KUBE_TOKEN"])
        if api("GET", POOLS).status_code == 404:
            pytest.skip("the real kube-apiserver has no Karpenter CRDs loaded")
        yield api


@pytest.fixture(params=["simulated", "real"])
def api(request: pytest.FixtureRequest) -> Api:
    return request.getfixturevalue(request.param)


@pytest.fixture
def name(api: Api) -> Iterator[str]:
    """An object name of this test's own; whatever it left is deleted after it (finalizers removed)."""
    made = f"objects-sim-{uuid.uuid4().hex[:8]}"
    yield made
    for path in (f"{POOLS}/{made}", f"{POOLS}/{made}-b", f"/api/v1/nodes/{made}",
                 f"/apis/karpenter.k8s.aws/v1/ec2nodeclasses/{made}"):
        api("PATCH", path, {"metadata": {"finalizers": None}}, MERGE)
        api("DELETE", path)


def nodepool(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name, "labels": {"objects-sim": name}},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}},
                **spec}}


def test_create_sets_server_fields_defaults_prunes_and_drops_status(api: Api, name: str) -> None:
    given = nodepool(name)
    given["spec"]["template"]["spec"]["kubelet"] = {"maxPods": 10}
    given["status"] = {"nodes": 3}
    created = api("POST", POOLS, given)
    assert created.status_code == 201
    body = created.json()
    assert body["metadata"]["generation"] == 1 and body["metadata"]["uid"] and body["metadata"]["creationTimestamp"]
    assert "status" not in body and "kubelet" not in body["spec"]["template"]["spec"]
    assert body["spec"]["disruption"] == {"budgets": [{"nodes": "10%"}], "consolidateAfter": "0s",
                                          "consolidationPolicy": "WhenEmptyOrUnderutilized"}
    assert body["spec"]["template"]["spec"]["expireAfter"] == "720h"
    again = api("POST", POOLS, nodepool(name))
    assert again.status_code == 409
    assert {k: again.json()[k] for k in ("reason", "message", "details")} == {
        "reason": "AlreadyExists", "message": f'nodepools.karpenter.sh "{name}" already exists',
        "details": {"name": name, "group": "karpenter.sh", "kind": "nodepools"}}


def test_what_the_schema_refuses_is_422_naming_each_field(api: Api, name: str) -> None:
    given = nodepool(name, weight=0)
    del given["spec"]["template"]["spec"]["nodeClassRef"]
    refused = api("POST", POOLS, given)
    assert refused.status_code == 422
    body = refused.json()
    assert body["reason"] == "Invalid" and body["message"].startswith(f'NodePool.karpenter.sh "{name}" is invalid: ')
    assert "spec.weight: Invalid value: 0: spec.weight in body should be greater than or equal to 1" in body["message"]
    assert {(c["field"], c["reason"]) for c in body["details"]["causes"]} == {
        ("spec.weight", "FieldValueInvalid"), ("spec.template.spec.nodeClassRef", "FieldValueRequired")}
    assert (body["details"]["kind"], body["details"]["group"], body["details"]["name"]) == ("NodePool", "karpenter.sh", name)
    assert api("GET", f"{POOLS}/{name}").status_code == 404


def test_schema_refusals_word_for_word(api: Api, name: str) -> None:
    """Every kind of refusal of the schema (not its CEL rules), in the server's words: types, patterns,
    enums, bounds, item counts, required fields, in lists and maps; a 64-bit `maxPods` passes."""
    pool = nodepool(name, weight="heavy", limits={"cpu": "lots"})
    pool["spec"]["disruption"] = {"consolidationPolicy": "Sometimes", "budgets": [{"nodes": "200%"}] * 51}
    pool["spec"]["template"]["spec"].update(expireAfter="5x", taints=[{"key": "k", "effect": "Bad"}])
    pool["spec"]["template"]["spec"]["requirements"][0]["minValues"] = 0
    nodeclass = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name}, "spec": {
        "role": "r", "amiSelectorTerms": [], "subnetSelectorTerms": [{"tags": {"a": "b"}}],
        "securityGroupSelectorTerms": [{"tags": {"a": "b"}}], "userData": 5,
        "kubelet": {"maxPods": 100000000000, "imageGCHighThresholdPercent": 101},
        "metadataOptions": {"httpPutResponseHopLimit": 0},
        "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "100", "volumeType": "gp9"}}]}}
    quantity = r"'^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$'"
    expected_pool = {
        ("spec.weight", "FieldValueInvalid", 'Invalid value: "string": spec.weight in body must be of type integer: "string"'),
        ("spec.limits.cpu", "FieldValueInvalid", f'Invalid value: "lots": spec.limits.cpu in body should match {quantity}'),
        ("spec.disruption.consolidationPolicy", "FieldValueNotSupported",
         'Unsupported value: "Sometimes": supported values: "WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"'),
        ("spec.disruption.budgets", "FieldValueInvalid", "Invalid value: 51: spec.disruption.budgets in body should have at most 50 items"),
        ("spec.disruption.budgets.nodes", "FieldValueInvalid",
         "Invalid value: \"200%\": spec.disruption.budgets.nodes in body should match '^((100|[0-9]{1,2})%|[0-9]+)$'"),
        ("spec.disruption.consolidateAfter", "FieldValueRequired", "Required value"),
        ("spec.template.spec.requirements.minValues", "FieldValueInvalid",
         "Invalid value: 0: spec.template.spec.requirements.minValues in body should be greater than or equal to 1"),
        ("spec.template.spec.expireAfter", "FieldValueInvalid",
         "Invalid value: \"5x\": spec.template.spec.expireAfter in body should match '^(([0-9]+(s|m|h))+|Never)$'"),
        ("spec.template.spec.taints.effect", "FieldValueNotSupported",
         'Unsupported value: "Bad": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"'),
    }
    refused = api("POST", POOLS, pool)
    assert refused.status_code == 422
    assert {(c["field"], c["reason"], c["message"]) for c in refused.json()["details"]["causes"]} == expected_pool
    refused = api("POST", "/apis/karpenter.k8s.aws/v1/ec2nodeclasses", nodeclass)
    assert refused.status_code == 422
    causes = {(c["field"], c["reason"], c["message"][:90]) for c in refused.json()["details"]["causes"]}
    assert causes == {
        ("spec.amiSelectorTerms", "FieldValueInvalid", "Invalid value: 0: spec.amiSelectorTerms in body should have at least 1 items"),
        ("spec.kubelet.imageGCHighThresholdPercent", "FieldValueInvalid",
         "Invalid value: 101: spec.kubelet.imageGCHighThresholdPercent in body should be less than or equal to 100"[:90]),
        ("spec.metadataOptions.httpPutResponseHopLimit", "FieldValueInvalid",
         "Invalid value: 0: spec.metadataOptions.httpPutResponseHopLimit in body should be greater than or equal to 1"[:90]),
        ("spec.blockDeviceMappings.ebs.volumeSize", "FieldValueInvalid",
         "Invalid value: \"100\": spec.blockDeviceMappings.ebs.volumeSize in body should match '^((?:[1-9][0-9]{0,3}|"[:90]),
        ("spec.blockDeviceMappings.ebs.volumeType", "FieldValueNotSupported",
         'Unsupported value: "gp9": supported values: "standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"'[:90]),
        ("spec.userData", "FieldValueInvalid", 'Invalid value: "integer": spec.userData in body must be of type string: "integer"'),
    }


def test_metadata_and_kind_refusals(api: Api, name: str) -> None:
    """Name, labels, finalizers and the body's kind, refused as the server refuses them; a generated name."""
    given = nodepool(name)
    given["metadata"].update(labels={"bad key!": "v", "k": "bad value!"}, finalizers=["bad finalizer"])
    refused = api("POST", POOLS, given)
    assert refused.status_code == 422
    words = sorted((c["field"], c["message"]) for c in refused.json()["details"]["causes"])  # Go's map order: any
    assert words == sorted([
        ("metadata.labels", 'Invalid value: "bad key!": name part must consist of alphanumeric characters, \'-\', \'_\' '
         "or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
         "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
        ("metadata.labels", 'Invalid value: "bad value!": a valid label must be an empty string or consist of '
         "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
         "'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"),
        ("metadata.finalizers", 'Invalid value: "bad finalizer": name part must consist of alphanumeric characters, '
         "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
         "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")])
    upper = api("POST", POOLS, {**nodepool(name), "metadata": {"name": name.upper()}})
    assert upper.status_code == 422 and upper.json()["details"]["causes"][0]["field"] == "metadata.name"
    assert upper.json()["message"].startswith(f'NodePool.karpenter.sh "{name.upper()}" is invalid: metadata.name: '
                                              f'Invalid value: "{name.upper()}": a lowercase RFC 1123 subdomain')
    nameless = api("POST", POOLS, {**nodepool(name), "metadata": {}})
    assert nameless.status_code == 422 and nameless.json()["message"] == (
        'NodePool.karpenter.sh "" is invalid: metadata.name: Required value: name or generateName is required')
    with_version = api("POST", POOLS, {**nodepool(name), "metadata": {"name": name, "resourceVersion": "5"}})
    assert (with_version.status_code, with_version.json()["message"]) == (
        500, "resourceVersion should not be set on objects to be created")
    claim = api("POST", POOLS, {**nodepool(name), "kind": "NodeClaim"})
    assert (claim.status_code, claim.json()["message"]) == (
        422, f'NodeClaim.karpenter.sh "{name}" is invalid: kind: Invalid value: "NodeClaim": must be NodePool')
    kindless = api("POST", POOLS, {k: v for k, v in nodepool(name).items() if k != "kind"})
    assert kindless.status_code == 400
    assert kindless.json()["message"].startswith('NodePool in version "v1" cannot be handled as a NodePool: '
                                                 "Object 'Kind' is missing in '{")
    other_version = api("POST", POOLS, {**nodepool(name), "apiVersion": "karpenter.sh/v2"})
    assert (other_version.status_code, other_version.json()["message"]) == (
        400, "the API version in the data (karpenter.sh/v2) does not match the expected API version (karpenter.sh/v1)")
    generated = api("POST", POOLS, {**nodepool(name), "metadata": {"generateName": f"{name}-"}}).json()["metadata"]["name"]
    api("DELETE", f"{POOLS}/{generated}")
    assert generated.startswith(f"{name}-") and len(generated) == len(name) + 6
    assert set(generated[-5:]) <= set("bcdfghjklmnpqrstvwxz2456789")


def test_generation_moves_with_spec_only_and_a_stale_version_conflicts(api: Api, name: str) -> None:
    read = api("POST", POOLS, nodepool(name)).json()["metadata"]["resourceVersion"]
    labelled = api("PATCH", f"{POOLS}/{name}", {"metadata": {"labels": {"a": "b"}}}, MERGE).json()
    assert labelled["metadata"]["generation"] == 1
    weighted = api("PATCH", f"{POOLS}/{name}", {"spec": {"weight": 4}, "status": {"nodes": 9}}, MERGE).json()
    assert weighted["metadata"]["generation"] == 2 and "status" not in weighted
    same = api("PATCH", f"{POOLS}/{name}", {"spec": {"weight": 4}}, MERGE).json()
    assert same["metadata"]["resourceVersion"] == weighted["metadata"]["resourceVersion"]  # nothing written
    stale = api("PATCH", f"{POOLS}/{name}", {"metadata": {"resourceVersion": read}, "spec": {"weight": 5}}, MERGE)
    assert stale.status_code == 409 and stale.json()["reason"] == "Conflict"
    assert stale.json()["message"] == (f'Operation cannot be fulfilled on nodepools.karpenter.sh "{name}": the object '
                                       "has been modified; please apply your changes to the latest version and try again")
    status = api("PATCH", f"{POOLS}/{name}/status", {"status": {"nodes": 2}, "spec": {"weight": 9}}, MERGE).json()
    assert status["status"] == {"nodes": 2} and status["spec"]["weight"] == 4 and status["metadata"]["generation"] == 2
    wrong_type = api("PATCH", f"{POOLS}/{name}", {"spec": {"weight": 6}}, "application/strategic-merge-patch+json")
    assert wrong_type.status_code == 415 and wrong_type.json()["reason"] == "UnsupportedMediaType"


def test_delete_with_a_finalizer_marks_then_the_last_finalizer_lets_it_go(api: Api, name: str) -> None:
    given = nodepool(name)
    given["metadata"]["finalizers"] = [FINALIZER]
    api("POST", POOLS, given)
    marked = api("DELETE", f"{POOLS}/{name}")
    assert marked.status_code == 200
    meta = marked.json()["metadata"]
    assert meta["deletionTimestamp"] and meta["deletionGracePeriodSeconds"] == 0 and meta["generation"] == 2
    again = api("DELETE", f"{POOLS}/{name}")
    assert again.status_code == 200 and again.json()["metadata"]["resourceVersion"] == meta["resourceVersion"]
    adding = api("PATCH", f"{POOLS}/{name}", {"metadata": {"finalizers": [FINALIZER, "objects-sim.io/x"]}}, MERGE)
    assert adding.status_code == 422
    assert adding.json()["details"]["causes"] == 2 * [{
        "reason": "FieldValueForbidden", "field": "metadata.finalizers",
        "message": 'Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"objects-sim.io/x"}'}]
    watch_from = meta["resourceVersion"]
    removed = api("PATCH", f"{POOLS}/{name}", {"metadata": {"finalizers": None}}, MERGE)
    assert removed.status_code == 200 and "finalizers" not in removed.json()["metadata"]
    assert api("GET", f"{POOLS}/{name}").status_code == 404
    lines = api("GET", f"{POOLS}?watch=true&resourceVersion={watch_from}&timeoutSeconds=1"
                       f"&fieldSelector=metadata.name%3D{name}").text.splitlines()
    deleted = [json.loads(line) for line in lines]
    assert [e["type"] for e in deleted] == ["DELETED"]
    assert deleted[0]["object"]["metadata"]["finalizers"] == [FINALIZER]  # the last state stored


def test_delete_without_finalizers_answers_a_status_and_gone_is_404(api: Api, name: str) -> None:
    uid = api("POST", POOLS, nodepool(name)).json()["metadata"]["uid"]
    gone = api("DELETE", f"{POOLS}/{name}")
    assert gone.status_code == 200
    assert {k: gone.json()[k] for k in ("kind", "status", "details")} == {
        "kind": "Status", "status": "Success",
        "details": {"name": name, "group": "karpenter.sh", "kind": "nodepools", "uid": uid}}
    missing = api("GET", f"{POOLS}/{name}")
    assert missing.status_code == 404
    assert {k: missing.json()[k] for k in ("reason", "message", "details")} == {
        "reason": "NotFound", "message": f'nodepools.karpenter.sh "{name}" not found',
        "details": {"name": name, "group": "karpenter.sh", "kind": "nodepools"}}
    assert api("DELETE", f"{POOLS}/{name}").status_code == 404


def test_lists_page_and_select_by_label(api: Api, name: str) -> None:
    for made in (name, f"{name}-b"):
        api("POST", POOLS, nodepool(made))
    first = api("GET", f"{POOLS}?limit=1&labelSelector=objects-sim%20in%20({name},{name}-b)").json()
    assert (first["kind"], first["apiVersion"]) == ("NodePoolList", "karpenter.sh/v1")
    assert [o["metadata"]["name"] for o in first["items"]] == [name]
    rest = api("GET", f"{POOLS}?limit=1&labelSelector=objects-sim%20in%20({name},{name}-b)"
                      f"&continue={first['metadata']['continue']}").json()
    assert [o["metadata"]["name"] for o in rest["items"]] == [f"{name}-b"] and not rest["metadata"].get("continue")
    refused = api("GET", f"{POOLS}?fieldSelector=spec.weight%3D1")
    assert refused.status_code == 400 and refused.json()["message"] == "field label not supported: spec.weight"


def test_a_node_held_by_a_finalizer(api: Api, name: str) -> None:
    api.add_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "finalizers": [FINALIZER]}})
    held = api("DELETE", f"/api/v1/nodes/{name}")
    assert held.status_code == 200 and held.json()["metadata"]["deletionTimestamp"]
    assert held.json()["metadata"].get("deletionGracePeriodSeconds") == 0
    gone = api("PATCH", f"/api/v1/nodes/{name}", {"metadata": {"finalizers": None}}, MERGE)
    assert gone.status_code == 200 and api("GET", f"/api/v1/nodes/{name}").status_code == 404
