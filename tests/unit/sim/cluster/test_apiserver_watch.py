"""The simulated API server's watch lines, byte for byte as kube-apiserver sends them: bookmarks are the
kind's zero value with only a resource version (what a real v1.24 server sent, recorded below), a watch
from a compacted version is one ERROR event with 410, and `fault_next_watch` breaks one watch."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime

import pytest

from carpool.sim.cluster import apiserver
from carpool.sim.cluster.api_answers import api_status
from carpool.sim.cluster.apiserver import SimApiServer, bookmark_object, watch_line
from carpool.sim.cluster.simulated import WATCH_HISTORY_SECONDS, SimulatedCluster

#: recorded from kube-apiserver v1.24.0-alpha.1 (`../shared/kube-apiserver`), watch with allowWatchBookmarks
REAL_POD_BOOKMARK = (b'{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"401",'
                     b'"creationTimestamp":null},"spec":{"containers":null},"status":{}}}\n')
REAL_NODE_BOOKMARK = (b'{"type":"BOOKMARK","object":{"kind":"Node","apiVersion":"v1","metadata":{"resourceVersion":"200",'
                      b'"creationTimestamp":null},"spec":{},"status":{"daemonEndpoints":{"kubeletEndpoint":{"Port":0}},'
                      b'"nodeInfo":{"machineID":"","systemUUID":"","bootID":"","kernelVersion":"","osImage":"",'
                      b'"containerRuntimeVersion":"","kubeletVersion":"","kubeProxyVersion":"","operatingSystem":"",'
                      b'"architecture":""}}}}\n')
NOW = datetime(2026, 5, 1, tzinfo=UTC)


@pytest.fixture
def cluster() -> SimulatedCluster:
    c = SimulatedCluster(lambda: NOW)
    c.add_node({"metadata": {"name": "n1"}})
    c.add_pod({"metadata": {"name": "wait-1", "namespace": "shop"}, "spec": {"containers": [{"name": "c"}]}})
    return c


def test_bookmark_lines_are_the_real_servers_bytes() -> None:
    assert watch_line("BOOKMARK", bookmark_object("Pod", "401")) == REAL_POD_BOOKMARK
    assert watch_line("BOOKMARK", bookmark_object("Node", "200")) == REAL_NODE_BOOKMARK


@pytest.mark.parametrize(("resource", "kind"), [("pods", "Pod"), ("nodes", "Node")])
def test_a_watch_streams_bookmarks_in_the_real_shape(cluster: SimulatedCluster, monkeypatch: pytest.MonkeyPatch,
                                                     resource: str, kind: str) -> None:
    monkeypatch.setattr(apiserver, "WATCH_POLL", 0.01)
    monkeypatch.setattr(apiserver, "BOOKMARK_EVERY", 0.05)
    server = SimApiServer(cluster)
    _, lines = server.watch(f"/api/v1/{resource}?watch=true&resourceVersion={cluster.resource_version}"
                            "&timeoutSeconds=3&allowWatchBookmarks=true")

    def change() -> None:  # any change while the watch is open: a bookmark must be newer than its start
        with server.lock:
            cluster.add_node({"metadata": {"name": "n2"}})

    timer = threading.Timer(0.2, change)
    timer.start()
    bookmark = next(line for line in lines if b'"BOOKMARK"' in line)
    timer.join()
    assert bookmark == watch_line("BOOKMARK", bookmark_object(kind, cluster.resource_version))


def test_no_bookmark_for_a_watch_of_an_unchanged_cluster(cluster: SimulatedCluster,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(apiserver, "WATCH_POLL", 0.01)
    monkeypatch.setattr(apiserver, "BOOKMARK_EVERY", 0.05)
    url = f"/api/v1/pods?watch=true&resourceVersion={cluster.resource_version}&timeoutSeconds=3&allowWatchBookmarks=true"
    assert list(SimApiServer(cluster).watch(url)[1]) == []  # though one was due every 0.05 s until 1 s in


def test_a_watch_from_before_the_compaction_is_one_410_event(cluster: SimulatedCluster) -> None:
    server = SimApiServer(cluster)
    old = cluster.resource_version
    cluster.add_pod({"metadata": {"name": "wait-2", "namespace": "shop"}, "spec": {"containers": [{"name": "c"}]}})
    server.compact()
    refused, lines = server.watch(f"/api/v1/pods?watch=true&resourceVersion={old}&timeoutSeconds=1")
    assert refused is None
    (line,) = list(lines)
    event = json.loads(line)
    assert event == {"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f"too old resource version: {old} ({cluster.resource_version})", "reason": "Expired", "code": 410}}
    refused, _ = server.watch(f"/api/v1/pods?watch=true&resourceVersion={cluster.resource_version}&timeoutSeconds=1")
    assert refused is None


def test_fault_next_watch_breaks_one_watch_each(cluster: SimulatedCluster) -> None:
    server = SimApiServer(cluster)
    server.fault_next_watch("pods", api_status(500, "etcdserver: request timed out", "InternalError"))
    server.fault_next_watch("pods", b"{not json\n")
    url = f"/api/v1/pods?watch=true&resourceVersion={cluster.resource_version}&timeoutSeconds=1"
    refused, _ = server.watch(url)
    assert refused is not None and refused.code == 500
    assert list(server.watch(url)[1]) == [b"{not json\n"]
    refused, lines = server.watch(url.replace("pods", "nodes"))  # other resources are not affected
    assert refused is None
    assert [r.code for r in server.log] == [500, 200, 200]


NOT_FINISHED = "status.phase!=Succeeded,status.phase!=Failed"


def lines_of(server: SimApiServer, since: str, selector: str = NOT_FINISHED) -> list[tuple[str, str]]:
    """(type, name) of each line a short watch of pods from `since` sends."""
    _, lines = server.watch(f"/api/v1/pods?watch=true&resourceVersion={since}&timeoutSeconds=0.2"
                            f"&fieldSelector={selector}")
    return [(e["type"], e["object"]["metadata"]["name"]) for e in map(json.loads, lines)]


def test_a_pod_that_finishes_leaves_a_field_selector_watch_as_deleted(cluster: SimulatedCluster) -> None:
    server = SimApiServer(cluster)
    old = cluster.resource_version
    cluster.add_pod({"metadata": {"name": "brief", "namespace": "shop"}, "spec": {"containers": [{"name": "c"}]}})
    cluster.finish_pod("shop/wait-1")
    cluster.finish_pod("shop/brief", "Failed")  # created and finished after `old`: never matched, nothing

    assert lines_of(server, old) == [("DELETED", "wait-1")]
    assert lines_of(server, old, selector="") == [("MODIFIED", "wait-1"), ("ADDED", "brief")]


def test_a_pod_finishing_while_the_watch_is_open_is_deleted_once(cluster: SimulatedCluster,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(apiserver, "WATCH_POLL", 0.01)
    server = SimApiServer(cluster)
    _, lines = server.watch(f"/api/v1/pods?watch=true&resourceVersion={cluster.resource_version}"
                            f"&timeoutSeconds=1&fieldSelector={NOT_FINISHED}")

    def changes() -> None:
        with server.lock:
            cluster.add_pod({"metadata": {"name": "late", "namespace": "shop"}, "spec": {"containers": [{"name": "c"}]}})
        time.sleep(0.1)  # the watch sends late's ADDED before it finishes
        with server.lock:
            cluster.finish_pod("shop/late")
            cluster.finish_pod("shop/wait-1")
        time.sleep(0.1)
        with server.lock:
            cluster.finish_pod("shop/late", "Failed")  # no longer selected: nothing more
            cluster.delete_pod("shop/wait-1")

    timer = threading.Timer(0.1, changes)
    timer.start()
    sent = [(e["type"], e["object"]["metadata"]["name"]) for e in map(json.loads, lines)]
    timer.join()
    assert sent == [("ADDED", "late"), ("DELETED", "late"), ("DELETED", "wait-1")]


def test_a_watch_from_before_the_history_window_is_one_410_event() -> None:
    now = [0.0]
    cluster = SimulatedCluster(lambda: NOW, elapsed=lambda: now[0])
    cluster.add_pod({"metadata": {"name": "wait-1", "namespace": "shop"}, "spec": {"containers": [{"name": "c"}]}})
    old = cluster.resource_version
    now[0] = 10.0
    cluster.add_node({"metadata": {"name": "n1"}})  # a node change: pod watches do not count it
    now[0] = 20.0
    cluster.add_pod({"metadata": {"name": "wait-2", "namespace": "shop"}, "spec": {"containers": [{"name": "c"}]}})
    held = cluster.resource_version
    server = SimApiServer(cluster)

    now[0] = 20.0 + WATCH_HISTORY_SECONDS - 1  # the node change is out of the window, the pod change is not
    assert lines_of(server, old, selector="") == [("ADDED", "wait-2")]
    now[0] = 20.0 + WATCH_HISTORY_SECONDS + 1
    (line,) = server.watch(f"/api/v1/pods?watch=true&resourceVersion={old}&timeoutSeconds=1")[1]
    assert json.loads(line)["object"]["code"] == 410
    assert json.loads(line)["object"]["message"] == f"too old resource version: {old} ({held})"
    (line,) = server.watch(f"/api/v1/nodes?watch=true&resourceVersion={old}&timeoutSeconds=1")[1]
    assert json.loads(line)["object"]["code"] == 410
    assert lines_of(server, held) == []  # nothing changed after it: nothing to lose


def test_a_clock_that_stands_still_expires_nothing(cluster: SimulatedCluster) -> None:
    cluster.add_pod({"metadata": {"name": "wait-2", "namespace": "shop"}, "spec": {"containers": [{"name": "c"}]}})
    assert cluster.watch_expired("Pod", 0) is None
    assert lines_of(SimApiServer(cluster), "1", selector="") == [("ADDED", "wait-1"), ("ADDED", "wait-2")]


def test_a_change_after_the_watch_registered_is_live_however_late_the_stream_starts(
        cluster: SimulatedCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cacher registers a watcher under its lock: a change made once the request is answered is a live
    event, not one of the initial events, even if the stream's first read comes after it. A pod change the
    selection leaves out is then carried past by a bookmark (a race the stream's first poll used to lose)."""
    monkeypatch.setattr(apiserver, "WATCH_POLL", 0.01)
    monkeypatch.setattr(apiserver, "BOOKMARK_EVERY", 0.05)
    server = SimApiServer(cluster)
    since = cluster.resource_version
    _, lines = server.watch(f"/api/v1/pods?watch=true&resourceVersion={since}&timeoutSeconds=3"
                            "&allowWatchBookmarks=true&fieldSelector=spec.nodeName%3D")
    with server.lock:  # before the stream is read at all
        cluster.add_pod({"metadata": {"name": "run-2", "namespace": "shop"},
                         "spec": {"containers": [{"name": "c"}], "nodeName": "n1"}})
    bookmark = next(line for line in lines if b'"BOOKMARK"' in line)
    assert bookmark == watch_line("BOOKMARK", bookmark_object("Pod", cluster.resource_version))
