"""Drift (AMI, spec hash, requirements, deleted pool), expiry and node repair."""

from __future__ import annotations

from datetime import timedelta

from disruption_factories import World, nodeclass, nodepool

from carpool import labels as L
from carpool.disruption import drift
from carpool.disruption.decision import Kind, Reason


def test_ami_change_replaces_the_node_first():
    w = World()
    w.node("a", image="ami-old")
    w.pod("web-1", "a", cpu="3")
    [d] = w.plan(expected_amis={"a": "ami-new"}).decisions
    assert (d.kind, d.reason, d.nodes) == (Kind.REPLACE, Reason.DRIFTED, ("a",))
    assert d.replacement.pods == ("default/web-1",)
    assert "ami-old" in d.message and "ami-new" in d.message


def test_drifted_node_whose_pods_fit_elsewhere_is_deleted():
    w = World(nodepools={"default": nodepool(budgets=[{"nodes": "100%"}])})
    w.node("a", image="ami-old")
    w.pod("web-1", "a", cpu="1")
    w.node("b", image="ami-new")
    w.pod("web-2", "b", cpu="1")
    [d] = w.plan(expected_amis={"a": "ami-new", "b": "ami-new"}).decisions
    assert (d.kind, d.reason, d.nodes) == (Kind.DELETE, Reason.DRIFTED, ("a",))


def test_pods_of_a_drifted_node_do_not_move_onto_another_drifted_node():
    w = World(nodepools={"default": nodepool(budgets=[{"nodes": "100%"}])})
    for name in ("a", "b"):
        w.node(name, image="ami-old")
        w.pod(f"web-{name}", name, cpu="1")
    plan = w.plan(expected_amis={"a": "ami-new", "b": "ami-new"})
    assert [(d.reason, d.kind) for d in plan.decisions] == [(Reason.DRIFTED, Kind.REPLACE)] * 2


def test_drift_respects_budgets():
    w = World()
    for i in range(5):
        w.node(f"n{i}", image="ami-old")
        w.pod(f"web-{i}", f"n{i}", cpu="3")
    plan = w.plan(expected_amis={f"n{i}": "ami-new" for i in range(5)})
    assert [d.nodes for d in plan.decisions] == [("n0",)]  # 10% of 5, rounded up
    assert all("budget for Drifted" in plan.waiting[f"n{i}"] for i in range(1, 5))


def test_drift_waits_for_do_not_disrupt_and_pdbs():
    w = World()
    w.node("a", image="ami-old")
    w.pod("web-1", "a", annotations={L.DO_NOT_DISRUPT: "true"})
    plan = w.plan(expected_amis={"a": "ami-new"})
    assert plan.decisions == [] and "do-not-disrupt" in plan.waiting["a"]


def test_no_ami_for_the_type_any_more_is_drift_and_unchecked_nodes_are_not():
    w = World()
    w.node("a", image="ami-old")
    w.pod("web-1", "a", cpu="3")
    assert w.plan(expected_amis={"a": None}).decisions[0].reason == Reason.DRIFTED
    assert w.plan(expected_amis={}).decisions == []  # AMI resolution unavailable: not judged


def test_static_drift_from_the_spec_hash():
    pool, klass = nodepool(), nodeclass()
    w = World()
    w.node("a", spec_hash=drift.spec_hash(pool, klass))
    w.pod("web-1", "a", cpu="3")
    assert w.plan().decisions == []
    w.nodepools["default"] = nodepool(labels={"team": "blue"})
    [d] = w.plan().decisions
    assert d.reason == Reason.DRIFTED and "changed since the node was launched" in d.message


def test_spec_hash_ignores_what_does_not_need_a_new_node():
    base = drift.spec_hash(nodepool(), nodeclass())
    assert drift.spec_hash(nodepool(expire_after="24h", budgets=[{"nodes": "1"}], consolidate_after="5m"),
                           nodeclass()) == base
    assert drift.spec_hash(nodepool(), nodeclass(alias="al2023@latest")) == base  # AMIs: checked by resolution
    assert drift.spec_hash(nodepool(taints=[{"key": "gpu", "effect": "NoSchedule"}]), nodeclass()) != base


def test_requirement_drift_and_deleted_pool():
    w = World(nodepools={"default": nodepool(capacity_types=(L.CAPACITY_SPOT,))})
    w.node("a")  # on-demand, the pool now wants spot only
    w.pod("web-1", "a", cpu="3")
    [d] = w.plan().decisions
    assert d.reason == Reason.DRIFTED and "karpenter.sh/capacity-type=on-demand" in d.message
    w.nodepools.clear()
    plan = w.plan()
    assert "NodePool default no longer exists" in plan.waiting.get("a", "") + "".join(d.message for d in plan.decisions)


def test_expired_node_is_replaced_and_never_does_not_expire():
    w = World()
    w.node("a", age=timedelta(days=31))
    w.pod("web-1", "a", cpu="3")
    [d] = w.plan().decisions
    assert (d.kind, d.reason) == (Kind.REPLACE, Reason.EXPIRED) and "expireAfter is 720h" in d.message
    w.nodepools["default"] = nodepool(expire_after="Never")
    assert w.plan().decisions == []


def test_expiry_is_limited_by_budgets_without_reasons_only():
    w = World(nodepools={"default": nodepool(budgets=[{"nodes": "0", "reasons": ["Drifted"]}, {"nodes": "100%"}])})
    w.node("a", age=timedelta(days=31))
    w.pod("web-1", "a", cpu="3")
    assert [d.reason for d in w.plan().decisions] == [Reason.EXPIRED]


def test_unhealthy_node_is_repaired_forcefully():
    w = World()
    w.node("sick", ready=False, not_ready_for=timedelta(minutes=40), annotations={L.DO_NOT_DISRUPT: "true"})
    w.pod("web-1", "sick")
    for i in range(4):
        w.node(f"ok{i}")
    [d] = w.plan().decisions
    assert (d.kind, d.reason, d.nodes, d.forceful) == (Kind.DELETE, Reason.UNHEALTHY, ("sick",), True)


def test_repair_waits_a_while_and_stops_when_much_of_the_pool_is_unhealthy():
    w = World()
    w.node("sick", ready=False, not_ready_for=timedelta(minutes=20))
    assert w.plan().decisions == []
    w = World()
    for i in range(3):
        w.node(f"sick{i}", ready=False, not_ready_for=timedelta(hours=1))
    w.node("ok1")
    w.node("ok2")
    plan = w.plan()
    assert plan.decisions == [] and "3 of 5 nodes are unhealthy" in plan.waiting["sick0"]
