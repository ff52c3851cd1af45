"""The lightkube adapter's watch against the simulated API server over HTTP (`carpool.sim.cluster.apiserver`):
bookmarks in the real shape move the resume point, one kind's failure never ends the other's watch, a 410
relists that kind, and `idle_seconds` marks quiet spells.

Changes are made from a helper thread once the adapter's watch requests are seen (`when`), under the
server's lock, while the test's thread consumes the watch."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from carpool.adapters.k8s import cluster as adapter_module
from carpool.adapters.k8s import reads
from carpool.adapters.k8s.cluster import ClusterAccess, LightkubeCluster
from carpool.ports import WatchEvent
from carpool.sim.cluster import apiserver
from carpool.sim.cluster.api_answers import api_status
from carpool.sim.cluster.apiserver import SimApiServer
from carpool.sim.cluster.simulated import SimulatedCluster

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


class FixedToken:
    stale = False

    def token(self) -> str:
        return "k8s-aws-v1.test"


def node_json(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}}}


def pod_json(name: str, node: str | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "shop"},
                           "spec": {"containers": [{"name": "c", "image": "x"}]}}
    if node:
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running"}
    return pod


@pytest.fixture
def sim() -> SimulatedCluster:
    cluster = SimulatedCluster(lambda: NOW)
    cluster.add_node(node_json("n1"))
    cluster.add_pod(pod_json("run-1", node="n1"))
    cluster.add_pod(pod_json("wait-1"))
    return cluster


@pytest.fixture
def served(sim: SimulatedCluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[SimApiServer, LightkubeCluster]]:
    monkeypatch.setattr(apiserver, "WATCH_POLL", 0.02)
    monkeypatch.setattr(adapter_module, "WATCH_RETRY_FIRST", 0.05)
    with SimApiServer(sim) as server:
        yield server, LightkubeCluster("test", "us-east-1", access=ClusterAccess(server.url, ""), tokens=FixedToken())


def watches(server: SimApiServer, resource: str) -> list[apiserver.Served]:
    return [r for r in list(server.log) if r.path.endswith(f"/{resource}") and "watch" in r.query]


def lists(server: SimApiServer, resource: str) -> list[apiserver.Served]:
    return [r for r in list(server.log) if r.path.endswith(f"/{resource}") and "watch" not in r.query]


def when(condition: Callable[[], bool], action: Callable[[], None], server: SimApiServer) -> threading.Thread:
    """Run `action` under the server's lock as soon as `condition` holds (polled; gives up after 20 s)."""
    def run() -> None:
        deadline = time.monotonic() + 20
        while not condition():
            if time.monotonic() > deadline:
                return
            time.sleep(0.02)
        with server.lock:
            action()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def changes(events: list[WatchEvent | None]) -> list[tuple[str, str, str]]:
    return [(e.type, e.kind, e.obj.name) for e in events if e is not None]


def started(adapter: LightkubeCluster) -> dict[str, str]:
    """The watcher's resync: the pending pods and the nodes, whose versions the watch starts from."""
    adapter.pending_pods()
    adapter.list_nodes()
    return dict(adapter.resource_versions)


def test_a_real_shaped_bookmark_moves_the_pod_watch_on(served: tuple[SimApiServer, LightkubeCluster],
                                                       sim: SimulatedCluster, monkeypatch: pytest.MonkeyPatch,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    server, adapter = served
    monkeypatch.setattr(apiserver, "BOOKMARK_EVERY", 0.3)
    versions = started(adapter)
    # a pod change the watch does not select, once it is open: only a bookmark carries the watch past it
    bound = when(lambda: len(watches(server, "pods")) >= 1, lambda: sim.add_pod(pod_json("run-2", node="n1")), server)
    late = when(lambda: int(adapter.resource_versions.get("Pod", 0)) > int(versions["Pod"]),
                lambda: sim.add_pod(pod_json("late")), server)

    with caplog.at_level(logging.WARNING):
        events = list(adapter.watch(versions, timeout_seconds=3))
    bound.join()
    late.join()

    assert ("ADDED", "Pod", "late") in changes(events)
    assert changes(events)[0] == ("ADDED", "Pod", "late"), "the bookmark came first"
    assert int(adapter.resource_versions["Pod"]) >= int(sim.resource_version)
    assert len(watches(server, "pods")) == 1, "the bookmark must not break the pod stream"
    assert not [r for r in caplog.records if "watch" in r.getMessage()], caplog.text


def test_a_node_change_after_the_pod_watch_fails_still_arrives(served: tuple[SimApiServer, LightkubeCluster],
                                                              sim: SimulatedCluster) -> None:
    server, adapter = served
    versions = started(adapter)
    broken = pod_json("broken")
    broken["metadata"]["resourceVersion"] = sim.resource_version
    broken["spec"].update(containers=None, priority="high")  # neither lightkube's decode nor carpool's takes it
    server.fault_next_watch("pods", apiserver.watch_line("ADDED", broken) + b"{not a watch event\n")
    server.fault_next_watch("pods", api_status(500, "etcdserver: request timed out", "InternalError"))
    server.fault_next_watch("pods", b"")  # a stream cut before it sent anything

    def later() -> None:
        sim.add_node(node_json("n2"))
        sim.add_pod(pod_json("late"))

    changed = when(lambda: len(watches(server, "pods")) >= 4, later, server)
    events = list(adapter.watch(versions, timeout_seconds=4))
    changed.join()

    assert ("ADDED", "Node", "n2") in changes(events)
    assert ("ADDED", "Pod", "late") in changes(events)
    assert "broken" not in {name for _, _, name in changes(events)}
    assert [r.code for r in watches(server, "pods")][:4] == [200, 500, 200, 200]
    assert len(watches(server, "nodes")) == 1, "the node watch went on undisturbed"


def test_a_410_relists_that_kind_and_watches_on_from_the_list(served: tuple[SimApiServer, LightkubeCluster],
                                                             sim: SimulatedCluster) -> None:
    server, adapter = served
    adapter.pending_pods()
    sim.add_pod(pod_json("missed"))  # after the pod list, before the compaction: only a relist shows it
    server.compact()
    adapter.list_nodes()  # the node watch starts after the compaction: not expired
    versions = dict(adapter.resource_versions)
    late = when(lambda: len(watches(server, "pods")) >= 2, lambda: sim.add_pod(pod_json("late")), server)

    events = list(adapter.watch(versions, timeout_seconds=3))
    late.join()

    pods = [(t, name) for t, kind, name in changes(events) if kind == "Pod"]
    assert pods[:2] == [("ADDED", "missed"), ("ADDED", "wait-1")]  # the relist, as ADDED
    assert ("ADDED", "late") in pods[2:]  # then the resumed watch
    relist = lists(server, "pods")[-1]
    assert relist.query["fieldSelector"] == reads.PENDING_UNBOUND
    first, second = watches(server, "pods")[:2]
    assert first.query["resourceVersion"] == versions["Pod"]
    assert int(second.query["resourceVersion"]) > int(versions["Pod"])
    assert len(watches(server, "nodes")) == 1 and len(lists(server, "nodes")) == 1


def test_a_failed_relist_ends_that_kind_only(served: tuple[SimApiServer, LightkubeCluster],
                                             sim: SimulatedCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    server, adapter = served
    versions = started(adapter)
    sim.add_pod(pod_json("missed"))
    server.compact()
    versions["Node"] = sim.resource_version
    refuse = server.lists.page
    monkeypatch.setattr(server.lists, "page", lambda resource, *a, **k: (
        api_status(503, "the server is currently unable to handle the request", "ServiceUnavailable")
        if resource == "pods" else refuse(resource, *a, **k)))
    node = when(lambda: len(lists(server, "pods")) >= 2, lambda: sim.add_node(node_json("n2")), server)

    events = list(adapter.watch(versions, timeout_seconds=2))
    node.join()

    assert changes(events) == [("ADDED", "Node", "n2")]
    assert len(watches(server, "pods")) == 1  # expired, relist failed: the pod watch ended


def test_idle_seconds_yields_none_on_quiet(served: tuple[SimApiServer, LightkubeCluster],
                                           sim: SimulatedCluster) -> None:
    server, adapter = served
    versions = started(adapter)
    quiet_until = time.monotonic() + 0.7
    late = when(lambda: time.monotonic() > quiet_until, lambda: sim.add_pod(pod_json("late")), server)

    events = list(adapter.watch(versions, timeout_seconds=2, idle_seconds=0.2))
    late.join()

    marks = ["event" if e is not None else None for e in events]
    assert marks.count("event") == 1
    at = marks.index("event")
    assert marks[:at].count(None) >= 2 and marks[at + 1:].count(None) >= 2
    assert None not in list(adapter.watch(dict(adapter.resource_versions), timeout_seconds=0.5))
