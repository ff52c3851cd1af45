"""What keeps a consolidation pass near-linear in the cluster's size: the simulator hands the scheduler
reduced nodes (labels nobody asks about, pods nobody counts) without changing any answer, multi-node
search is capped and timed, single-node search stops at its time budget, and a multi-node delete is not
compared against singles that cannot beat it."""

from __future__ import annotations

import itertools
from typing import Any

from disruption_factories import World, nodepool

from carpool import labels as L
from carpool.disruption import consolidation, planner
from carpool.disruption.consolidation import Simulator
from carpool.scheduling.scheduler import schedule


def busy_world(extra_spec: dict[str, Any] | None = None, labels: dict[str, str] | None = None,
               cpu: str = "1") -> World:
    """Six m5.xlarge nodes (4 cpu) with two pods each: room for any node's pods elsewhere."""
    w = World(nodepools={"default": nodepool(budgets=[{"nodes": "100%"}])})
    for i in range(6):
        team = "a" if i % 2 else "b"
        w.node(f"n{i}", extra_labels={"team": team, "unrelated.example.com/rack": f"r{i}", "cost-center": "x"})
        for j in range(2):
            w.pod(f"app{i}-{j}", f"n{i}", cpu=cpu, mem="1Gi", labels={"app": f"app{i}", **(labels or {})},
                  spec=extra_spec)
    return w


def placements(result: Any) -> dict[str, tuple[str, str]]:
    return {k: (p.kind, p.target) for k, p in result.placements.items()}


def full_simulation(sim: Simulator, view: Any, inputs: Any, node: str) -> Any:
    """What the simulation would answer with every node as the view has it (nothing reduced)."""
    cand = view.candidate(node)
    return schedule(list(cand.pods), inputs.pool_specs, existing=[n for name, n in sim.existing.items() if name != node],
                    daemonsets=inputs.daemonsets)


def test_labels_nobody_asks_about_are_cut_and_answers_do_not_change() -> None:
    affinity = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]}]}}}}
    w = busy_world(affinity)
    inputs = w.inputs()
    sim = Simulator(inputs.view, inputs.pool_specs, inputs.daemonsets)
    keys = consolidation.referenced_keys(inputs.view, inputs.pool_specs, inputs.daemonsets)
    assert "team" in keys and L.ZONE in keys and L.HOSTNAME in keys
    assert "unrelated.example.com/rack" not in keys and "cost-center" not in keys
    for cand in inputs.view.candidates:
        reduced = sim.simulate([cand])
        assert placements(reduced) == placements(full_simulation(sim, inputs.view, inputs, cand.node))
    # the pods of a team-a node only go to the other team-a nodes
    n1 = inputs.view.candidate("n1")
    assert n1 is not None
    targets = {p.target for p in sim.simulate([n1]).placements.values()}
    assert targets and targets <= {"n3", "n5"}


def test_pods_on_nodes_are_counted_when_a_moving_pod_looks_at_them() -> None:
    spread = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "team", "whenUnsatisfiable": "DoNotSchedule",
                                             "labelSelector": {"matchLabels": {"tier": "web"}}}]}
    w = busy_world(spread, labels={"tier": "web"})
    inputs = w.inputs()
    sim = Simulator(inputs.view, inputs.pool_specs, inputs.daemonsets)
    for cand in inputs.view.candidates:
        assert placements(sim.simulate([cand])) == placements(full_simulation(sim, inputs.view, inputs, cand.node))


def test_an_existing_pods_anti_affinity_keeps_every_nodes_pods_in_the_simulation() -> None:
    w = busy_world()
    anti = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": L.HOSTNAME, "labelSelector": {"matchLabels": {"app": "app0"}}}]}}}
    w.pod("guard-0", "n2", cpu="100m", labels={"app": "guard"}, spec=anti)
    inputs = w.inputs()
    sim = Simulator(inputs.view, inputs.pool_specs, inputs.daemonsets)
    n0 = inputs.view.candidate("n0")
    assert n0 is not None
    result = sim.simulate([n0])
    assert placements(result) == placements(full_simulation(sim, inputs.view, inputs, "n0"))
    assert all(p.target != "n2" for p in result.placements.values())  # the guard repels app0's pods


def test_a_multi_node_delete_is_not_compared_with_single_node_simulations() -> None:
    w = busy_world()
    inputs = w.inputs()
    p = planner._Planner(inputs, w.now, planner.Options())
    p._consolidate()
    multi = [d for d in p.out.decisions if len(d.nodes) > 1]
    assert multi and multi[0].kind.value == "delete"
    # the binary search over the candidates, then single-node search for what is left: never a single
    # simulation of a node the multi-node delete took
    assert p.sim.simulations <= 3 + (len(inputs.view.candidates) - len(multi[0].nodes))


def test_the_search_stops_at_its_time_budget_and_says_why() -> None:
    w = World(nodepools={"default": nodepool(budgets=[{"nodes": "100%"}])})
    for i in range(8):
        w.node(f"n{i}", "m5.2xlarge")
        w.pod(f"app{i}-0", f"n{i}", cpu="7", mem="1Gi")  # nothing fits elsewhere: every node is kept
    ticks = itertools.count()
    options = planner.Options(multi_seconds=3, consolidation_seconds=6, clock=lambda: float(next(ticks)))
    result = w.plan(options)
    assert not result.decisions
    skipped = [n for n, why in result.kept.items() if why.startswith("not evaluated in this run")]
    evaluated = [n for n, why in result.kept.items() if not why.startswith("not evaluated")]
    assert skipped and evaluated and len(skipped) + len(evaluated) == 8
    assert "the consolidation search took its 6 s" in result.kept[skipped[0]]


def test_multi_node_search_returns_the_best_prefix_found_when_time_runs_out() -> None:
    w = busy_world(cpu="500m")
    inputs = w.inputs()
    cands = inputs.view.candidates
    full_sim = Simulator(inputs.view, inputs.pool_specs, inputs.daemonsets)
    full = consolidation.multi(cands, full_sim)
    assert full.decision is not None and len(full.decision.nodes) == 6 and full_sim.simulations == 3
    sim = Simulator(inputs.view, inputs.pool_specs, inputs.daemonsets)
    calls = itertools.count()
    got = consolidation.multi(cands, sim, out_of_time=lambda: next(calls) >= 1)
    assert sim.simulations == 1  # the first probe (the first 4 candidates), then time was up
    assert got.decision is not None and got.decision.nodes == tuple(c.node for c in cands[:4])
    none = consolidation.multi(cands, Simulator(inputs.view, inputs.pool_specs), out_of_time=lambda: True)
    assert none.decision is None


def test_a_runs_simulations_share_each_pools_instance_index_and_answer_the_same(monkeypatch: Any) -> None:
    """The pools are the same in every simulation of a run: their instance indexes are built once, and
    the plan is the one indexes built per simulation give."""
    from carpool.scheduling import indexcache, options

    w = busy_world(cpu="500m")
    built: list[int] = []
    real_init = options.InstanceIndex.__init__

    def counting_init(self: Any, *args: Any, **kwargs: Any) -> None:
        built.append(1)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(options.InstanceIndex, "__init__", counting_init)
    shared = w.plan()
    shared_builds = len(built)
    monkeypatch.setattr(indexcache.IndexCache, "index", lambda self, types, reqs: options.InstanceIndex(types, reqs))
    built.clear()
    alone = w.plan()
    assert shared.decisions and (shared.decisions, shared.kept, shared.waiting) == (alone.decisions, alone.kept, alone.waiting)
    assert shared_builds == 1 < len(built)
