"""Consolidation: delete when the pods fit elsewhere, replace with one cheaper node, multi-node when it
saves more; constraints, spot, protection and PDBs honoured."""

from __future__ import annotations

from datetime import timedelta

from disruption_factories import World, nodepool

from carpool import labels as L
from carpool.disruption import planner
from carpool.disruption.decision import Kind, Reason

ANTI = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": L.HOSTNAME}]}}}


def test_underutilized_node_is_deleted_when_its_pods_fit_on_another():
    w = World()
    w.node("a")
    w.pod("big-1", "a", cpu="3")
    w.node("b")
    w.pod("small-1", "b", cpu="500m")
    [d] = w.plan().decisions
    assert (d.kind, d.reason, d.nodes) == (Kind.DELETE, Reason.UNDERUTILIZED, ("b",))
    assert d.replacement is None and d.savings == 0.192


def test_oversized_node_is_replaced_by_the_cheapest_type_that_holds_its_pods():
    w = World()
    w.node("a", "m5.2xlarge")
    w.pod("web-1", "a", cpu="1")
    [d] = w.plan().decisions
    assert (d.kind, d.nodes) == (Kind.REPLACE, ("a",))
    assert d.replacement is not None and d.replacement.pods == ("default/web-1",)
    [claim] = d.replacement.claims
    assert [t.name for t in claim.instance_types] == ["m5.large", "m5.xlarge"]  # only cheaper than 0.384
    assert d.savings == round(0.384 - 0.096, 6)
    assert "m5.large" in d.message


def test_node_already_on_the_cheapest_fitting_type_is_kept():
    w = World()
    w.node("a", "m5.large")
    w.pod("web-1", "a", cpu="1500m")
    plan = w.plan()
    assert plan.decisions == [] and "cheaper" in plan.kept["a"]


def test_multi_node_consolidation_when_it_saves_more():
    w = World(nodepools={"default": nodepool(budgets=[{"nodes": "100%"}])})
    for name in ("a", "b", "c"):
        w.node(name)
        w.pod(f"web-{name}", name, cpu="600m")
    [d] = w.plan().decisions
    # three m5.xlarge (0.576/h) -> one m5.large (0.096/h); a single-node step would save at most 0.192
    assert d.nodes == ("a", "b", "c") and d.kind == Kind.REPLACE
    assert d.replacement.claims[0].instance_types[0].name == "m5.large"
    assert d.savings == round(0.576 - 0.096, 6)


def test_multi_node_stays_within_the_budget():
    w = World()  # default 10% of 3 nodes: 1 node at a time
    for name in ("a", "b", "c"):
        w.node(name)
        w.pod(f"web-{name}", name, cpu="600m")
    plan = w.plan()
    assert [len(d.nodes) for d in plan.decisions] == [1]


def test_multi_node_never_relaunches_a_type_it_removes_unless_cheaper():
    w = World(nodepools={"default": nodepool(budgets=[{"nodes": "100%"}])})
    w.node("a", "m5.xlarge")
    w.pod("web-a", "a", cpu="3")
    w.node("b", "m5.large")
    w.pod("web-b", "b", cpu="500m")
    # together they need an m5.xlarge: replacing both with the type of `a` is just deleting `b`
    [d] = w.plan().decisions
    assert (d.kind, d.nodes) == (Kind.DELETE, ("b",))


def test_required_anti_affinity_is_honoured():
    w = World()
    for name in ("a", "b"):
        w.node(name)
        w.pod(f"web-{name}", name, cpu="500m", labels={"app": "web"}, spec=ANTI)
    plan = w.plan()
    # the pods may not share a node: no delete; each node can only become a cheaper single node
    assert all(d.kind == Kind.REPLACE and len(d.nodes) == 1 for d in plan.decisions)
    assert plan.decisions and all(d.replacement.claims[0].instance_types[0].name == "m5.large" for d in plan.decisions)


def test_node_selector_keeps_pods_where_they_can_run():
    w = World()
    w.node("a", extra_labels={"disk": "ssd"})
    w.pod("db-1", "a", cpu="500m", spec={"nodeSelector": {"disk": "ssd"}})
    w.node("b")
    w.pod("web-1", "b", cpu="3")
    plan = w.plan()
    assert "a" not in {n for d in plan.decisions for n in d.nodes}
    assert "fit nowhere" in plan.kept["a"]


def test_spot_nodes_are_not_replaced_by_spot_unless_enabled():
    w = World(nodepools={"default": nodepool(capacity_types=(L.CAPACITY_SPOT,))})
    w.node("a", "m5.2xlarge", capacity_type=L.CAPACITY_SPOT)
    w.pod("web-1", "a", cpu="1")
    plan = w.plan()
    assert plan.decisions == [] and "spot" in plan.kept["a"]
    [d] = w.plan(planner.Options(spot_to_spot=True)).decisions
    assert d.kind == Kind.REPLACE


def test_unknown_price_allows_delete_not_replace():
    w = World()
    w.node("a", "m5.2xlarge", price=None)
    w.pod("web-1", "a", cpu="1")
    plan = w.plan()
    assert plan.decisions == [] and "price is unknown" in plan.kept["a"]


def test_when_empty_policy_and_consolidate_after_keep_underutilized_nodes():
    w = World(nodepools={"default": nodepool(policy="WhenEmpty")})
    w.node("a", "m5.2xlarge")
    w.pod("web-1", "a", cpu="1")
    assert w.plan().decisions == []
    w = World(nodepools={"default": nodepool(consolidate_after="30m")})
    w.node("a", "m5.2xlarge", quiet_for=timedelta(minutes=10))
    w.pod("web-1", "a", cpu="1")
    plan = w.plan()
    assert plan.decisions == [] and "consolidateAfter" in plan.kept["a"]


def test_do_not_disrupt_scale_down_disabled_and_pdb_keep_nodes():
    for annotate in ({L.DO_NOT_DISRUPT: "true"}, {L.CAS_SCALE_DOWN_DISABLED: "true"}):
        w = World()
        w.node("a", "m5.2xlarge")
        w.pod("web-1", "a", cpu="1", annotations=annotate)
        plan = w.plan()
        assert plan.decisions == [] and next(iter(annotate)) in plan.kept["a"]
    w = World()
    w.node("a", "m5.2xlarge")
    w.pod("web-1", "a", cpu="1", labels={"app": "web"})
    w.pdb("web", {"app": "web"}, min_available=1)
    plan = w.plan()
    assert plan.decisions == [] and "PodDisruptionBudget default/web" in plan.kept["a"]


def test_two_decisions_never_count_on_the_same_free_room():
    w = World(nodepools={"default": nodepool(budgets=[{"nodes": "100%"}])})
    w.node("big", "m5.2xlarge")
    w.pod("web-big", "big", cpu="6")  # 2 cpu free
    for name in ("x", "y"):
        w.node(name, "m5.large")
        w.pod(f"web-{name}", name, cpu="1500m")
    plan = w.plan()
    # only one 1.5-cpu pod fits in big's 2 free cpus: x goes, y (now with nowhere to go) stays
    assert [(d.kind, d.nodes) for d in plan.decisions] == [(Kind.DELETE, ("x",))]


def test_budget_limits_consolidation():
    w = World(nodepools={"default": nodepool(budgets=[{"nodes": "0", "reasons": ["Underutilized"]}])})
    w.node("a", "m5.2xlarge")
    w.pod("web-1", "a", cpu="1")
    plan = w.plan()
    assert plan.decisions == [] and "budget for Underutilized" in plan.waiting["a"]
