"""NodePool limits (counted at the largest remaining option) and minValues."""

from __future__ import annotations

from sched_factories import GIB, itype, pod, pods, pool, run, standard_types, term

from carpool import labels as L
from carpool.requirements import Requirement, Requirements
from carpool.scheduling.inputs import InstanceOption
from carpool.scheduling.limits import PoolLimits
from carpool.scheduling.options import InstanceIndex


def apart(n: int, cpu: int = 500):
    return pods("web", n, cpu=cpu, labels={"app": "web"}, anti_affinity=(term(L.HOSTNAME, app="web"),))


def test_new_claim_is_charged_at_its_largest_option():
    # limit 16 cpu; a claim that could still become a 16-cpu m5.4xlarge takes the whole limit
    result = run(apart(2), [pool(limits={"cpu": 16000})])
    assert len(result.claims) == 1
    assert result.unschedulable["default/web-1"]["default"] == "limit cpu exhausted"


def test_claims_drop_options_that_would_break_the_limit():
    result = run(apart(3), [pool(limits={"cpu": 12000})])
    names = [[t.name for t in c.instance_types] for c in result.claims]
    # first claim: only types <= 12 cpu (large/xlarge/2xlarge), charged 8; 4 left: large/xlarge, charged 4
    assert names == [["m5.large", "m5.xlarge", "m5.2xlarge"], ["m5.large", "m5.xlarge"]]
    assert result.unschedulable["default/web-2"]["default"] == "limit cpu exhausted"


def test_limits_count_existing_usage_and_memory():
    result = run(apart(1), [pool(limits={"memory": 32 * GIB}, usage={"memory": 30 * GIB})])
    assert result.unschedulable["default/web-0"]["default"] == "limit memory exhausted"


def test_nodes_limit():
    result = run(apart(3), [pool(limits={"nodes": 2})])
    assert len(result.claims) == 2
    assert result.unschedulable["default/web-2"]["default"] == "limit nodes exhausted"


def test_limit_falls_through_to_next_pool():
    limited = pool("limited", weight=10, limits={"cpu": 2000})
    fallback = pool("fallback")
    result = run(apart(3, cpu=1000), [limited, fallback])
    assert [c.pool for c in result.claims] == ["limited", "fallback", "fallback"]


def test_charge_shrinks_as_options_narrow():
    index = InstanceIndex(standard_types(), Requirements())
    limits = PoolLimits({"cpu": 20000}, {})
    limits.charge(0, index, index.everything)
    assert limits.remaining["cpu"] == 4000
    limits.charge(0, index, 0b0011)  # only large/xlarge left
    assert limits.remaining["cpu"] == 16000


def test_min_values_keeps_enough_distinct_instance_types():
    mv = Requirement.of(L.INSTANCE_TYPE, "Exists", min_values=3)
    result = run(pods("p", 8, cpu=1000, mem_mib=256), [pool(reqs=[mv])])
    for c in result.claims:
        assert c.option_count >= 3
    # without minValues one 8-cpu claim would do; with it each claim must still fit 3 types
    # (m5.xlarge, 2xlarge, 4xlarge), so at most 4 pods of 1 cpu per claim
    assert max(len(c.pods) for c in result.claims) == 4
    assert len(run(pods("p", 8, cpu=1000, mem_mib=256), [pool()]).claims) == 1


def test_min_values_unsatisfiable_is_explained():
    mv = Requirement.of(L.INSTANCE_TYPE, "Exists", min_values=3)
    result = run([pod("big", cpu=7000)], [pool(reqs=[mv])])
    assert result.unschedulable["default/big"]["default"].startswith("minValues not met")


def test_capacity_used_for_limits_defaults_to_allocatable():
    it = itype("m5.large", 2, 8)
    with_capacity = InstanceOption(it.name, it.requirements, it.allocatable, it.offerings, capacity={"cpu": 4000})
    result = run(apart(2), [pool(types=[with_capacity], limits={"cpu": 6000})])
    assert len(result.claims) == 1


def test_usage_past_a_limit_on_a_resource_no_type_has_excludes_every_type():
    # Karpenter's filterByRemainingResources: a type lacking the resource counts 0, which is more than a
    # negative remainder (the limit was lowered below what runs)
    index = InstanceIndex(standard_types(), Requirements())
    assert PoolLimits({"nvidia.com/gpu": 4}, {"nvidia.com/gpu": 6}).allowed(index) == (0, "nvidia.com/gpu")
    assert PoolLimits({"nvidia.com/gpu": 4}, {"nvidia.com/gpu": 4}).allowed(index)[0] == index.everything
