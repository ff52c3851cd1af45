"""The planner: rule order, budgets shared across reasons, PDBs across decisions, determinism."""

from __future__ import annotations

import random
from datetime import timedelta

from disruption_factories import World, nodepool

from carpool.api.taints import Taint
from carpool.disruption.decision import Reason
from carpool.state.models import DisruptionProgress


def mixed_world() -> World:
    w = World(nodepools={"default": nodepool(budgets=[{"nodes": "100%"}])})
    w.node("empty")
    w.node("drifted", image="ami-old")
    w.pod("web-d", "drifted", cpu="3")
    w.node("old", age=timedelta(days=40), image="ami-new")
    w.pod("web-o", "old", cpu="3")
    big = w.node("big", "m5.2xlarge", image="ami-new")
    big.spec.taints = [Taint(key="dedicated", value="big", effect="NoSchedule")]  # no room for the others' pods
    w.pod("web-b", "big", cpu="1", spec={"tolerations": [{"key": "dedicated", "operator": "Exists"}]})
    w.node("sick", ready=False, not_ready_for=timedelta(hours=2), image="ami-new")
    for i in range(5):
        w.node(f"full{i}", image="ami-new")
        w.pod(f"busy-{i}", f"full{i}", cpu="3500m")
    return w


AMIS = {name: "ami-new" for name in ["empty", "drifted", "old", "big", "sick"] + [f"full{i}" for i in range(5)]}


def test_rules_run_in_order_repair_empty_drift_expiry_consolidation():
    plan = mixed_world().plan(expected_amis=AMIS)
    assert [(d.reason, d.nodes) for d in plan.decisions] == [
        (Reason.UNHEALTHY, ("sick",)),
        (Reason.EMPTY, ("empty",)),
        (Reason.DRIFTED, ("drifted",)),
        (Reason.EXPIRED, ("old",)),
        (Reason.UNDERUTILIZED, ("big",)),
    ]


def test_one_node_one_decision_the_first_rule_wins():
    w = World()
    w.node("a", image="ami-old", age=timedelta(days=40))  # empty, drifted and expired
    [d] = w.plan(expected_amis={"a": "ami-new"}).decisions
    assert d.reason == Reason.EMPTY


def test_budget_is_shared_by_all_reasons():
    w = World()  # 10% of 10 nodes: one disruption in total
    w.node("empty")
    w.node("drifted", image="ami-old")
    w.pod("web-1", "drifted", cpu="3")
    for i in range(8):
        w.node(f"n{i}")
        w.pod(f"busy-{i}", f"n{i}", cpu="3500m")
    plan = w.plan(expected_amis={"drifted": "ami-new"})
    assert [d.reason for d in plan.decisions] == [Reason.EMPTY]
    assert "budget for Drifted: 1 of 10 nodes, 1 already disrupting" in plan.waiting["drifted"]


def test_nodes_already_disrupting_use_up_the_budget():
    w = World()
    w.node("going", disruption=DisruptionProgress(reason="Drifted"))
    w.pod("web-g", "going", cpu="3")
    w.node("empty")
    assert w.plan().decisions == []


def test_pdb_allowance_is_consumed_across_decisions():
    w = World(nodepools={"default": nodepool(budgets=[{"nodes": "100%"}])})
    for name in ("a", "b"):
        w.node(name, image="ami-old")
        w.pod(f"web-{name}", name, cpu="3", labels={"app": "web"})
    w.pdb("web", {"app": "web"}, max_unavailable=1)
    plan = w.plan(expected_amis={"a": "ami-new", "b": "ami-new"})
    assert [d.nodes for d in plan.decisions] == [("a",)]
    assert "PodDisruptionBudget default/web" in plan.waiting["b"]


def test_same_snapshot_same_plan_whatever_the_input_order():
    first = mixed_world().plan(expected_amis=AMIS)
    for seed in range(5):
        w = mixed_world()
        rng = random.Random(seed)
        rng.shuffle(w.nodes)
        rng.shuffle(w.pods)
        rng.shuffle(w.claims)
        assert w.plan(expected_amis=AMIS) == first


def test_cheaper_to_disrupt_nodes_go_first():
    w = World()
    w.node("many")
    for i in range(3):
        w.pod(f"m-{i}", "many", cpu="100m")
    w.node("one")
    w.pod("o-1", "one", cpu="100m")
    w.node("prio")
    w.pod("p-1", "prio", cpu="100m", spec={"priority": 2**26})  # eviction cost 3
    for i in range(7):
        w.node(f"full{i}")
        w.pod(f"busy-{i}", f"full{i}", cpu="3500m")
    [d] = w.plan().decisions
    assert d.nodes == ("one",)
