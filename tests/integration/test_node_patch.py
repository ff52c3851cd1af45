"""`Cluster.get_node` / `Cluster.patch_node`, one contract for both implementations: the simulated cluster,
and the lightkube adapter talking HTTP to a local API server that handles node GET and PATCH the way
kube-apiserver does (JSON merge patch per RFC 7386; a `metadata.resourceVersion` in the patch that is not
the stored one is answered 409 Conflict; every write bumps the resourceVersion; a missing node is 404 with
a Status body).

A "competing writer" changes the node between carpool's read and its write (the kubelet's status update
in the real API server, `compete_for` in the simulation): the write must lose, be computed again from a
fresh read, and keep the other writer's change.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

import pytest

from carpool.adapters.k8s.cluster import ClusterAccess, LightkubeCluster
from carpool.api.k8s import Node
from carpool.ports import NodeConflict, NodeGone, NodePatch
from carpool.sim.cluster.api_answers import merge_patch
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.taints import Taint

NOW = datetime(2026, 5, 1, tzinfo=UTC)
UNREGISTERED = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}
REGISTER = NodePatch(labels={"karpenter.sh/registered": "true"}, labels_if_absent={"team": "a", "zone": "x"},
                     annotations_if_absent={"example.com/owner": "platform"},
                     remove_taint_keys=frozenset({"karpenter.sh/unregistered"}),
                     add_taints=(Taint("dedicated", "NoSchedule", "web"),))


def node_json(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"zone": "us-east-1a"}},
            "spec": {"providerID": f"aws:///us-east-1a/i-{name}", "taints": [UNREGISTERED]},
            "status": {"conditions": [{"type": "Ready", "status": "False", "lastHeartbeatTime": "2026-05-01T00:00:00Z"}]}}


def status(code: int, reason: str, message: str, name: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "details": {"name": name, "kind": "nodes"}, "code": code}


class ApiServer:
    """Nodes over HTTP on 127.0.0.1, with kube-apiserver's answers for GET and merge-patch PATCH."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.competing: dict[str, int] = {}
        self.patches: list[dict[str, Any]] = []
        self._rv = 100
        self._lock = threading.RLock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> ApiServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def put(self, raw: dict[str, Any]) -> None:
        with self._lock:
            self._rv += 1
            raw["metadata"]["resourceVersion"] = str(self._rv)
            self.nodes[raw["metadata"]["name"]] = raw

    def _get(self, name: str) -> tuple[int, dict[str, Any]]:
        node = self.nodes.get(name)
        if node is None:
            return 404, status(404, "NotFound", f'nodes "{name}" not found', name)
        body = json.loads(json.dumps(node))
        if self.competing.get(name, 0) > 0:  # the kubelet updates its status right after this read
            self.competing[name] -= 1
            node["status"]["conditions"][0]["lastHeartbeatTime"] = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
            self.put(node)
        return 200, body

    def _patch(self, name: str, content_type: str, patch: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.patches.append(patch)
        node = self.nodes.get(name)
        if node is None:
            return 404, status(404, "NotFound", f'nodes "{name}" not found', name)
        if content_type != "application/merge-patch+json":
            return 415, status(415, "UnsupportedMediaType", f"unsupported {content_type}", name)
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != node["metadata"]["resourceVersion"]:
            return 409, status(409, "Conflict", f'Operation cannot be fulfilled on nodes "{name}": the object has been '
                               "modified; please apply your changes to the latest version and try again", name)
        merged = merge_patch(node, patch)
        self.put(merged)
        return 200, merged

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _answer(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _name(self) -> str:
                path = self.path.split("?", 1)[0]
                assert path.startswith("/api/v1/nodes/"), path
                return path.rsplit("/", 1)[-1]

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                with server._lock:
                    self._answer(*server._get(self._name()))

            def do_PATCH(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                patch = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    self._answer(*server._patch(self._name(), self.headers.get("Content-Type", ""), patch))

        return Handler


class FixedToken:
    stale = False

    def token(self) -> str:
        return "k8s-aws-v1.test"


class Harness(Protocol):
    cluster: Any

    def add(self, raw: dict[str, Any]) -> None: ...

    def compete(self, name: str, writes: int) -> None: ...

    def stored(self, name: str) -> dict[str, Any]: ...


class SimHarness:
    def __init__(self) -> None:
        self.cluster = SimulatedCluster(lambda: NOW)

    def add(self, raw: dict[str, Any]) -> None:
        self.cluster.add_node(raw)

    def compete(self, name: str, writes: int) -> None:
        self.cluster.compete_for(name, writes)

    def stored(self, name: str) -> dict[str, Any]:
        raw = self.cluster.node_raw(name)
        assert raw is not None
        return raw


class ApiHarness:
    def __init__(self, api: ApiServer) -> None:
        self.api = api
        self.cluster = LightkubeCluster("test", "us-east-1", access=ClusterAccess(api.url, ""), tokens=FixedToken())

    def add(self, raw: dict[str, Any]) -> None:
        self.api.put(raw)

    def compete(self, name: str, writes: int) -> None:
        self.api.competing[name] = self.api.competing.get(name, 0) + writes

    def stored(self, name: str) -> dict[str, Any]:
        return self.api.nodes[name]


@pytest.fixture(params=["simulated", "lightkube"])
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    if request.param == "simulated":
        yield SimHarness()
        return
    with ApiServer() as api:
        yield ApiHarness(api)


def test_get_node_reads_the_node_or_none(harness: Harness) -> None:
    harness.add(node_json("n1"))
    found = harness.cluster.get_node("n1")
    assert isinstance(found, Node) and found.instance_id() == "i-n1"
    assert harness.cluster.get_node("nope") is None


def test_patch_node_applies_the_change_and_bumps_the_version(harness: Harness) -> None:
    harness.add(node_json("n1"))
    before = int(harness.stored("n1")["metadata"]["resourceVersion"])

    written = harness.cluster.patch_node("n1", REGISTER)

    stored = harness.stored("n1")
    assert stored["metadata"]["labels"] == {"zone": "us-east-1a", "karpenter.sh/registered": "true", "team": "a"}
    assert stored["metadata"]["annotations"] == {"example.com/owner": "platform"}
    assert stored["spec"]["taints"] == [{"key": "dedicated", "effect": "NoSchedule", "value": "web"}]
    assert int(stored["metadata"]["resourceVersion"]) > before
    assert written.labels["karpenter.sh/registered"] == "true"
    assert written.metadata.resource_version == stored["metadata"]["resourceVersion"]


def test_patching_again_writes_nothing(harness: Harness) -> None:
    harness.add(node_json("n1"))
    harness.cluster.patch_node("n1", REGISTER)
    version = harness.stored("n1")["metadata"]["resourceVersion"]
    again = harness.cluster.patch_node("n1", REGISTER)
    assert harness.stored("n1")["metadata"]["resourceVersion"] == version == again.metadata.resource_version


def test_a_write_overtaken_by_another_writer_is_redone_and_keeps_the_other_change(harness: Harness) -> None:
    harness.add(node_json("n1"))
    harness.compete("n1", writes=2)
    harness.cluster.patch_node("n1", REGISTER)
    stored = harness.stored("n1")
    assert stored["metadata"]["labels"]["karpenter.sh/registered"] == "true"
    assert stored["status"]["conditions"][0]["lastHeartbeatTime"] == "2026-05-01T00:00:00Z"  # the kubelet's write
    assert [t["key"] for t in stored["spec"]["taints"]] == ["dedicated"]


def test_a_node_that_keeps_changing_gives_up_with_node_conflict(harness: Harness) -> None:
    harness.add(node_json("n1"))
    harness.compete("n1", writes=10)
    with pytest.raises(NodeConflict):
        harness.cluster.patch_node("n1", REGISTER, attempts=3)
    assert harness.stored("n1")["spec"]["taints"] == [UNREGISTERED]  # nothing half-applied


def test_a_missing_node_is_node_gone(harness: Harness) -> None:
    with pytest.raises(NodeGone):
        harness.cluster.patch_node("gone", REGISTER)
