"""NodePool order: weight as strict priority, documented tie-break, ordered preferences, proportional split."""

from __future__ import annotations

from collections import Counter

from sched_factories import claim_of, itype, pod, pods, pool, run, standard_types, term

from carpool import labels as L
from carpool.requirements import Requirement
from carpool.scheduling.inputs import PoolSpec
from carpool.scheduling.pools import PoolOrder, PoolState
from carpool.taints import Taint


def flex_types(unavailable: bool = False):
    off = [(z, ct) for z in ("zone-a", "zone-b", "zone-c") for ct in ("on-demand", "spot")] if unavailable else []
    flex = [itype(f"c7i-flex.{s}", c, c * 2, price=0.04 * c, unavailable=off) for s, c in (("large", 2), ("xlarge", 4))]
    other = [itype(f"c7i.{s}", c, c * 2, price=0.03 * c) for s, c in (("large", 2), ("xlarge", 4), ("2xlarge", 8))]
    return flex + other


def anti_pods(n: int):
    return pods("web", n, cpu=1000, labels={"app": "web"}, anti_affinity=(term(L.HOSTNAME, app="web"),))


def test_higher_weight_first_even_when_more_expensive():
    types = flex_types()
    flex = pool("flex", types, weight=100, reqs=[Requirement.in_(L.INSTANCE_FAMILY, "c7i-flex")])
    general = pool("general", types, weight=1)
    result = run(anti_pods(6), [general, flex])
    assert {c.pool for c in result.claims} == {"flex"}
    assert all(t.name.startswith("c7i-flex") for c in result.claims for t in c.instance_types)


def test_lower_weight_only_when_higher_cannot_take_the_pod():
    types = flex_types(unavailable=True)
    flex = pool("flex", types, weight=100, reqs=[Requirement.in_(L.INSTANCE_FAMILY, "c7i-flex")])
    general = pool("general", types, weight=1)
    result = run(anti_pods(6), [general, flex])
    assert {c.pool for c in result.claims} == {"general"}
    big = pod("big", cpu=7000)  # no flex type has 8 cpu
    result = run([big], [general, pool("flex", flex_types(), weight=100,
                                          reqs=[Requirement.in_(L.INSTANCE_FAMILY, "c7i-flex")])])
    assert claim_of(result, "big").pool == "general"


def test_ordered_glob_values_in_one_pool_prefer_flex_then_fall_back():
    ordered = Requirement.in_(L.INSTANCE_FAMILY, "c7i-flex", "*")
    spec = pool("one", flex_types(), reqs=[ordered], ordered_keys=(L.INSTANCE_FAMILY,))
    result = run(anti_pods(4), [spec])
    assert all(t.name.startswith("c7i-flex") for c in result.claims for t in c.instance_types)
    # without the annotation the glob is just "anything": the cheaper c7i wins
    plain = pool("one", flex_types(), reqs=[ordered])
    result = run(anti_pods(1), [plain])
    assert result.claims[0].instance_types[0].name == "c7i.large"
    # flex unavailable: the next tier is used
    spec = pool("one", flex_types(unavailable=True), reqs=[ordered], ordered_keys=(L.INSTANCE_FAMILY,))
    result = run(anti_pods(4), [spec])
    assert len(result.claims) == 4
    assert all(t.name.startswith("c7i.") for c in result.claims for t in c.instance_types)
    # a pod too big for any flex type uses the next tier; a new claim for a smaller one is flex again
    spec = pool("one", flex_types(), reqs=[ordered], ordered_keys=(L.INSTANCE_FAMILY,))
    apart = dict(labels={"app": "web"}, anti_affinity=(term(L.HOSTNAME, app="web"),))
    result = run([pod("big", cpu=7000, **apart), pod("small", cpu=500, **apart)], [spec])
    assert claim_of(result, "big").instance_types[0].name == "c7i.2xlarge"
    assert claim_of(result, "small").instance_types[0].name.startswith("c7i-flex")


def test_equal_weights_break_alphabetically():
    pools = [pool("zeta"), pool("alpha"), pool("mid")]
    result = run([pod("p")], pools)
    assert claim_of(result, "p").pool == "alpha"
    order = [p.name for p in PoolOrder([PoolState(i, s, ()) for i, s in enumerate(pools)])]
    assert order == ["alpha", "mid", "zeta"]
    weighted = [pool("zeta", weight=5), pool("alpha"), pool("mid", weight=5)]
    order = [p.name for p in PoolOrder([PoolState(i, s, ()) for i, s in enumerate(weighted)])]
    assert order == ["mid", "zeta", "alpha"]


def test_proportional_split_70_30_by_nodes():
    a = pool("a", split_share=70)
    b = pool("b", split_share=30)
    result = run(anti_pods(100), [b, a])
    counts = Counter(c.pool for c in result.claims)
    assert sum(counts.values()) == 100
    assert abs(counts["a"] - 70) <= 2 and abs(counts["b"] - 30) <= 2


def test_proportional_split_counts_existing_usage():
    a = pool("a", split_share=50, usage={"nodes": 10})
    b = pool("b", split_share=50)
    result = run(anti_pods(10), [a, b])
    assert Counter(c.pool for c in result.claims) == {"b": 10}


def test_proportional_split_by_cpu():
    a = pool("a", split_share=50, split_by="cpu", types=[itype("m5.xlarge", 4, 16)])
    b = pool("b", split_share=50, split_by="cpu", types=[itype("m5.large", 2, 8)])
    batch = pods("web", 12, cpu=1500, labels={"app": "web"}, anti_affinity=(term(L.HOSTNAME, app="web"),))
    result = run(batch, [a, b])
    counts = Counter(c.pool for c in result.claims)
    # equal cpu: b's nodes are half the size, so b gets twice the nodes
    assert counts == {"a": 4, "b": 8}


def test_split_is_only_among_equal_weights_and_weight_stays_strict():
    a = pool("a", split_share=50)
    b = pool("b", split_share=50)
    top = pool("top", weight=10)
    result = run(anti_pods(6), [a, b, top])
    assert {c.pool for c in result.claims} == {"top"}


def test_pool_spec_gets_nodepool_requirement_and_labels():
    spec = PoolSpec("bare", standard_types(), labels={"team": "a"}, taints=(Taint("x", "NoSchedule"),))
    state = PoolState(0, spec, ())
    assert state.requirements[L.NODEPOOL].has("bare")
    assert state.requirements["team"].has("a")
