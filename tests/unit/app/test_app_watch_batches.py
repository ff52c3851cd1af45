"""The watcher publishes as it watches, in Karpenter's micro-batches: pending pods after 1 s without a new
one or 10 s after the first, a node that needs the registrar at once; driven on a simulated clock."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from test_app_watch import NOW, UNREGISTERED, Publisher, _deps, _join, _launched, _pod

from carpool import delivery
from carpool.app import watch
from carpool.sim.clock import SimClock
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.state.models import NOMINATION_HOLD_AFTER_REGISTRATION


class _World:
    """A simulated cluster whose watch waits on a simulated clock; `at` schedules changes."""

    def __init__(self) -> None:
        self.clock = SimClock(NOW)
        self.cluster = SimulatedCluster(self.clock, elapsed=lambda: self.clock.elapsed)
        self.cluster.waiter = self._wait
        self.changes: list[tuple[float, Callable[[], None]]] = []
        self.publisher = Publisher()
        self.published_at: list[tuple[float, list[str]]] = []
        self.deps = dataclasses.replace(_deps(self.cluster, self.publisher), clock=self.clock)
        put = self.publisher.put_events

        def recorded(entries: Any) -> int:
            self.published_at.append((self.clock.elapsed, [e["DetailType"] for e in entries]))
            return put(entries)

        self.publisher.put_events = recorded  # type: ignore[method-assign]

    def at(self, when: float, change: Callable[[], None]) -> None:
        self.changes.append((when, change))
        self.changes.sort(key=lambda c: c[0])

    def _wait(self, until: float, changed: Callable[[], bool]) -> None:
        """The loop: apply the changes due before `until`, stop at the first one the watch sees."""
        while self.changes and self.changes[0][0] <= until:
            when, change = self.changes.pop(0)
            self.clock.advance(max(0.0, when - self.clock.elapsed))
            change()
            self.cluster.bind()
            if changed():
                return
        self.clock.advance(max(0.0, until - self.clock.elapsed))

    def pending(self, name: str) -> Callable[[], None]:
        return lambda: self.cluster.add_pod(_pod(name))


def test_pods_go_on_the_bus_after_a_second_of_quiet_not_when_the_run_ends() -> None:
    w = _World()
    w.at(5.0, w.pending("a"))
    w.at(5.4, w.pending("b"))
    w.at(30.0, w.pending("c"))
    watch.run(w.deps, watch_seconds=65.0)
    pods = [(round(t, 3), kinds) for t, kinds in w.published_at if kinds]
    # a and b together, 1 s after b; c alone, 1 s after it; nothing held until the run's end at 65 s
    assert pods == [(6.4, ["Pod Unschedulable"] * 2), (31.0, ["Pod Unschedulable"])]


def test_a_steady_stream_of_pods_is_cut_every_ten_seconds() -> None:
    w = _World()
    for i in range(25):
        w.at(2.0 + 0.5 * i, w.pending(f"p{i}"))  # a new pod every 0.5 s for 12 s: never a quiet second
    watch.run(w.deps, watch_seconds=65.0)
    times = [round(t, 3) for t, kinds in w.published_at if kinds]
    assert times[0] == 2.0 + delivery.POD_BATCH_MAX_SECONDS
    assert sum(len(k) for _, k in w.published_at) == 25


def test_a_joined_node_goes_on_the_bus_at_once() -> None:
    w = _World()
    _launched(w.deps, "c1", "i-1")
    w.at(12.5, lambda: _join(w.cluster, "i-1", ready=False, taints=[UNREGISTERED]))
    watch.run(w.deps, watch_seconds=65.0)
    nodes = [(round(t, 3), kinds) for t, kinds in w.published_at if "Node Registered" in kinds]
    assert nodes == [(12.5, ["Node Registered"])]


def test_the_watch_ends_at_the_runs_deadline_counted_from_its_start() -> None:
    w = _World()
    w.at(64.0, w.pending("late"))
    w.at(66.0, w.pending("after"))
    summary = watch.run(w.deps, watch_seconds=65.0)
    assert w.clock.elapsed == 65.0
    # the pod at 64 s is published when the run ends (its second of quiet not reached); the one at 66 s is
    # the next run's
    assert summary.published == 1 and w.published_at[-1][0] == 65.0
    assert w.clock.now() - NOW == timedelta(seconds=65)


def _held_by_registered_claim(w: _World, node_labels: dict[str, str] | None = None) -> None:
    """Pod `left` pending, nominated to claim c1, registered at the run's start; with `node_labels`, its node
    exists with them (carpool's claim label and no `karpenter.sh/initialized`: still joining)."""
    from test_app_watch import _claim

    w.cluster.add_pod(_pod("left"))
    w.cluster.bind()  # no node takes it: Unschedulable
    w.deps.ledger.reserve(_claim("c1", ["default/left"]), None, NOW, 600)
    w.deps.ledger.mark_registered("c1", "ip-i-1", NOW)
    if node_labels is not None:
        w.cluster.add_node({"metadata": {"name": "ip-i-1", "labels": node_labels},
                            "spec": {"providerID": "aws:///us-east-1a/i-1", "taints": []},
                            "status": {"conditions": [{"type": "Ready", "status": "True"}]}})


def test_a_pod_its_registered_node_had_no_room_for_is_published_once_the_hold_passes_within_the_run() -> None:
    """The kube-scheduler packed other pods onto the node launched for `left`: once the registered claim's
    hold passes, the run publishes it (a run later, it would wait another minute for its node)."""
    w = _World()
    _held_by_registered_claim(w)
    summary = watch.run(w.deps, watch_seconds=65.0)
    pods = [round(t, 3) for t, kinds in w.published_at if "Pod Unschedulable" in kinds]
    hold = NOMINATION_HOLD_AFTER_REGISTRATION.total_seconds()
    assert len(pods) == 1 and hold < pods[0] <= hold + 1.0 + delivery.POD_BATCH_IDLE_SECONDS + 0.5, pods
    assert summary.awaiting_nodes == 1  # counted at the resync, while the hold held


def test_a_registered_node_still_held_back_by_a_startup_taint_keeps_its_pods() -> None:
    """Not initialized yet (a startup taint keeps the pods off it): its pods are not published, however long."""
    w = _World()
    _held_by_registered_claim(w, {"karpenter.sh/nodepool": "default", "carpool.dev/nodeclaim": "c1",
                                  "karpenter.sh/registered": "true"})
    watch.run(w.deps, watch_seconds=65.0)
    assert [kinds for _t, kinds in w.published_at if "Pod Unschedulable" in kinds] == []
