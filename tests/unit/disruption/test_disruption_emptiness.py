"""Emptiness: no pods but DaemonSet ones for consolidateAfter; both policies; budgets; protection."""

from __future__ import annotations

from datetime import timedelta

from disruption_factories import World, nodepool

from carpool import labels as L
from carpool.disruption.decision import Kind, Reason
from carpool.state.models import DisruptionProgress


def empty_world(**pool_kw) -> World:
    w = World(nodepools={"default": nodepool(**pool_kw)})
    w.node("busy", "m5.large")
    w.pod("web-1", "busy", cpu="1500m")
    w.node("idle")
    w.pod("agent-idle", "idle", cpu="100m", daemonset=True)
    return w


def test_empty_node_is_deleted_and_daemonset_pods_do_not_count():
    plan = empty_world().plan()
    [d] = plan.decisions
    assert (d.kind, d.reason, d.nodes, d.claims) == (Kind.DELETE, Reason.EMPTY, ("idle",), ("claim-idle",))
    assert d.savings == 0.192 and "empty" in d.message


def test_empty_only_after_consolidate_after_since_the_last_pod_change():
    w = empty_world(consolidate_after="10m")
    w.quiet["idle"] = w.quiet["busy"] = timedelta(minutes=5)
    assert w.plan().decisions == []
    w.quiet["idle"] = timedelta(minutes=10)
    assert [d.nodes for d in w.plan().decisions] == [("idle",)]


def test_consolidate_after_never_disables_emptiness():
    assert empty_world(consolidate_after="Never").plan().decisions == []


def test_when_empty_policy_deletes_empty_nodes_only():
    w = World(nodepools={"default": nodepool(policy="WhenEmpty")})
    w.node("a")
    w.pod("web-1", "a")
    w.node("b")
    w.pod("web-2", "b")  # a and b could be merged, but WhenEmpty does not consolidate
    w.node("c")
    plan = w.plan()
    assert [(d.reason, d.nodes) for d in plan.decisions] == [(Reason.EMPTY, ("c",))]


def test_protected_empty_node_waits():
    w = World()
    w.node("idle", annotations={L.DO_NOT_DISRUPT: "true"})
    plan = w.plan()
    assert plan.decisions == [] and "do-not-disrupt" in plan.waiting["idle"]


def test_empty_budget_per_reason():
    w = World(nodepools={"default": nodepool(budgets=[{"nodes": "0", "reasons": ["Empty"]}, {"nodes": "100%"}])})
    w.node("idle")
    plan = w.plan()
    assert plan.decisions == [] and "budget for Empty: 0 of 1" in plan.waiting["idle"]


def test_ten_percent_of_twenty_nodes_deletes_two_empty_nodes_per_run():
    w = World()
    for i in range(20):
        w.node(f"n{i:02d}")
    plan = w.plan()
    assert [d.nodes[0] for d in plan.decisions] == ["n00", "n01"]
    assert len(plan.waiting) == 18


def test_not_ready_disrupting_or_reserved_nodes_are_not_emptied():
    w = World()
    w.node("notready", ready=False, not_ready_for=timedelta(minutes=1))
    w.node("going", disruption=DisruptionProgress(reason="Drifted", replaced_by=["claim-fresh"]))
    w.node("fresh")  # the replacement of `going`, still empty until `going` drains
    w.pod("web-1", "going")
    assert w.plan().decisions == []


def test_a_node_pending_pods_will_land_on_is_not_empty():
    w = World()
    w.node("idle")
    w.pod("waiting", None, cpu="1")
    assert w.plan().decisions == []


def test_uninitialized_nodes_do_not_count_towards_a_percentage_budget():
    """Karpenter counts initialized nodes only: 4 booting replacements do not turn 50 % of 2 into 50 % of 6."""
    w = World(nodepools={"default": nodepool(budgets=[{"nodes": "50%"}])})
    for name in ("idle-a", "idle-b"):
        w.node(name)
    for i in range(4):
        w.node(f"booting-{i}", initialized=False)
    assert [d.nodes for d in w.plan().decisions] == [("idle-a",)]  # 50 % of 2 initialized nodes: 1
