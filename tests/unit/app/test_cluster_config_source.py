"""`ClusterConfigSource`: the config listed from the (simulated) cluster, rechecked every 5 s by the
dependencies' clock, judged again only when a resourceVersion moved; `config_guard` on a cluster without
Karpenter's CRDs; the watcher publishing pending pods again after a NodePool spec change."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import yaml
from test_app_watch import CONFIG, NOW, Publisher, _deps, _pod

from carpool import observability
from carpool.app import config_guard, watch
from carpool.app.cluster_config_source import CONFIG_RECHECK_SECONDS, ClusterConfigSource
from carpool.karpenter_objects import EC2NODECLASS, NODEPOOL, KindNotServed, ObjectKind, ObjectList
from carpool.sim.clock import SimClock
from carpool.sim.cluster.simulated import SimulatedCluster

POOL, CLASS = (doc for doc in yaml.safe_load_all(CONFIG))


class CountingObjects:
    """The simulated cluster's objects, counting the lists made through it (and failing them on demand)."""

    def __init__(self, cluster: SimulatedCluster) -> None:
        self.cluster, self.lists, self.failing = cluster, 0, False

    def list_objects(self, kind: ObjectKind) -> ObjectList:
        self.lists += 1
        if self.failing:
            raise ConnectionError("API server unreachable")
        return self.cluster.list_objects(kind)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)


def _world(*docs: dict[str, Any]) -> tuple[SimClock, SimulatedCluster, CountingObjects, ClusterConfigSource]:
    clock = SimClock(NOW)
    cluster = SimulatedCluster(clock)
    for doc in docs:
        cluster.apply_object(doc)
    objects = CountingObjects(cluster)
    return clock, cluster, objects, ClusterConfigSource(objects, clock=clock)  # type: ignore[arg-type]


def test_a_cold_start_lists_both_kinds_and_serves_the_valid_objects() -> None:
    _, _, objects, source = _world(POOL, CLASS)
    manifests = source.load()
    assert [p.name for p in manifests.nodepools] == ["default"] and [c.name for c in manifests.nodeclasses] == ["default"]
    assert objects.lists == 2
    verdict = source.current().verdict("NodePool", "default")
    assert verdict is not None and verdict.valid and verdict.generation == 1 and verdict.uid


def test_the_list_is_kept_for_five_seconds_of_the_clock_then_made_again() -> None:
    clock, _, objects, source = _world(POOL, CLASS)
    first = source.current()
    clock.advance(CONFIG_RECHECK_SECONDS - 0.1)
    assert source.current() is first and objects.lists == 2
    clock.advance(0.1)
    assert source.current() is first  # listed again, nothing moved: not judged again
    assert objects.lists == 4


def test_an_applied_change_is_judged_at_the_next_list() -> None:
    clock, cluster, _, source = _world(POOL, CLASS)
    assert source.load().nodepools[0].weight == 0
    cluster.apply_object({**POOL, "spec": {**POOL["spec"], "weight": 7}})
    assert source.load().nodepools[0].weight == 0  # within the recheck: the config in hand
    clock.advance(CONFIG_RECHECK_SECONDS)
    assert source.load().nodepools[0].weight == 7


def test_invalidate_lists_at_once() -> None:
    _, cluster, objects, source = _world(POOL, CLASS)
    source.current()
    cluster.delete_object(NODEPOOL, "default")
    source.invalidate()
    assert source.load().nodepools == [] and objects.lists == 4


def test_the_clock_is_the_dependencies() -> None:
    wall, cluster, _, source = _world(POOL, CLASS)
    simulated = SimClock(NOW + timedelta(days=1))
    deps = dataclasses.replace(_deps(cluster, Publisher()), config=source, clock=simulated)
    assert deps.config is source
    source.current()
    cluster.apply_object({**POOL, "spec": {**POOL["spec"], "weight": 3}})
    wall.advance(3600)  # the clock it was built with no longer counts
    assert source.load().nodepools[0].weight == 0
    simulated.advance(CONFIG_RECHECK_SECONDS)
    assert source.load().nodepools[0].weight == 3


def test_no_nodepool_is_no_error_and_is_said_once_per_change(caplog: pytest.LogCaptureFixture) -> None:
    clock, cluster, _, source = _world(CLASS)
    with caplog.at_level(logging.INFO, "carpool.app.cluster_config_source"):
        for _ in range(3):
            assert source.load().nodepools == []
            clock.advance(CONFIG_RECHECK_SECONDS)
        cluster.apply_object(POOL)
        clock.advance(CONFIG_RECHECK_SECONDS)
        assert [p.name for p in source.load().nodepools] == ["default"]
    said = [r.getMessage() for r in caplog.records]
    assert len([m for m in said if "no NodePool can be served" in m]) == 1
    assert said[-1] == "cluster config: 1 NodePool, 1 EC2NodeClass served"


def test_an_object_kept_out_is_named_in_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    bad = {**POOL, "metadata": {"name": "orphan"},
           "spec": {"template": {"spec": {**POOL["spec"]["template"]["spec"],
                                          "nodeClassRef": {**POOL["spec"]["template"]["spec"]["nodeClassRef"],
                                                           "name": "nope"}}}}}
    _, _, _, source = _world(POOL, CLASS, bad)
    with caplog.at_level(logging.WARNING, "carpool.app.cluster_config_source"):
        assert [p.name for p in source.load().nodepools] == ["default"]
    assert any("NodePool orphan: EC2NodeClass 'nope' not found" in r.getMessage() for r in caplog.records)


def test_a_warm_source_keeps_its_config_when_a_list_fails_and_a_cold_one_raises() -> None:
    clock, _, objects, source = _world(POOL, CLASS)
    source.current()
    objects.failing = True
    clock.advance(CONFIG_RECHECK_SECONDS)
    assert [p.name for p in source.load().nodepools] == ["default"]
    cold = ClusterConfigSource(objects, clock=clock)  # type: ignore[arg-type]
    with pytest.raises(ConnectionError):
        cold.load()


def test_without_karpenters_crds_the_source_raises_and_the_guard_stands_still(caplog: pytest.LogCaptureFixture) -> None:
    _, cluster, _, source = _world(POOL, CLASS)
    cluster.karpenter.installed.clear()
    with pytest.raises(KindNotServed):
        source.load()
    deps = dataclasses.replace(_deps(cluster, Publisher()), config=source)
    before = observability.total(config_guard.METRIC)
    with caplog.at_level(logging.ERROR, "carpool.app.config_guard"):
        reason = config_guard.unusable_config(deps, "registrar")
    assert "install Karpenter's CRDs" in reason and "karpenter-crd 1.14.1" in reason
    assert observability.total(config_guard.METRIC) == before + 1
    assert any(r.getMessage().startswith("registrar: carpool does nothing until") for r in caplog.records)


def test_the_guard_lets_a_served_config_through() -> None:
    _, cluster, _, source = _world(POOL, CLASS)
    deps = dataclasses.replace(_deps(cluster, Publisher()), config=source)
    assert config_guard.unusable_config(deps, "registrar") == ""


def test_resource_versions_are_the_lists() -> None:
    _, cluster, _, source = _world(POOL, CLASS)
    source.current()
    versions = source.resource_versions()
    assert set(versions) == {NODEPOOL.kind, EC2NODECLASS.kind}
    assert versions[NODEPOOL.kind] == cluster.list_objects(NODEPOOL).resource_version


# -- the watcher ---------------------------------------------------------------------------------------
class _WatchedWorld:
    """A simulated cluster whose watch waits on a simulated clock (as `test_app_watch_batches`), with the
    config listed from it."""

    def __init__(self) -> None:
        self.clock = SimClock(NOW)
        self.cluster = SimulatedCluster(self.clock, elapsed=lambda: self.clock.elapsed)
        self.cluster.waiter = self._wait
        for doc in (POOL, CLASS):
            self.cluster.apply_object(doc)
        self.changes: list[tuple[float, Callable[[], None]]] = []
        self.publisher = Publisher()
        self.published_at: list[tuple[float, list[str]]] = []
        self.deps = dataclasses.replace(_deps(self.cluster, self.publisher), clock=self.clock,
                                        config=ClusterConfigSource(self.cluster))
        put = self.publisher.put_events

        def recorded(entries: Any) -> int:
            self.published_at.append((self.clock.elapsed, sorted(e["Detail"] for e in entries)))
            return put(entries)

        self.publisher.put_events = recorded  # type: ignore[method-assign]

    def at(self, when: float, change: Callable[[], None]) -> None:
        self.changes.append((when, change))
        self.changes.sort(key=lambda c: c[0])

    def _wait(self, until: float, changed: Callable[[], bool]) -> None:
        while self.changes and self.changes[0][0] <= until:
            when, change = self.changes.pop(0)
            self.clock.advance(max(0.0, when - self.clock.elapsed))
            change()
            self.cluster.bind()
            if changed():
                return
        self.clock.advance(max(0.0, until - self.clock.elapsed))

    def pod_publications(self) -> list[float]:
        return [at for at, details in self.published_at if details]


def test_a_nodepool_spec_change_publishes_the_pending_pods_again() -> None:
    w = _WatchedWorld()
    w.cluster.add_pod(_pod("a"))
    w.cluster.bind()
    edited = {**POOL, "spec": {**POOL["spec"], "weight": 5}}
    w.at(20.0, lambda: w.cluster.apply_object(edited))
    summary = watch.run(w.deps, watch_seconds=60)
    # the resync's publication at the start, then again once every environment's config is fresh
    assert w.pod_publications() == [0.0, 20.0 + CONFIG_RECHECK_SECONDS + 1.0]
    assert summary.resource_versions[NODEPOOL.kind]


def test_a_status_write_is_no_change() -> None:
    w = _WatchedWorld()
    w.cluster.add_pod(_pod("a"))
    w.cluster.bind()
    w.at(20.0, lambda: w.cluster.patch_status(NODEPOOL, "default", {"conditions": []}))
    w.at(30.0, lambda: w.cluster.patch_object(NODEPOOL, "default", {"metadata": {"labels": {"team": "a"}}}))
    watch.run(w.deps, watch_seconds=60)
    assert w.pod_publications() == [0.0]


def test_a_deleted_nodeclass_publishes_the_pending_pods_again() -> None:
    w = _WatchedWorld()
    w.cluster.add_pod(_pod("a"))
    w.cluster.bind()
    w.at(10.0, lambda: w.cluster.delete_object(EC2NODECLASS, "default"))
    watch.run(w.deps, watch_seconds=60)
    assert len(w.pod_publications()) == 2
