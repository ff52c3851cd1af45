"""The lightkube adapter's pod catch-up (`pod_views_versioned`, then `pod_view_changes`) against the
simulated API server over HTTP: the changes after a list come back in order as views or removals, the
returned version resumes with no repeats, bookmarks move it, a version the server no longer holds (after a
compaction or the watch cache's history window) raises `ResourceVersionExpired`, a quiet server ends the
read within the idle time, and a line that does not decode is skipped."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from lightkube import ApiError

from carpool.adapters.k8s import cluster as adapter_module
from carpool.adapters.k8s import reads
from carpool.adapters.k8s.cluster import ClusterAccess, LightkubeCluster, WatchBroken
from carpool.ports import PodViewChanges, ResourceVersionExpired
from carpool.sim.cluster import apiserver
from carpool.sim.cluster.api_answers import api_status
from carpool.sim.cluster.apiserver import SimApiServer
from carpool.sim.cluster.simulated import WATCH_HISTORY_SECONDS, SimulatedCluster

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
#: recorded from kube-apiserver v1.24.0-alpha.1 (`tests/unit/sim/cluster/test_apiserver_watch.py`)
REAL_POD_BOOKMARK = (b'{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"401",'
                     b'"creationTimestamp":null},"spec":{"containers":null},"status":{}}}\n')


class FixedToken:
    stale = False

    def token(self) -> str:
        return "k8s-aws-v1.test"


class Elapsed:
    """The simulated cluster's elapsed seconds, moved by the test."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def node_json(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod_json(name: str, node: str | None = None, app: str = "web") -> dict[str, Any]:
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": name, "namespace": "shop", "labels": {"app": app}},
                           "spec": {"containers": [{"name": "c", "image": "x",
                                                    "resources": {"requests": {"cpu": "100m"}}}]}}
    if node:
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running"}
    return pod


@pytest.fixture
def elapsed() -> Elapsed:
    return Elapsed()


@pytest.fixture
def sim(elapsed: Elapsed) -> SimulatedCluster:
    cluster = SimulatedCluster(lambda: NOW, elapsed=elapsed)
    cluster.add_node(node_json("n1"))
    cluster.add_pod(pod_json("run-1", node="n1"))
    cluster.add_pod(pod_json("job-1", node="n1", app="job"))
    cluster.add_pod(pod_json("wait-1"))
    return cluster


@pytest.fixture
def served(sim: SimulatedCluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[SimApiServer, LightkubeCluster]]:
    monkeypatch.setattr(apiserver, "WATCH_POLL", 0.02)
    with SimApiServer(sim) as server:
        yield server, LightkubeCluster("test", "us-east-1", access=ClusterAccess(server.url, ""), tokens=FixedToken())


def summary(changes: PodViewChanges) -> list[tuple[str, str | None]]:
    """Each change as (key, node of its view or None for a removal)."""
    return [(c.key, None if c.view is None else c.view.node) for c in changes.changes]


def catch_up_watches(server: SimApiServer) -> list[apiserver.Served]:
    return [r for r in list(server.log) if r.path.endswith("/pods") and "watch" in r.query]


def test_the_list_is_every_unfinished_pod_and_its_version(served: tuple[SimApiServer, LightkubeCluster],
                                                          sim: SimulatedCluster) -> None:
    server, adapter = served
    sim.add_pod({**pod_json("done", node="n1"), "status": {"phase": "Succeeded"}})

    views, version = adapter.pod_views_versioned()

    assert sorted(v.key for v in views) == ["shop/job-1", "shop/run-1", "shop/wait-1"]
    assert version == sim.resource_version
    assert server.log[-1].query["fieldSelector"] == reads.NOT_FINISHED


def test_changes_after_the_list_come_in_order_and_resume_without_repeats(
        served: tuple[SimApiServer, LightkubeCluster], sim: SimulatedCluster) -> None:
    server, adapter = served
    _, version = adapter.pod_views_versioned()
    sim.add_pod(pod_json("new"))  # added
    sim.bind()  # wait-1 and new bound to n1: modified
    sim.delete_pod("shop/run-1")  # deleted
    sim.finish_pod("shop/job-1")  # finished: leaves the selection as DELETED

    caught = adapter.pod_view_changes(version)

    # each pod once, in its latest state, at its last change's place: kube-apiserver would send new's
    # ADDED and then its MODIFIED, the simulated watch only the latter; a snapshot applying either ends
    # the same
    assert summary(caught) == [("shop/wait-1", "n1"), ("shop/new", "n1"), ("shop/run-1", None), ("shop/job-1", None)]
    assert caught.resource_version == sim.resource_version
    (watch,) = catch_up_watches(server)
    assert watch.query == {"watch": "true", "resourceVersion": version, "allowWatchBookmarks": "true",
                           "fieldSelector": reads.NOT_FINISHED,
                           "timeoutSeconds": str(adapter_module.CATCH_UP_TIMEOUT_SECONDS)}

    again = adapter.pod_view_changes(caught.resource_version)
    assert again == PodViewChanges([], caught.resource_version)
    sim.add_pod(pod_json("later"))
    assert summary(adapter.pod_view_changes(caught.resource_version)) == [("shop/later", "")]


def test_a_change_comes_as_it_was_made_in_resource_version_order(served: tuple[SimApiServer, LightkubeCluster],
                                                                 sim: SimulatedCluster) -> None:
    _, adapter = served
    _, version = adapter.pod_views_versioned()
    sim.finish_pod("shop/job-1")
    sim.add_pod(pod_json("new"))
    sim.delete_pod("shop/run-1")

    caught = adapter.pod_view_changes(version)

    assert summary(caught) == [("shop/job-1", None), ("shop/new", ""), ("shop/run-1", None)]
    assert caught.changes[1].view is not None and caught.changes[1].view.phase == "Pending"


def test_catch_ups_share_the_workload_shapes_of_the_list(served: tuple[SimApiServer, LightkubeCluster],
                                                         sim: SimulatedCluster) -> None:
    _, adapter = served
    views, version = adapter.pod_views_versioned()
    sim.add_pod(pod_json("web-2", node="n1"))
    first = adapter.pod_view_changes(version)
    sim.add_pod(pod_json("web-3", node="n1"))
    second = adapter.pod_view_changes(first.resource_version)

    listed = next(v for v in views if v.key == "shop/run-1")
    (web2,), (web3,) = first.changes, second.changes
    assert web2.view is not None and web3.view is not None
    assert web2.view.labels is listed.labels and web3.view.labels is listed.labels


def test_a_bookmark_moves_the_version_past_changes_the_selection_leaves_out(
        served: tuple[SimApiServer, LightkubeCluster], sim: SimulatedCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    _, adapter = served
    monkeypatch.setattr(apiserver, "BOOKMARK_EVERY", 0.1)
    monkeypatch.setattr(adapter_module, "CATCH_UP_IDLE_SECONDS", 0.6)  # the bookmark comes 0.1 s in
    _, version = adapter.pod_views_versioned()
    sim.add_node(node_json("n2"))  # no pod change: only a bookmark carries the version past it

    caught = adapter.pod_view_changes(version)

    assert caught == PodViewChanges([], sim.resource_version)
    assert int(caught.resource_version) > int(version)


def test_a_real_shaped_bookmark_moves_the_version(served: tuple[SimApiServer, LightkubeCluster],
                                                  caplog: pytest.LogCaptureFixture) -> None:
    server, adapter = served
    _, version = adapter.pod_views_versioned()
    server.fault_next_watch("pods", REAL_POD_BOOKMARK)

    with caplog.at_level(logging.WARNING):
        caught = adapter.pod_view_changes(version)

    assert caught == PodViewChanges([], "401")
    assert not caplog.records, caplog.text


def test_a_line_that_does_not_decode_is_skipped(served: tuple[SimApiServer, LightkubeCluster],
                                                sim: SimulatedCluster, caplog: pytest.LogCaptureFixture) -> None:
    server, adapter = served
    _, version = adapter.pod_views_versioned()
    broken = pod_json("broken")
    broken["metadata"]["resourceVersion"] = str(int(version) + 1)
    broken["spec"]["containers"] = "not a list"  # the projection does not take it
    good = pod_json("good")
    good["metadata"]["resourceVersion"] = str(int(version) + 2)
    server.fault_next_watch("pods", b"{not a watch event\n" + apiserver.watch_line("ADDED", broken)
                            + apiserver.watch_line("ADDED", good) + b'{"type":"MODIFIED","object":[]}\n')

    with caplog.at_level(logging.WARNING):
        caught = adapter.pod_view_changes(version)

    assert summary(caught) == [("shop/good", "")]
    assert caught.resource_version == str(int(version) + 2)
    skipped = [r.getMessage() for r in caplog.records]
    assert len(skipped) == 3 and all("skipping" in m for m in skipped), skipped


def test_a_version_older_than_the_compaction_is_expired(served: tuple[SimApiServer, LightkubeCluster],
                                                       sim: SimulatedCluster) -> None:
    server, adapter = served
    _, version = adapter.pod_views_versioned()
    sim.add_pod(pod_json("new"))
    server.compact()

    with pytest.raises(ResourceVersionExpired) as expired:
        adapter.pod_view_changes(version)
    assert (expired.value.kind, expired.value.version) == ("Pod", version)
    _, relisted = adapter.pod_views_versioned()
    assert adapter.pod_view_changes(relisted) == PodViewChanges([], relisted)


def test_a_version_older_than_the_watch_history_is_expired(served: tuple[SimApiServer, LightkubeCluster],
                                                          sim: SimulatedCluster, elapsed: Elapsed) -> None:
    _, adapter = served
    _, version = adapter.pod_views_versioned()
    elapsed.now = 10.0
    sim.add_pod(pod_json("new"))
    elapsed.now = 10.0 + WATCH_HISTORY_SECONDS - 1
    assert summary(adapter.pod_view_changes(version)) == [("shop/new", "")]

    elapsed.now = 10.0 + WATCH_HISTORY_SECONDS + 1
    with pytest.raises(ResourceVersionExpired):
        adapter.pod_view_changes(version)


@pytest.mark.parametrize("answer", [api_status(410, "too old resource version: 3 (9)", "Expired"),
                                    apiserver.watch_line("ERROR", api_status(410, "too old", "Expired").body)],
                         ids=["http-410", "error-event-410"])
def test_a_410_in_either_form_is_expired(served: tuple[SimApiServer, LightkubeCluster], answer: Any) -> None:
    server, adapter = served
    _, version = adapter.pod_views_versioned()
    server.fault_next_watch("pods", answer)
    with pytest.raises(ResourceVersionExpired):
        adapter.pod_view_changes(version)


def test_other_failures_raise_named_errors(served: tuple[SimApiServer, LightkubeCluster]) -> None:
    server, adapter = served
    _, version = adapter.pod_views_versioned()
    overloaded = api_status(500, "etcdserver: request timed out", "InternalError")
    server.fault_next_watch("pods", overloaded)
    server.fault_next_watch("pods", apiserver.watch_line("ERROR", overloaded.body))
    with pytest.raises(ApiError):
        adapter.pod_view_changes(version)
    with pytest.raises(WatchBroken, match="500"):
        adapter.pod_view_changes(version)
    with pytest.raises(ResourceVersionExpired):
        adapter.pod_view_changes("")  # a watch from "" would replay every pod


def test_a_quiet_cluster_ends_the_read_within_the_idle_time(served: tuple[SimApiServer, LightkubeCluster]) -> None:
    _, adapter = served
    _, version = adapter.pod_views_versioned()
    before = adapter.read_stats.pages

    started = time.monotonic()
    caught = adapter.pod_view_changes(version)
    took = time.monotonic() - started

    assert caught == PodViewChanges([], version)
    assert took < adapter_module.CATCH_UP_IDLE_SECONDS + 0.8, "the read waited for the server to close"
    assert adapter.read_stats.pages == before + 1


def test_a_busy_cluster_cannot_hold_the_read_past_the_cap(served: tuple[SimApiServer, LightkubeCluster],
                                                         sim: SimulatedCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    server, adapter = served
    monkeypatch.setattr(adapter_module, "CATCH_UP_MAX_SECONDS", 0.6)
    _, version = adapter.pod_views_versioned()
    stop = threading.Event()

    def trickle() -> None:  # a new pod every 0.05 s, well inside the idle time
        for i in range(200):
            if stop.wait(0.05):
                return
            with server.lock:
                sim.add_pod(pod_json(f"burst-{i}"))

    feeder = threading.Thread(target=trickle, daemon=True)
    feeder.start()
    try:
        started = time.monotonic()
        caught = adapter.pod_view_changes(version)
        took = time.monotonic() - started
    finally:
        stop.set()
        feeder.join()

    assert took < 0.6 + adapter_module.CATCH_UP_IDLE_SECONDS + 0.5
    seen = [c.key for c in caught.changes]
    assert seen and len(seen) == len(set(seen))
    rest = [c.key for c in adapter.pod_view_changes(caught.resource_version).changes]
    assert not set(seen) & set(rest), "the next catch-up repeated changes"
    assert len(seen) + len(rest) == len([k for k in sim.pods if "burst" in k])
