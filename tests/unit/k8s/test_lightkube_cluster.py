"""LightkubeCluster against an in-process fake API server (httpx mock transport): no cluster needed."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2
import pytest
from lightkube import AsyncClient, Client

from carpool.adapters.k8s import convert
from carpool.adapters.k8s.cluster import ClusterAccess, LightkubeCluster, WatchExpired, kube_config
from carpool.ports import EvictionBlocked, NodeConflict, NodeGone, NodePatch
from carpool.taints import Taint

SERVER = "https://k8s.test"


class FixedToken:
    stale = False

    def token(self) -> str:
        return "k8s-aws-v1.test"


def pod(name: str, rv: str = "1", namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": rv},
        "spec": {
            "containers": [{"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "500m"}}}]
        },
        "status": {"phase": "Pending"},
    }


def node(name: str, rv: str = "7", taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "resourceVersion": rv,
            "labels": {"node.kubernetes.io/instance-type": "m5.large"},
        },
        "spec": {"taints": taints or []},
        "status": {"capacity": {"cpu": "2", "memory": "7935916Ki", "pods": "29"}},
    }


def status(code: int, reason: str, message: str) -> httpx2.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }
    return httpx2.Response(code, json=body)


class FakeApi:
    """Routes requests by (method, path) to handlers; records every request."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Callable[[httpx2.Request], Any]] = {}
        self.requests: list[httpx2.Request] = []

    def on(self, method: str, path: str, handler: Callable[[httpx2.Request], Any]) -> None:
        self.routes[(method, path)] = handler

    def __call__(self, request: httpx2.Request) -> Any:
        self.requests.append(request)
        handler = self.routes.get((request.method, request.url.path))
        if handler is None:
            return status(404, "NotFound", f"{request.method} {request.url.path} not found")
        return handler(request)


def cluster_on(api: FakeApi) -> LightkubeCluster:
    transport = httpx2.MockTransport(api)
    return LightkubeCluster(
        "test",
        "us-east-1",
        access=ClusterAccess(SERVER, ""),
        tokens=FixedToken(),
        client_factory=lambda config: Client(config=config, transport=transport),
        async_client_factory=lambda config: AsyncClient(config=config, transport=transport),
    )


# -- conversion helpers -------------------------------------------------------------------------------------
def test_conversion_helpers() -> None:
    ds = {"spec": {"template": {"spec": {"containers": [
        {"name": "aws-eks-nodeagent", "env": [{"name": "X", "value": "1"}]},
        {"name": "aws-node", "env": [
            {"name": "ENABLE_PREFIX_DELEGATION", "value": "true"},
            {"name": "MY_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        ]},
    ]}}}}  # fmt: skip
    assert convert.container_env(ds, "aws-node") == {"ENABLE_PREFIX_DELEGATION": "true"}
    assert convert.container_env({}, "aws-node") == {}
    assert convert.split_pod_key("team-a/web-1") == ("team-a", "web-1")
    assert convert.split_pod_key("web-1") == ("default", "web-1")

    existing = [{"key": "a", "effect": "NoSchedule"}]
    assert convert.taints_with(existing, Taint("a", "NoSchedule")) is None
    assert convert.taints_with(existing, Taint("a", "NoSchedule", "v")) == [
        {"key": "a", "effect": "NoSchedule", "value": "v"}
    ]
    assert convert.taints_with(existing, Taint("b", "NoExecute")) == [
        *existing,
        {"key": "b", "effect": "NoExecute"},
    ]
    assert convert.resource_version({"metadata": {"resourceVersion": "9"}}) == "9"


def test_kube_config_carries_token_and_ca() -> None:
    config = kube_config(ClusterAccess(SERVER, "Q0E="), "tok").get()
    assert config.cluster.server == SERVER
    assert config.cluster.certificate_auth_data == "Q0E="
    assert config.user is not None and config.user.token == "tok"


# -- reads ----------------------------------------------------------------------------------------------------
def test_list_pods_converts_to_api_models_and_remembers_the_version() -> None:
    api = FakeApi()
    api.on("GET", "/api/v1/pods", lambda r: httpx2.Response(
        200, json={"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "123"},
                   "items": [pod("web-1"), pod("web-2", namespace="team-a")]}))  # fmt: skip
    api.on("GET", "/api/v1/nodes", lambda r: httpx2.Response(
        200, json={"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "456"}, "items": [node("n1")]}))  # fmt: skip
    cluster = cluster_on(api)

    pods = cluster.list_pods()
    assert [p.key for p in pods] == ["default/web-1", "team-a/web-2"]
    assert pods[0].requests()["cpu"] == 500
    (n,) = cluster.list_nodes()
    assert n.metadata.name == "n1"
    assert cluster.resource_versions == {"Pod": "123", "Node": "456"}
    assert api.requests[0].headers["authorization"] == "Bearer k8s-aws-v1.test"
    assert api.requests[0].url.params["limit"] == "500"


def test_cni_env_reads_the_aws_node_daemonset() -> None:
    api = FakeApi()
    cluster = cluster_on(api)
    assert cluster.cni_env() == {}  # no VPC CNI: 404
    api.on("GET", "/apis/apps/v1/namespaces/kube-system/daemonsets/aws-node", lambda r: httpx2.Response(200, json={
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "aws-node", "namespace": "kube-system"},
        "spec": {"selector": {}, "template": {"spec": {"containers": [
            {"name": "aws-node", "env": [{"name": "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG", "value": "true"}]}]}}}}))  # fmt: skip
    assert cluster.cni_env() == {"AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG": "true"}


# -- writes ---------------------------------------------------------------------------------------------------
def test_cordon_and_taint_patch_the_node() -> None:
    api = FakeApi()
    patches: list[tuple[str, dict[str, Any]]] = []

    def patch(request: httpx2.Request) -> httpx2.Response:
        patches.append((request.headers["content-type"], json.loads(request.content)))
        return httpx2.Response(200, json=node("n1", rv="8"))

    api.on(
        "GET",
        "/api/v1/nodes/n1",
        lambda r: httpx2.Response(200, json=node("n1", taints=[{"key": "a", "effect": "NoSchedule"}])),
    )
    api.on("PATCH", "/api/v1/nodes/n1", patch)
    cluster = cluster_on(api)

    cluster.cordon("n1")
    cluster.taint("n1", Taint("karpenter.sh/disrupted", "NoSchedule"))
    cluster.taint("n1", Taint("a", "NoSchedule"))  # already there: no patch

    assert patches[0] == ("application/strategic-merge-patch+json", {"spec": {"unschedulable": True}})
    assert patches[1] == (
        "application/merge-patch+json",
        {
            "metadata": {"resourceVersion": "7"},
            "spec": {
                "taints": [
                    {"key": "a", "effect": "NoSchedule"},
                    {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"},
                ]
            },
        },
    )
    assert len(patches) == 2


def test_eviction_blocked_by_a_pdb() -> None:
    api = FakeApi()
    path = "/api/v1/namespaces/team-a/pods/web-1/eviction"
    api.on(
        "POST",
        path,
        lambda r: status(
            429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget."
        ),
    )
    cluster = cluster_on(api)
    with pytest.raises(EvictionBlocked, match="team-a/web-1"):
        cluster.evict("team-a/web-1")
    body = json.loads(api.requests[-1].content)
    assert body["kind"] == "Eviction" and body["metadata"] == {"name": "web-1", "namespace": "team-a"}

    api.on("POST", path, lambda r: httpx2.Response(201, json={"kind": "Status", "status": "Success"}))
    cluster.evict("team-a/web-1")
    cluster.evict("team-a/gone")  # 404: already gone is evicted


def test_delete_node_tolerates_a_missing_node() -> None:
    api = FakeApi()
    api.on(
        "DELETE",
        "/api/v1/nodes/n1",
        lambda r: httpx2.Response(200, json={"kind": "Status", "status": "Success"}),
    )
    cluster = cluster_on(api)
    cluster.delete_node("n1")
    cluster.delete_node("n2")
    assert [r.url.path for r in api.requests] == ["/api/v1/nodes/n1", "/api/v1/nodes/n2"]


def conflict(name: str) -> httpx2.Response:
    """The API server's answer to a write whose resourceVersion precondition no longer holds."""
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f'Operation cannot be fulfilled on nodes "{name}": the object has been modified; '
                       "please apply your changes to the latest version and try again",
            "reason": "Conflict", "details": {"name": name, "kind": "nodes"}, "code": 409}
    return httpx2.Response(409, json=body)


def not_found(name: str) -> httpx2.Response:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f'nodes "{name}" not found', "reason": "NotFound",
            "details": {"name": name, "kind": "nodes"}, "code": 404}
    return httpx2.Response(404, json=body)


REGISTER = NodePatch(labels={"karpenter.sh/registered": "true"}, labels_if_absent={"team": "a"},
                     remove_taint_keys=frozenset({"karpenter.sh/unregistered"}),
                     add_taints=(Taint("dedicated", "NoSchedule", "web"),))
UNREGISTERED = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}


def test_get_node_reads_one_node_and_answers_none_when_it_is_gone() -> None:
    api = FakeApi()
    api.on("GET", "/api/v1/nodes/n1", lambda r: httpx2.Response(200, json=node("n1")))
    api.on("GET", "/api/v1/nodes/n2", lambda r: not_found("n2"))
    cluster = cluster_on(api)
    found = cluster.get_node("n1")
    assert found is not None and found.metadata.resource_version == "7"
    assert cluster.get_node("n2") is None


def test_patch_node_sends_a_merge_patch_of_what_changes_under_the_version_read() -> None:
    api = FakeApi()
    bodies: list[tuple[str, dict[str, Any]]] = []

    def patch(request: httpx2.Request) -> httpx2.Response:
        bodies.append((request.headers["content-type"], json.loads(request.content)))
        return httpx2.Response(200, json=node("n1", rv="8", taints=[{"key": "dedicated", "value": "web", "effect": "NoSchedule"}]))

    api.on("GET", "/api/v1/nodes/n1", lambda r: httpx2.Response(200, json=node("n1", taints=[UNREGISTERED])))
    api.on("PATCH", "/api/v1/nodes/n1", patch)

    written = cluster_on(api).patch_node("n1", REGISTER)

    assert bodies == [("application/merge-patch+json", {
        "metadata": {"resourceVersion": "7", "labels": {"karpenter.sh/registered": "true", "team": "a"}},
        "spec": {"taints": [{"key": "dedicated", "effect": "NoSchedule", "value": "web"}]},
    })]
    assert written.metadata.resource_version == "8"


def test_patch_node_writes_nothing_when_nothing_changes() -> None:
    api = FakeApi()
    done = node("n1", taints=[{"key": "dedicated", "value": "web", "effect": "NoSchedule"}])
    done["metadata"]["labels"].update({"karpenter.sh/registered": "true", "team": "b"})
    api.on("GET", "/api/v1/nodes/n1", lambda r: httpx2.Response(200, json=done))
    cluster_on(api).patch_node("n1", REGISTER)
    assert [r.method for r in api.requests] == ["GET"]


def test_patch_node_reads_again_and_reapplies_after_a_conflict() -> None:
    api = FakeApi()
    versions = iter(["7", "9"])  # another writer added a taint between the first read and write
    reads = {"7": node("n1", rv="7", taints=[UNREGISTERED]),
             "9": node("n1", rv="9", taints=[UNREGISTERED, {"key": "cilium", "effect": "NoSchedule"}])}
    bodies: list[dict[str, Any]] = []

    def patch(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        bodies.append(body)
        if body["metadata"]["resourceVersion"] != "9":
            return conflict("n1")
        return httpx2.Response(200, json=node("n1", rv="10"))

    api.on("GET", "/api/v1/nodes/n1", lambda r: httpx2.Response(200, json=reads[next(versions)]))
    api.on("PATCH", "/api/v1/nodes/n1", patch)

    cluster_on(api).patch_node("n1", REGISTER)

    assert [b["metadata"]["resourceVersion"] for b in bodies] == ["7", "9"]
    assert [t["key"] for t in bodies[1]["spec"]["taints"]] == ["cilium", "dedicated"]  # the other write is kept


def test_patch_node_gives_up_after_its_attempts() -> None:
    api = FakeApi()
    api.on("GET", "/api/v1/nodes/n1", lambda r: httpx2.Response(200, json=node("n1", taints=[UNREGISTERED])))
    api.on("PATCH", "/api/v1/nodes/n1", lambda r: conflict("n1"))
    with pytest.raises(NodeConflict, match="3 attempts"):
        cluster_on(api).patch_node("n1", REGISTER, attempts=3)
    assert [r.method for r in api.requests] == ["GET", "PATCH"] * 3


@pytest.mark.parametrize("gone_at", ["GET", "PATCH"])
def test_patch_node_of_a_deleted_node_raises_node_gone(gone_at: str) -> None:
    api = FakeApi()
    if gone_at == "PATCH":
        api.on("GET", "/api/v1/nodes/n1", lambda r: httpx2.Response(200, json=node("n1", taints=[UNREGISTERED])))
    api.on("PATCH", "/api/v1/nodes/n1", lambda r: not_found("n1"))
    with pytest.raises(NodeGone, match="n1"):
        cluster_on(api).patch_node("n1", REGISTER)


def test_patch_node_lets_other_errors_through() -> None:
    from lightkube import ApiError

    api = FakeApi()
    api.on("GET", "/api/v1/nodes/n1", lambda r: httpx2.Response(200, json=node("n1", taints=[UNREGISTERED])))
    api.on("PATCH", "/api/v1/nodes/n1", lambda r: status(403, "Forbidden", "nodes \"n1\" is forbidden"))
    with pytest.raises(ApiError):
        cluster_on(api).patch_node("n1", REGISTER)


# -- watch ----------------------------------------------------------------------------------------------------
def watch_lines(*events: tuple[str, dict[str, Any]]) -> bytes:
    return b"".join(json.dumps({"type": t, "object": o}).encode() + b"\n" for t, o in events)


async def quiet_server() -> AsyncIterator[bytes]:
    """A watch connection on which nothing happens (until the client gives up)."""
    await asyncio.sleep(3600)
    yield b""


def consume(cluster: LightkubeCluster, versions: dict[str, str], timeout: float) -> list[Any]:
    """Run `watch` in a thread so a hang fails the test instead of blocking the run."""
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


def test_watch_streams_both_kinds_and_stops_at_the_deadline() -> None:
    api = FakeApi()
    served: dict[str, int] = {}

    def route(kind: str, body: bytes) -> Callable[[httpx2.Request], httpx2.Response]:
        def handler(request: httpx2.Request) -> httpx2.Response:
            served[kind] = served.get(kind, 0) + 1
            assert request.url.params["watch"] == "true"
            if served[kind] == 1:
                served[f"{kind}-rv"] = request.url.params.get("resourceVersion")  # type: ignore[assignment]
                return httpx2.Response(200, content=body)
            return httpx2.Response(200, content=quiet_server())  # reconnect: nothing more happens

        return handler

    api.on(
        "GET",
        "/api/v1/pods",
        route("Pod", watch_lines(("ADDED", pod("web-1", "11")), ("MODIFIED", pod("web-1", "12")))),
    )
    api.on("GET", "/api/v1/nodes", route("Node", watch_lines(("BOOKMARK", {"kind": "Node", "apiVersion": "v1", "metadata": {"resourceVersion": "20"}}), ("DELETED", node("n1", "21")))))  # fmt: skip

    events = consume(cluster_on(api), {"Pod": "10", "Node": "19"}, timeout=0.5)

    assert all(not isinstance(e, Exception) for e in events), events
    assert sorted((e.kind, e.type, e.resource_version) for e in events) == [
        ("Node", "DELETED", "21"),
        ("Pod", "ADDED", "11"),
        ("Pod", "MODIFIED", "12"),
    ]
    assert served["Pod-rv"] == "10" and served["Node-rv"] == "19"
    assert next(e for e in events if e.kind == "Pod").obj.key == "default/web-1"


def test_a_watch_answered_410_relists_that_kind_and_watches_from_the_list() -> None:
    api, pod_requests = FakeApi(), []

    def pods(request: httpx2.Request) -> httpx2.Response:
        pod_requests.append(dict(request.url.params))
        if "watch" not in request.url.params:
            return httpx2.Response(200, json={"kind": "PodList", "apiVersion": "v1",
                                              "metadata": {"resourceVersion": "200"}, "items": [pod("wait", "150")]})
        if request.url.params.get("resourceVersion") == "1":
            return status(410, "Expired", "too old resource version: 1 (200)")
        return httpx2.Response(200, content=quiet_server())

    api.on("GET", "/api/v1/pods", pods)
    api.on("GET", "/api/v1/nodes", lambda r: httpx2.Response(200, content=quiet_server()))
    cluster = cluster_on(api)
    events = consume(cluster, {"Pod": "1"}, timeout=1)
    assert [(e.type, e.kind, e.obj.name, e.resource_version) for e in events] == [("ADDED", "Pod", "wait", "150")]
    watch, relist, resumed = pod_requests[:3]
    assert watch["resourceVersion"] == "1" and "watch" not in relist and resumed["resourceVersion"] == "200"
    assert relist["fieldSelector"] == "spec.nodeName=,status.phase=Pending"
    assert cluster.resource_versions["Pod"] == "200"


def test_a_failed_relist_ends_that_kinds_watch_and_not_the_others() -> None:
    api = FakeApi()
    api.on("GET", "/api/v1/pods", lambda r: status(410, "Expired", "too old resource version: 1 (200)")
           if "watch" in r.url.params else status(403, "Forbidden", "pods is forbidden"))
    api.on("GET", "/api/v1/nodes", lambda r: httpx2.Response(200, content=(
        watch_lines(("ADDED", node("n1", "41"))) if r.url.params["resourceVersion"] == "40" else quiet_server())))
    events = consume(cluster_on(api), {"Pod": "1", "Node": "40"}, timeout=1)
    assert events and all(not isinstance(e, Exception) for e in events), events
    assert {(e.kind, e.obj.name) for e in events} == {("Node", "n1")}
    assert WatchExpired("Pod").kind == "Pod"  # still the named error of a 410, for callers that list themselves


def test_from_settings_uses_the_stacks_endpoint_and_ca() -> None:
    from types import SimpleNamespace

    settings = SimpleNamespace(cluster_name="prod", region="eu-west-1", cluster_endpoint=SERVER, cluster_ca="Q0E=")
    cluster = LightkubeCluster.from_settings(settings)
    assert cluster.access == ClusterAccess(SERVER, "Q0E=")  # no DescribeCluster needed
    assert cluster.cluster_name == "prod"


# -- the API as it really answers -----------------------------------------------------------------------------
#: kube-apiserver's eviction answer for a pod two budgets select (`eviction.go` returns this Status as the
#: response object: code 500, no reason)
MULTIPLE_PDBS_BODY = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource "
                                 "does not support.", "code": 500}
#: a 429 with the `DisruptionBudget` cause `checkAndDecrement` adds
PDB_VIOLATION_BODY = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": "Cannot evict pod as it would violate the pod's disruption budget.",
                      "reason": "TooManyRequests", "details": {"causes": [
                          {"reason": "DisruptionBudget",
                           "message": "The disruption budget web needs 2 healthy pods and has 2 currently"}]},
                      "code": 429}
EXPIRED_CONTINUE_BODY = {"kind": "Status", "apiVersion": "v1", "metadata": {"continue": "eyJydiI6LTF9"},
                         "status": "Failure", "reason": "Expired", "code": 410,
                         "message": "The provided continue parameter is too old to display a consistent list "
                                    "result. You can start a new list without the continue parameter, or use the "
                                    "continue token in this response to retrieve the remainder of the results. "
                                    "Continuing with the provided token results in an inconsistent list - objects "
                                    "that were created, modified, or deleted between the time the first chunk was "
                                    "returned and now may show up in the list."}


def test_a_pod_with_two_budgets_is_blocked_not_an_error() -> None:
    api = FakeApi()
    api.on("POST", "/api/v1/namespaces/default/pods/web-1/eviction",
           lambda r: httpx2.Response(500, json=MULTIPLE_PDBS_BODY))
    with pytest.raises(EvictionBlocked, match="more than one PodDisruptionBudget") as blocked:
        cluster_on(api).evict("default/web-1")
    assert str(blocked.value).startswith("default/web-1: ")


def test_a_429_carries_the_budgets_cause() -> None:
    api = FakeApi()
    api.on("POST", "/api/v1/namespaces/default/pods/web-1/eviction",
           lambda r: httpx2.Response(429, json=PDB_VIOLATION_BODY))
    with pytest.raises(EvictionBlocked, match="budget web needs 2 healthy pods and has 2 currently"):
        cluster_on(api).evict("default/web-1")


def test_another_500_on_eviction_is_an_error() -> None:
    from lightkube import ApiError

    api = FakeApi()
    api.on("POST", "/api/v1/namespaces/default/pods/web-1/eviction",
           lambda r: status(500, "InternalError", "Internal error occurred: etcdserver: request timed out"))
    with pytest.raises(ApiError):
        cluster_on(api).evict("default/web-1")


def paged_pods(expire: int) -> tuple[FakeApi, list[str | None]]:
    """Pods in pages of one; the first `expire` requests with a continue token answer 410 Expired."""
    api, asked = FakeApi(), []
    left = [expire]

    def list_pods(request: httpx2.Request) -> httpx2.Response:
        token = request.url.params.get("continue")
        asked.append(token)
        if token is None:
            return httpx2.Response(200, json={"kind": "PodList", "apiVersion": "v1", "items": [pod("web-1")],
                                              "metadata": {"resourceVersion": "40", "continue": "page2"}})
        if left[0] > 0:
            left[0] -= 1
            return httpx2.Response(410, json=EXPIRED_CONTINUE_BODY)
        return httpx2.Response(200, json={"kind": "PodList", "apiVersion": "v1", "items": [pod("web-2")],
                                          "metadata": {"resourceVersion": "40"}})

    api.on("GET", "/api/v1/pods", list_pods)
    return api, asked


def test_a_list_whose_continue_token_expired_starts_again() -> None:
    api, asked = paged_pods(expire=1)
    cluster = cluster_on(api)
    assert [p.key for p in cluster.list_pods()] == ["default/web-1", "default/web-2"]  # nothing twice
    assert asked == [None, "page2", None, "page2"]
    assert cluster.resource_versions["Pod"] == "40"
    assert "eyJydiI6LTF9" not in [r.url.params.get("continue") for r in api.requests]  # never inconsistent
    api, asked = paged_pods(expire=1)
    assert cluster_on(api).pod_keys() == {"default/web-1", "default/web-2"}


def test_a_list_that_keeps_expiring_gives_up_after_its_restarts() -> None:
    from lightkube import ApiError

    from carpool.adapters.k8s.cluster import LIST_RESTARTS

    api, asked = paged_pods(expire=100)
    with pytest.raises(ApiError, match="continue parameter is too old"):
        cluster_on(api).list_pods()
    assert asked.count(None) == LIST_RESTARTS


@pytest.mark.parametrize("gone_at", ["GET", "PATCH"])
def test_cordon_and_taint_of_a_gone_node_raise_node_gone(gone_at: str) -> None:
    api = FakeApi()
    api.on("PATCH", "/api/v1/nodes/n1", lambda r: not_found("n1"))
    if gone_at == "PATCH":
        api.on("GET", "/api/v1/nodes/n1", lambda r: httpx2.Response(200, json=node("n1")))
    cluster = cluster_on(api)
    with pytest.raises(NodeGone, match="n1"):
        cluster.cordon("n1")
    with pytest.raises(NodeGone, match="n1"):
        cluster.taint("n1", Taint("karpenter.sh/disrupted", "NoSchedule"))
    assert [r.method for r in api.requests][-1] == gone_at
