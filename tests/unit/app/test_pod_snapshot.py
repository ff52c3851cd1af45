"""The disruption pass's pods, kept between runs of one warm environment: listed once, then brought up to
date from the watch (adds, bindings, deletions and finished pods), listed again when the API server no
longer holds the changes since (410) or the watch fails; `generation` moves only when something changed."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from carpool.app import pod_snapshot
from carpool.ports import PodViewChanges
from carpool.sim.cluster.simulated import WATCH_HISTORY_SECONDS, SimulatedCluster

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.elapsed = 0.0


def pod(name: str, node: str | None = None, phase: str = "Running") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "apps", "ownerReferences": [{"kind": "ReplicaSet", "name": "rs"}]},
            "spec": spec, "status": {"phase": phase}}


@pytest.fixture()
def world() -> tuple[SimulatedCluster, Clock, Any]:
    clock = Clock()
    cluster = SimulatedCluster(lambda: NOW, elapsed=lambda: clock.elapsed)
    return cluster, clock, SimpleNamespace(cluster=cluster, cache={})


def nodes_of(snapshot: pod_snapshot.PodSnapshot) -> dict[str, str]:
    return {v.key: v.node for v in snapshot.pods()}


def test_the_first_read_lists_and_later_reads_follow_the_watch(world: Any) -> None:
    cluster, clock, deps = world
    cluster.add_pod(pod("a", "n1"))
    cluster.add_pod(pod("b"))
    first = pod_snapshot.read(deps)
    assert first.how == "listed" and nodes_of(first) == {"apps/a": "n1", "apps/b": ""}
    clock.elapsed = 60
    cluster.add_pod(pod("b", "n2"))  # bound
    cluster.add_pod(pod("c", "n1"))  # created
    cluster.delete_pod("apps/a")  # deleted
    second = pod_snapshot.read(deps)
    assert second is first and second.how == "watched" and second.changed == 3
    assert nodes_of(second) == {"apps/b": "n2", "apps/c": "n1"}
    assert second.generation == first.generation == 1 and second.version == cluster.resource_version


def test_a_finished_pod_leaves_and_a_quiet_minute_changes_nothing(world: Any) -> None:
    cluster, clock, deps = world
    cluster.add_pod(pod("job", "n1"))
    listed = pod_snapshot.read(deps)
    generation = listed.generation
    clock.elapsed = 30
    quiet = pod_snapshot.read(deps)
    assert quiet.how == "watched" and quiet.changed == 0 and quiet.generation == generation
    cluster.add_pod(pod("job", "n1", phase="Succeeded"))
    done = pod_snapshot.read(deps)
    assert nodes_of(done) == {} and done.generation == generation + 1


def test_changes_older_than_the_watch_cache_holds_mean_a_new_list(world: Any) -> None:
    cluster, clock, deps = world
    cluster.add_pod(pod("a", "n1"))
    pod_snapshot.read(deps)
    clock.elapsed = 10
    cluster.add_pod(pod("b", "n1"))
    clock.elapsed = 10 + WATCH_HISTORY_SECONDS + 1  # the run that should have seen "b" never came
    again = pod_snapshot.read(deps)
    assert again.how == "listed" and nodes_of(again) == {"apps/a": "n1", "apps/b": "n1"}
    assert deps.cache[pod_snapshot.CACHE_KEY] is again


def test_a_failed_watch_costs_a_list_not_the_run(world: Any, caplog: pytest.LogCaptureFixture) -> None:
    cluster, _clock, deps = world
    cluster.add_pod(pod("a", "n1"))
    first = pod_snapshot.read(deps)

    def broken(since: str) -> PodViewChanges:
        raise ConnectionError("connection reset by peer")

    cluster.pod_view_changes = broken
    again = pod_snapshot.read(deps)
    assert again.how == "listed" and again.generation == first.generation + 1
    assert "connection reset by peer" in caplog.text and "listing every pod again" in caplog.text


def test_a_new_environment_starts_from_a_list(world: Any) -> None:
    cluster, _clock, deps = world
    cluster.add_pod(pod("a", "n1"))
    pod_snapshot.read(deps)
    fresh = SimpleNamespace(cluster=cluster, cache={})
    assert pod_snapshot.read(fresh).how == "listed"
