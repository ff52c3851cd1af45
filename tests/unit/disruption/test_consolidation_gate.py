"""Consolidation that does not simulate what cannot change: a candidate whose pods fit no other node and
no cheaper single node is settled without a simulation (and the answer is the simulation's), and a
search that found nothing is not run again until what it saw changes or `RECHECK_AFTER` passes
(Karpenter's consolidated state)."""

from __future__ import annotations

import dataclasses
import random

from disruption_factories import World, nodepool

from carpool.disruption import consolidation, planner
from carpool.disruption.consolidation import Simulator


def packed_world(per_node_cpu: str = "3500m", nodes: int = 4) -> World:
    """m5.xlarge nodes (4 cpu) each holding one pod that leaves no room for another node's pod."""
    w = World(nodepools={"default": nodepool(budgets=[{"nodes": "100%"}])})
    for i in range(nodes):
        w.node(f"n{i}")
        w.pod(f"app{i}-0", f"n{i}", cpu=per_node_cpu, mem="1Gi")
    return w


def test_a_packed_node_is_settled_without_a_simulation_and_the_simulation_agrees() -> None:
    inputs = packed_world().inputs()
    sim = Simulator(inputs.view, inputs.pool_specs, inputs.daemonsets)
    for cand in inputs.view.candidates:
        why = sim.settled([cand])
        assert why is not None and "no other node has room" in why
        result = sim.simulate([cand])
        assert not any(p.kind == "node" for p in result.placements.values())
    assert sim.simulations == len(inputs.view.candidates)  # only the checks above simulated


def test_a_node_whose_pods_fit_elsewhere_is_simulated() -> None:
    inputs = packed_world(per_node_cpu="1").inputs()
    sim = Simulator(inputs.view, inputs.pool_specs, inputs.daemonsets)
    assert all(sim.settled([c]) is None for c in inputs.view.candidates)
    assert consolidation.evaluate([inputs.view.candidates[0]], sim).decision is not None


def test_a_cheaper_type_that_holds_the_pods_means_simulate() -> None:
    """Pods that fit no other node but all fit one cheaper type (an m5.large for 1.8 cpu on an m5.xlarge):
    not settled, and the simulation replaces the node with the cheaper one."""
    w = World(nodepools={"default": nodepool(budgets=[{"nodes": "100%"}])})
    for i in range(3):
        w.node(f"n{i}")
        w.pod(f"big{i}-0", f"n{i}", cpu="3" if i else "1800m", mem="1Gi")
    inputs = w.inputs()
    sim = Simulator(inputs.view, inputs.pool_specs, inputs.daemonsets)
    cand = inputs.view.candidate("n0")
    assert cand is not None and sim.settled([cand]) is None
    outcome = consolidation.evaluate([cand], sim)
    assert outcome.decision is not None and outcome.decision.replacement is not None


def test_settled_never_keeps_what_the_simulation_would_consolidate() -> None:
    """Random clusters: whenever the check settles a candidate (or a pair), the full simulation of the same
    candidates finds no decision either."""
    rng = random.Random(7)
    settled = 0
    for _round in range(40):
        w = World(nodepools={"default": nodepool(budgets=[{"nodes": "100%"}])})
        for i in range(rng.randint(2, 6)):
            w.node(f"n{i}", rng.choice(["m5.large", "m5.xlarge", "m5.2xlarge"]))
            for j in range(rng.randint(1, 4)):
                w.pod(f"p{i}-{j}", f"n{i}", cpu=f"{rng.choice([100, 400, 900, 1500, 1900, 3000])}m",
                      mem=f"{rng.choice([256, 1024, 4096])}Mi")
        inputs = w.inputs()
        cands = inputs.view.candidates
        groups = [[c] for c in cands] + [list(cands[:2])]
        for group in groups:
            sim = Simulator(inputs.view, inputs.pool_specs, inputs.daemonsets)
            if sim.settled(group) is None:
                continue
            settled += 1
            result = sim.simulate(group)
            price = sum(c.price or 0.0 for c in group)
            moved = {p.key for c in group for p in c.pods}
            stayed = [k for k, p in result.placements.items() if k in moved and p.kind == "node"]
            cheaper = [cl for cl in result.claims if any(t.price < price for t in cl.instance_types)]
            assert not stayed, group
            assert not (len(result.claims) == 1 and cheaper and not result.unschedulable), group
    assert settled > 10  # the property was exercised


def test_a_search_that_found_nothing_is_not_run_again_until_something_changes() -> None:
    w = packed_world()
    first = w.plan(state="s1")
    assert first.decisions == [] and first.consolidated is not None
    assert first.consolidated.state and first.consolidated.at == w.now
    assert set(first.kept) == {f"n{i}" for i in range(4)}
    again = w.plan(planner.Options(consolidated=first.consolidated), state="s1")
    assert again.consolidated is first.consolidated and again.kept == {}  # not searched
    changed = w.plan(planner.Options(consolidated=first.consolidated), state="s2")
    assert changed.consolidated is not first.consolidated and set(changed.kept) == set(first.kept)
    unknown = w.plan(planner.Options(consolidated=first.consolidated), state="")
    assert unknown.consolidated is None and set(unknown.kept) == set(first.kept)


def test_the_search_runs_again_after_the_recheck_period() -> None:
    w = packed_world()
    first = w.plan(state="s1")
    later = dataclasses.replace(w, now=w.now + planner.RECHECK_AFTER)
    again = later.plan(planner.Options(consolidated=first.consolidated), state="s1")
    assert set(again.kept) == set(first.kept) and again.consolidated is not first.consolidated
    assert again.consolidated is not None and again.consolidated.at == later.now


def test_a_search_cut_short_or_that_decided_is_searched_again() -> None:
    w = packed_world()
    ticks = iter(range(0, 10_000, 100))
    cut = w.plan(planner.Options(consolidation_seconds=50, clock=lambda: float(next(ticks))), state="s1")
    assert cut.consolidated is None
    roomy = packed_world(per_node_cpu="1")
    decided = roomy.plan(state="s1")
    assert decided.decisions and decided.consolidated is None


def test_a_budget_or_candidate_change_opens_the_gate() -> None:
    w = packed_world()
    first = w.plan(state="s1")
    w.nodepools["default"] = nodepool(budgets=[{"nodes": "0"}])
    closed_budget = w.plan(planner.Options(consolidated=first.consolidated), state="s1")
    assert closed_budget.consolidated is not first.consolidated
    w2 = packed_world(nodes=5)
    more = w2.plan(planner.Options(consolidated=first.consolidated), state="s1")
    assert more.consolidated is not first.consolidated and len(more.kept) == 5
