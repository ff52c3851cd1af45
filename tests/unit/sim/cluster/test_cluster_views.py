"""The simulated cluster's `PodView`s: what the API adapter makes of the same pods, re-read after a change."""

from __future__ import annotations

import dataclasses

import pytest

from carpool.api.k8s import Pod
from carpool.disruption import podview
from carpool.sim.cluster.simulated import SimulatedCluster

from ..conftest import make_node, make_pod

OWNER = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "rs", "controller": True}]


def _cluster(cluster: SimulatedCluster) -> SimulatedCluster:
    cluster.add_node(make_node("n1", cpu="4"))
    for i in range(3):
        cluster.add_pod(make_pod(f"web-{i}", cpu="1", owners=OWNER,
                                 tolerations=[{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]))
    cluster.add_pod(make_pod("solo-0", cpu="8"))  # fits nowhere: stays pending
    cluster.bind()
    return cluster


def test_views_are_the_views_of_the_pods_models(cluster: SimulatedCluster) -> None:
    _cluster(cluster)
    expected = {p.key: podview.from_pod(Pod.model_validate(cluster.pods[p.key].raw)) for p in cluster.active_pods()}
    views = cluster.pod_views()
    assert {v.key: v for v in views} == expected
    assert {v.key for v in cluster.pod_views("n1")} == {"default/web-0", "default/web-1", "default/web-2"}
    assert [v.key for v in cluster.pod_views("")] == ["default/solo-0"]
    assert all(v.spec is not None and v.spec.tolerations for v in cluster.pod_views("n1"))


def test_a_changed_pod_is_seen_as_it_is_now(cluster: SimulatedCluster) -> None:
    _cluster(cluster)
    before = {v.key: v for v in cluster.pod_views()}
    cluster.add_node(make_node("n2", cpu="16"))
    cluster.bind()
    after = {v.key: v for v in cluster.pod_views()}
    assert before["default/solo-0"].node == "" and after["default/solo-0"].node == "n2"
    assert after["default/web-0"] == before["default/web-0"]
    cluster.evict("default/web-0")  # a ReplicaSet's pod comes back under a new name
    keys = {v.key for v in cluster.pod_views()}
    assert "default/web-0" not in keys and len(keys) == 4


def test_finished_pods_are_not_listed(cluster: SimulatedCluster) -> None:
    _cluster(cluster)
    rec = cluster.pods["default/web-1"]
    rec.raw["status"]["phase"] = "Succeeded"
    cluster._record_change("MODIFIED", "Pod", rec)
    assert "default/web-1" not in {v.key for v in cluster.pod_views()}


def test_a_view_cannot_be_changed_by_its_reader(cluster: SimulatedCluster) -> None:
    _cluster(cluster)
    view = cluster.pod_views("n1")[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.node = "elsewhere"  # type: ignore[misc]
    assert cluster.pod_views("n1")[0].node == "n1"


def test_a_bound_pod_is_seen_as_a_fresh_read_of_it_would_be(cluster: SimulatedCluster) -> None:
    """Binding carries a pod's view over (node, phase, health change): it must equal the view the API
    adapter's projection makes of the bound pod's JSON."""
    cluster.add_node(make_node("n1", cpu="1"))
    annotations = {"controller.kubernetes.io/pod-deletion-cost": "100", "karpenter.sh/do-not-disrupt": "true"}
    for i in range(3):
        raw = make_pod(f"web-{i}", cpu="1", owners=OWNER,
                       tolerations=[{"key": "k", "operator": "Exists", "effect": "NoSchedule"}])
        raw["metadata"]["annotations"] = annotations
        cluster.add_pod(raw)
    cluster.bind()  # one fits; the others stay pending
    before = {v.key: v for v in cluster.pod_views()}
    assert sorted(v.node for v in before.values()) == ["", "", "n1"]
    cluster.add_node(make_node("n2", cpu="4"))
    cluster.bind()
    carried = {v.key: v for v in cluster.pod_views()}
    for rec in cluster.pods.values():
        rec.view = None
    fresh = {v.key: v for v in cluster.pod_views()}
    assert carried == fresh
    moved = [k for k, v in before.items() if not v.node]
    assert all(carried[k].node == "n2" and carried[k].phase == "Running" and carried[k].healthy for k in moved)
    assert all(not before[k].healthy and before[k].phase == "Pending" for k in moved)
    assert all(carried[k].spec == before[k].spec and carried[k].protection for k in moved)


def test_binding_does_not_restart_a_finished_pod_view() -> None:
    finished = podview.PodView(key="default/done", node="", phase="Succeeded", labels={}, requests={}, spec=None)
    with pytest.raises(ValueError, match="finished"):
        podview.bound(finished, "n1")
    running = podview.bound(dataclasses.replace(finished, phase="Pending", terminating=True), "n1")
    assert (running.node, running.phase, running.healthy) == ("n1", "Running", False)
