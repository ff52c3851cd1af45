"""A reason for every unplaced pod, per NodePool."""

from __future__ import annotations

from sched_factories import itype, pod, pool, run, standard_types

from carpool import labels as L
from carpool.requirements import Requirement, Requirements
from carpool.taints import Taint


def test_reasons_are_given_per_pool():
    pools = [
        pool("tainted", taints=(Taint("dedicated", "NoSchedule", "ml"),)),
        pool("arm", reqs=[Requirement.in_(L.ARCH, "arm64")]),
        pool("small", types=[itype("t3.small", 2, 2)]),
        pool("capped", limits={"cpu": 1000}),
        pool("sold-out", types=[itype("m5.4xlarge", 16, 64, unavailable=[(z, ct) for z in ("zone-a", "zone-b", "zone-c") for ct in ("on-demand", "spot")])]),
        pool("team", reqs=[Requirement.in_("team", "x")]),
    ]
    p = pod("p", cpu=3000, mem_mib=4096, requirements=(Requirements.from_labels({"team": "y"}),))
    result = run([p], pools)
    reasons = result.unschedulable["default/p"]
    assert reasons["tainted"] == "taint dedicated=ml:NoSchedule not tolerated"
    assert reasons["arm"].startswith("incompatible requirement team")
    assert reasons["team"].startswith("incompatible requirement team")
    q = pod("q", cpu=3000, mem_mib=4096)
    reasons = run([q], pools).unschedulable.get("default/q")
    assert reasons is None  # without the team=y requirement the "team" pool takes it


def test_reasons_cover_types_fit_offerings_limits():
    pools = [
        pool("arm", reqs=[Requirement.in_(L.ARCH, "arm64")]),
        pool("small", types=[itype("t3.small", 2, 2)]),
        pool("capped", limits={"cpu": 1000}),
        pool("sold-out", types=[itype("m5.4xlarge", 16, 64, unavailable=[(z, ct) for z in ("zone-a", "zone-b", "zone-c") for ct in ("on-demand", "spot")])]),
    ]
    result = run([pod("p", cpu=3000, mem_mib=4096)], pools)
    reasons = result.unschedulable["default/p"]
    assert reasons["arm"] == f"no instance type matches requirements ({L.ARCH})"
    assert reasons["small"] == "no instance type fits requests cpu=3 memory=4Gi pods=1"
    assert reasons["capped"] == "limit cpu exhausted"
    assert reasons["sold-out"] == "no offering available"
    assert list(reasons) == ["arm", "capped", "small", "sold-out"]


def test_fit_reason_mentions_daemonset_overhead():
    from carpool.scheduling.inputs import PodSpec

    ds = PodSpec("kube-system/ds", {"cpu": 1000})
    result = run([pod("p", cpu=15500)], [pool(types=standard_types())], daemonsets=[ds])
    assert "daemonset overhead cpu=1" in result.unschedulable["default/p"]["default"]


def test_no_pools_at_all():
    result = run([pod("p")], [])
    assert result.unschedulable["default/p"] == {"*": "no NodePool"}


def test_a_pool_whose_node_class_is_not_ready_gives_that_reason_to_the_pods_it_would_take():
    """Issue 38: a pool that cannot launch (no subnet, no AMI) names why, after taints and requirements."""
    why = "EC2NodeClass 'x' is not ready (SubnetInvalid): spec.subnetSelectorTerms: no subnet matches"
    pools = [pool("broken", types=[], not_ready=why),
             pool("broken-arm", types=[], reqs=[Requirement.in_(L.ARCH, "arm64")], not_ready=why)]
    reasons = run([pod("p", requirements=(Requirements.from_labels({L.ARCH: "amd64"}),))], pools).unschedulable
    assert reasons["default/p"]["broken"] == why
    assert reasons["default/p"]["broken-arm"].startswith(f"incompatible requirement {L.ARCH}")
