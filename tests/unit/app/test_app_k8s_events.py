"""The Kubernetes Events carpool writes: Karpenter's reasons and wording, a name that is the same for the
same event (so the next invocation bumps its count), and a bounded, failure-isolated recorder."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from carpool import k8s_events
from carpool.app import recorder
from carpool.sim.cluster.simulated import SimulatedCluster

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_karpenters_pod_events_and_their_wording() -> None:
    nominated = k8s_events.nominated("shop/web-1", "u1", "default-abc")
    assert (nominated.type, nominated.reason, nominated.message) == (
        "Normal", "Nominated", "Pod should schedule on: nodeclaim/default-abc")
    failed = k8s_events.failed_scheduling("shop/web-1", "u1", {"gpu": "taint gpu not tolerated", "default": "no fit"})
    assert (failed.type, failed.reason) == ("Warning", "FailedScheduling")
    assert failed.message == ('Failed to schedule pod, incompatible with nodepool "default", no fit; '
                              'incompatible with nodepool "gpu", taint gpu not tolerated')
    body = k8s_events.manifest(failed, NOW)
    assert body["involvedObject"] == {"kind": "Pod", "name": "web-1", "namespace": "shop", "uid": "u1",
                                      "apiVersion": "v1"}
    assert body["metadata"]["namespace"] == "shop" and body["count"] == 1


def test_the_same_event_has_the_same_name_and_another_message_another() -> None:
    a = k8s_events.failed_scheduling("shop/web-1", "u1", {"default": "no fit"})
    assert a.name == k8s_events.failed_scheduling("shop/web-1", "u1", {"default": "no fit"}).name
    assert a.name != k8s_events.failed_scheduling("shop/web-1", "u1", {"default": "limit cpu reached"}).name
    assert a.name != k8s_events.failed_scheduling("shop/web-1", "u2", {"default": "no fit"}).name  # another pod


class _Cluster:
    def __init__(self, fail: bool = False) -> None:
        self.fail, self.written = fail, []

    def record_event(self, event: Any, now: datetime) -> None:
        if self.fail:
            raise RuntimeError("forbidden: events is forbidden")
        self.written.append(event.name)


def test_the_recorder_writes_each_event_once_and_at_most_its_bound(caplog: pytest.LogCaptureFixture) -> None:
    cluster = _Cluster()
    deps: Any = SimpleNamespace(cluster=cluster, clock=lambda: NOW)
    events = [k8s_events.nominated(f"shop/web-{i}", "", "c") for i in range(250)]
    caplog.set_level(logging.INFO, logger="carpool.app.recorder")
    assert recorder.record([events[0], *events], deps) == recorder.MAX_PER_INVOCATION
    assert len(set(cluster.written)) == len(cluster.written) == recorder.MAX_PER_INVOCATION
    assert any("150 more Kubernetes events not written" in r.getMessage() for r in caplog.records)


def test_a_failed_event_write_fails_nothing_else() -> None:
    deps: Any = SimpleNamespace(cluster=_Cluster(fail=True), clock=lambda: NOW)
    assert recorder.record([k8s_events.nominated("shop/web-1", "", "c")], deps) == 0


def test_the_simulated_cluster_aggregates_a_repeated_event_into_its_count() -> None:
    cluster = SimulatedCluster(lambda: NOW)
    event = k8s_events.failed_scheduling("shop/web-1", "u1", {"default": "no fit"})
    cluster.record_event(event, NOW)
    cluster.record_event(event, NOW.replace(minute=5))
    (stored,) = cluster.events_of("Pod", "web-1")
    assert stored["count"] == 2 and stored["lastTimestamp"] == "2026-03-01T12:05:00Z"
    assert stored["firstTimestamp"] == "2026-03-01T12:00:00Z"
