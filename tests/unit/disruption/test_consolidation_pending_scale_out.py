"""Consolidation waits while a scale-out is still being served: pending pods that a new node could serve
are scheduled with the candidates' pods (Karpenter's `SimulateScheduling`), so no node is deleted or
replaced under them (`consolidation.blocked_by_pending`). Pods no pool can serve, and pods nominated to a
claim still coming, do not hold consolidation back."""

from __future__ import annotations

from disruption_factories import World

from carpool.disruption.decision import Kind


def _underutilized_pair(w: World) -> None:
    """`b`'s only pod fits on `a`: without pending pods, `b` is deleted."""
    w.node("a")
    w.pod("big-1", "a", cpu="3")
    w.node("b")
    w.pod("small-1", "b", cpu="500m")


def test_without_pending_pods_the_underutilized_node_is_deleted():
    w = World()
    _underutilized_pair(w)
    [d] = w.plan().decisions
    assert (d.kind, d.nodes) == (Kind.DELETE, ("b",))


def test_pending_pods_that_need_a_new_node_hold_consolidation():
    w = World()
    _underutilized_pair(w)
    w.pod("wave-1", cpu="3800m")  # fits no node that exists; an m5.xlarge could take it
    plan = w.plan()
    assert plan.decisions == []
    assert "1 pending pods need a new node" in plan.kept["b"] and "default/wave-1" in plan.kept["b"]
    assert plan.consolidated is None  # the next run searches again


def test_pending_pods_that_fit_the_existing_room_do_not_hold_it():
    w = World()
    _underutilized_pair(w)
    w.node("c")
    w.pod("big-c", "c", cpu="3")
    w.pod("wave-1", cpu="100m")  # room on an existing node takes it
    assert [d.kind for d in w.plan().decisions] != []


def test_a_pod_no_pool_can_serve_does_not_hold_it():
    w = World()
    _underutilized_pair(w)
    w.pod("huge-1", cpu="64")  # larger than every instance type: Karpenter ignores its scheduling error
    [d] = w.plan().decisions
    assert (d.kind, d.nodes) == (Kind.DELETE, ("b",))


def test_a_pod_nominated_to_a_claim_still_coming_does_not_hold_it():
    w = World()
    _underutilized_pair(w)
    w.pod("wave-1", cpu="3800m")
    w.claims.append(w.claims[0].model_copy(update={"name": "booting", "node_name": None, "status": "launched",
                                                   "instance_id": "i-booting"}))
    [d] = w.plan(nominated={"default/wave-1": "booting"}).decisions
    assert (d.kind, d.nodes) == (Kind.DELETE, ("b",))


def test_a_pod_nominated_to_a_full_registered_node_holds_it():
    """The kube-scheduler packed other pods onto the node launched for `wave-1`: nominated there, it has no
    room there, so it waits for a new node and consolidation waits with it."""
    w = World()
    _underutilized_pair(w)
    w.node("c")
    w.pod("full-c", "c", cpu="3900m")
    w.pod("wave-1", cpu="3800m")
    [claim_c] = [c for c in w.claims if c.node_name == "c"]
    plan = w.plan(nominated={"default/wave-1": claim_c.name})
    assert plan.decisions == []
    assert "default/wave-1" in plan.kept["b"]
