"""A NodePool's `terminationGracePeriod` ends the drain: a pod a PodDisruptionBudget (or do-not-disrupt)
holds on the node is evicted while the deadline allows, and deleted once its own grace period would end
past it, through both `Cluster` implementations (the simulated cluster in memory, and the lightkube
adapter over HTTP against the same cluster served as kube-apiserver answers).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from carpool.adapters.k8s.cluster import ClusterAccess, LightkubeCluster
from carpool.app import drain
from carpool.ports import Cluster
from carpool.sim.cluster.apiserver import SimApiServer
from carpool.sim.cluster.simulated import SimulatedCluster

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
DEADLINE = NOW + timedelta(minutes=10)
NODE = "ip-10-0-0-1.ec2.internal"
OWNER = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d9c", "uid": "rs"}]


class FixedToken:
    stale = False

    def token(self) -> str:
        return "k8s-aws-v1.test"


def _node() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}},
            "spec": {"providerID": "aws:///us-east-1a/i-0abc"},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                       "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _pod(name: str, app: str, grace: int, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "shop", "labels": {"app": app}, "ownerReferences": OWNER,
                         "annotations": annotations or {}},
            "spec": {"terminationGracePeriodSeconds": grace,
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]}}


@pytest.fixture(params=["simulated", "lightkube"])
def world(request: pytest.FixtureRequest) -> Iterator[tuple[SimulatedCluster, Cluster, SimApiServer | None]]:
    sim = SimulatedCluster(lambda: NOW)
    sim.add_node(_node())
    sim.add_pod(_pod("checkout-1", "checkout", grace=60))  # held by a budget allowing no disruption
    sim.add_pod(_pod("batch-1", "batch", grace=30, annotations={"karpenter.sh/do-not-disrupt": "true"}))
    sim.add_pod(_pod("search-1", "search", grace=30))
    sim.bind()
    sim.add_pdb({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                 "metadata": {"name": "checkout", "namespace": "shop"},
                 "spec": {"selector": {"matchLabels": {"app": "checkout"}}, "maxUnavailable": 0}})
    if request.param == "simulated":
        yield sim, sim, None
        return
    with SimApiServer(sim) as server:
        yield sim, LightkubeCluster("test", "us-east-1", access=ClusterAccess(server.url, ""), tokens=FixedToken()), server


def _on_node(sim: SimulatedCluster) -> set[str]:
    return {p.name for p in sim.list_pods() if p.spec.node_name == NODE}


def test_before_the_deadline_budgets_and_do_not_disrupt_hold(world: Any) -> None:
    sim, cluster, _server = world
    drain.cordon(cluster, NODE)
    result = drain.drain(cluster, NODE, voluntary=True, deadline=DEADLINE, now=DEADLINE - timedelta(seconds=61))
    assert result.evicted == ["shop/search-1"] and result.deleted == []
    assert set(result.blocked) == {"shop/checkout-1", "shop/batch-1"}
    assert _on_node(sim) == {"checkout-1", "batch-1"}


def test_each_pod_is_deleted_when_its_own_grace_would_end_past_the_deadline(world: Any) -> None:
    sim, cluster, server = world
    drain.cordon(cluster, NODE)
    # 50 s before the deadline: checkout (60 s grace) can no longer end in time, batch (30 s) still can
    result = drain.drain(cluster, NODE, voluntary=True, deadline=DEADLINE, now=DEADLINE - timedelta(seconds=50))
    assert result.deleted == ["shop/checkout-1"]
    assert set(result.blocked) == {"shop/batch-1"}
    # past the deadline: the do-not-disrupt pod goes too, with the minimum grace
    late = drain.drain(cluster, NODE, voluntary=True, deadline=DEADLINE, now=DEADLINE + timedelta(seconds=5))
    assert late.deleted == ["shop/batch-1"] and late.blocked == {}
    assert _on_node(sim) == set()
    deletions = [a for a in sim.actions if a[1] == "delete"]
    assert [a[2] for a in deletions] == ["shop/checkout-1 grace=50s", "shop/batch-1 grace=1s"]
    # their ReplicaSet makes new pods, which wait for a node
    assert {p.name.rsplit("-r", 1)[0] for p in sim.list_pods() if not p.spec.node_name} >= {"checkout-1", "batch-1"}
    if server is not None:  # a DELETE, not an eviction, crossed HTTP
        assert ("DELETE", "/api/v1/namespaces/shop/pods/checkout-1") in server.requests
