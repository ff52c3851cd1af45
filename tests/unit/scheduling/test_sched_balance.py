"""Unconstrained pods are packed so nodes fill in cpu and memory together, and claims stop growing at
cost-efficient instance types."""

from __future__ import annotations

from sched_factories import claim_of, itype, pods, pool, run, spread, term

from carpool import labels as L
from carpool.scheduling.balance import _fractions
from carpool.scheduling.scheduler import ScheduleOptions


def _one_type():
    return [itype("m.4x", 16, 64, pods=100, price=1.0)]


def test_cpu_heavy_and_memory_heavy_pods_share_nodes():
    # 64 cpu and 128 GiB in total: 4 nodes of 16 cpu when mixed (4 + 4 per node).
    batch = pods("cpu", 16, cpu=3000, mem_mib=1024) + pods("mem", 16, cpu=1000, mem_mib=7168)
    result = run(batch, [pool(types=_one_type())])
    assert len(result.claims) == 4
    for c in result.claims:
        kinds = {k.split("/")[1].split("-")[0] for k in c.pods}
        assert kinds == {"cpu", "mem"}


def test_karpenter_order_alone_strands_memory():
    # the same pods, but each spread over hostnames with a huge skew: constrained, so placed in
    # Karpenter's order (cpu-heavy first), which needs a fifth node
    loose = dict(spread=(spread(L.HOSTNAME, 1000, app="x"),), labels={"app": "x"})
    batch = pods("cpu", 16, cpu=3000, mem_mib=1024, **loose) + pods("mem", 16, cpu=1000, mem_mib=7168, **loose)
    result = run(batch, [pool(types=_one_type())])
    assert len(result.claims) == 5


def test_free_pods_fill_claims_opened_by_constrained_pods_first():
    anti = pods("web", 3, cpu=1000, labels={"app": "web"}, anti_affinity=(term(L.HOSTNAME, app="web"),))
    filler = pods("filler", 6, cpu=1000, mem_mib=1024)
    result = run(anti + filler, [pool(types=_one_type())])
    assert len(result.claims) == 3
    assert all(claim_of(result, f"default/filler-{i}").name in {c.name for c in result.claims} for i in range(6))


def test_free_pods_counted_by_spreads_are_still_counted():
    # the db pods spread over zones and count the web pods (which declare nothing themselves)
    web = pods("web", 6, cpu=500, labels={"app": "web"})
    db = pods("db", 3, cpu=4000, labels={"app": "db"}, spread=(spread(L.ZONE, 1, app="web"),))
    result = run(web + db, [pool()])
    assert all(p.key in result.placements for p in web + db)


def test_claims_grow_only_into_cost_efficient_types():
    # a huge, badly priced type must not become the target just because it can hold everything
    types = [itype("c.4x", 16, 32, price=0.5), itype("c.8x", 32, 64, price=1.0), itype("x.giant", 400, 12000, price=100.0)]
    batch = pods("p", 40, cpu=3000, mem_mib=4096)
    result = run(batch, [pool(types=types)])
    assert {c.instance_types[0].name for c in result.claims} <= {"c.4x", "c.8x"}
    assert all(c.option_count >= 1 for c in result.claims)
    # Karpenter's behaviour (grow until the largest option is full) is still available
    result = run(batch, [pool(types=types)], options=ScheduleOptions(max_instance_types=None, efficiency_tolerance=None))
    constrained = pods("q", 40, cpu=3000, mem_mib=4096, labels={"app": "q"}, spread=(spread(L.HOSTNAME, 100, app="q"),))
    result = run(constrained, [pool(types=types)], options=ScheduleOptions(max_instance_types=None, efficiency_tolerance=None))
    assert result.claims[0].instance_types[0].name == "x.giant"


def test_mix_fractions_fill_both_dimensions():
    alpha, beta = _fractions((30.0, 10.0), (10.0, 70.0), (16.0, 32.0))
    assert abs(alpha * 30 + beta * 10 - 16) < 1e-9 and abs(alpha * 10 + beta * 70 - 32) < 1e-9
    assert _fractions((1.0, 1.0), (1.0, 2.0), (100.0, 100.0)) == (1.0, 1.0)
    assert _fractions((0.0, 0.0), (4.0, 8.0), (2.0, 8.0)) == (0.0, 0.5)
