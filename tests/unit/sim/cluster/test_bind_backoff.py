"""The simulated kube-scheduler's backoff after a node turns Ready (`Truth.bind_seconds`): the pods that
waited for the node bind when their backoff ends, not in the instant it turns Ready."""

from datetime import UTC, datetime

from carpool.sim.cluster.simulated import SimulatedCluster

from ..conftest import make_node, make_pod


def test_pods_bind_to_a_node_only_once_its_backoff_has_ended():
    elapsed = {"now": 100.0}
    cluster = SimulatedCluster(lambda: datetime(2026, 1, 1, tzinfo=UTC), elapsed=lambda: elapsed["now"])
    cluster.add_node(make_node("n1"))
    cluster.binding_from["n1"] = 110.0
    cluster.add_pod(make_pod("web-0"))

    assert cluster.bind().bound == 0
    assert cluster.pending_count() == 1

    elapsed["now"] = 110.0
    assert cluster.bind().bound == 1
    assert [p.spec.node_name for p in cluster.list_pods()] == ["n1"]


def test_without_a_backoff_pods_bind_at_once():
    cluster = SimulatedCluster(lambda: datetime(2026, 1, 1, tzinfo=UTC))
    cluster.add_node(make_node("n1"))
    cluster.add_pod(make_pod("web-0"))
    assert cluster.bind().bound == 1
