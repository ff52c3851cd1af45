"""Uninitialized nodes (no `karpenter.sh/initialized=true` yet) are never disrupted voluntarily, nor
counted on as room for other nodes' pods; repair still applies to them (Karpenter's candidate filter)."""

from __future__ import annotations

from datetime import timedelta

from disruption_factories import World, nodepool

from carpool.disruption.decision import Reason


def test_an_empty_uninitialized_node_is_not_deleted_as_empty() -> None:
    w = World()
    w.node("booting", initialized=False)
    w.node("idle")
    plan = w.plan()
    assert [(d.reason, d.nodes) for d in plan.decisions] == [(Reason.EMPTY, ("idle",))]
    view = w.view()
    booting = view.candidate("booting")
    assert booting is not None and booting.ready and booting.registered and not booting.initialized


def test_an_underutilized_uninitialized_node_is_not_consolidated() -> None:
    w = World()
    w.node("a")
    w.pod("big-1", "a", cpu="3")
    w.node("b", initialized=False)
    w.pod("small-1", "b", cpu="500m")
    assert w.plan().decisions == []
    w.nodes[-1].labels["karpenter.sh/initialized"] = "true"  # the registrar initialized it
    assert [(d.reason, d.nodes) for d in w.plan().decisions] == [(Reason.UNDERUTILIZED, ("b",))]


def test_pods_are_not_moved_onto_an_uninitialized_node() -> None:
    w = World()
    w.node("target", "m5.xlarge", initialized=False)  # would hold the pods of "b" if it were initialized
    w.pod("web-1", "target", cpu="500m")
    w.node("b", "m5.xlarge")
    w.pod("web-2", "b", cpu="500m")
    plan = w.plan()
    assert not any(d.nodes == ("b",) and d.replacement is None for d in plan.decisions)
    assert "target" not in {e.name for e in w.view().existing}


def test_an_uninitialized_drifted_node_waits_for_initialization() -> None:
    w = World(nodepools={"default": nodepool(expire_after="1h")})
    w.node("old", age=timedelta(hours=2), initialized=False)
    w.pod("web-1", "old")
    assert w.plan().decisions == []


def test_repair_still_applies_to_a_node_that_never_became_ready() -> None:
    w = World()
    for name in ("a", "b", "c", "d", "e", "f"):
        w.node(name)
    w.node("sick", ready=False, not_ready_for=timedelta(hours=1), initialized=False)
    assert [(d.reason, d.nodes) for d in w.plan().decisions] == [(Reason.UNHEALTHY, ("sick",))]
