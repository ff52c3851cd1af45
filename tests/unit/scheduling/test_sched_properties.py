"""Property tests: whatever the pools, bins and pods, every plan respects every hard constraint.

The plans are checked by `carpool.scheduling.verify` (an independent, loop-based checker): resources on
every remaining option, node affinity and taints, offerings, host ports, anti-affinity on every domain a
claim could still land in, affinity, DoNotSchedule spread skew, NodePool limits and minValues. Every pod
left over must carry a reason for every pool.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sched_factories import GIB, MIB, ZONES, itype, run

from carpool import labels as L
from carpool.requirements import Requirement, Requirements
from carpool.scheduling.inputs import (
    AffinityTerm,
    ExistingNode,
    HostPort,
    LabelSelector,
    PodSpec,
    PoolSpec,
    PreferredNodeTerm,
    TopologySpread,
    WeightedAffinityTerm,
)
from carpool.taints import Taint, Toleration

TYPES = [
    itype("m5.large", 2, 8, pods=8),
    itype("m5.xlarge", 4, 16, pods=16),
    itype("m5.2xlarge", 8, 32, pods=30),
    itype("c5.xlarge", 4, 8, pods=16, zones=ZONES[:2]),
    itype("m7g.large", 2, 8, pods=8, arch="arm64"),
    itype("g5.xlarge", 4, 16, pods=16, extra={"nvidia.com/gpu": 1}, labels={L.INSTANCE_GPU_COUNT: "1"}),
]
TAINT = Taint("dedicated", "NoSchedule", "x")


@st.composite
def pool_specs(draw, name: str) -> PoolSpec:
    reqs = [Requirement.in_(L.NODEPOOL, name)]
    if draw(st.booleans()):
        reqs.append(Requirement.in_(L.ZONE, *draw(st.lists(st.sampled_from(ZONES), min_size=1, max_size=3, unique=True))))
    if draw(st.booleans()):
        reqs.append(Requirement.in_(L.CAPACITY_TYPE, draw(st.sampled_from(["spot", "on-demand"]))))
    if draw(st.booleans()):
        reqs.append(Requirement.of(L.INSTANCE_TYPE, "Exists", min_values=2))
    unavailable = draw(st.lists(st.tuples(st.sampled_from(ZONES), st.sampled_from(["spot", "on-demand"])), max_size=3))
    types = [itype(t.name, t.allocatable["cpu"] // 1000, t.allocatable["memory"] / GIB, t.allocatable["pods"],
                   unavailable=unavailable if draw(st.booleans()) else (),
                   extra={k: v for k, v in t.allocatable.items() if k == "nvidia.com/gpu"},
                   labels={L.INSTANCE_GPU_COUNT: "1"} if "nvidia.com/gpu" in t.allocatable else None,
                   arch=t.requirements[L.ARCH].any() or "amd64",
                   zones=sorted({o.zone for o in t.offerings}))
             for t in TYPES]
    limits = draw(st.sampled_from([None, {"cpu": 8000}, {"cpu": 24000, "nodes": 3}, {"memory": 64 * GIB}]))
    return PoolSpec(
        name,
        types,
        weight=draw(st.integers(0, 2)),
        requirements=Requirements(reqs),
        labels={"team": "a"} if draw(st.booleans()) else {},
        taints=(TAINT,) if draw(st.booleans()) else (),
        limits=limits,
    )


@st.composite
def deployments(draw, index: int) -> list[PodSpec]:
    app = f"d{index}"
    labels = {"app": app}
    kw: dict = {"labels": labels}
    if draw(st.booleans()):
        kw["tolerations"] = (Toleration("dedicated", "Equal", "x"),)
    choice = draw(st.sampled_from(["none", "zone", "arch", "team", "or", "gpu"]))
    if choice == "zone":
        kw["requirements"] = (Requirements.from_labels({L.ZONE: draw(st.sampled_from(ZONES))}),)
    elif choice == "arch":
        kw["requirements"] = (Requirements.from_labels({L.ARCH: draw(st.sampled_from(["amd64", "arm64"]))}),)
    elif choice == "team":
        kw["requirements"] = (Requirements.from_labels({"team": "a"}),)
    elif choice == "or":
        kw["requirements"] = (Requirements.from_labels({"team": "a"}), Requirements.from_labels({L.ZONE: "zone-b"}))
    if draw(st.booleans()):
        kw["preferred_node_affinity"] = (PreferredNodeTerm(10, Requirements.from_labels({L.ZONE: draw(st.sampled_from(ZONES))})),)
    topo = draw(st.sampled_from(["none", "zone-spread", "host-spread", "host-anti", "zone-anti", "zone-aff", "host-aff",
                                 "pref-anti", "soft-spread", "ports", "spread-d0", "pref-anti-d0"]))
    me = LabelSelector.of(labels)
    if topo == "zone-spread":
        kw["spread"] = (TopologySpread(L.ZONE, draw(st.integers(1, 2)), selector=me,
                                       min_domains=draw(st.sampled_from([None, 2, 4]))),)
    elif topo == "host-spread":
        kw["spread"] = (TopologySpread(L.HOSTNAME, draw(st.integers(1, 2)), selector=me),)
    elif topo == "soft-spread":
        kw["spread"] = (TopologySpread(L.ZONE, 1, "ScheduleAnyway", selector=me),)
    elif topo == "host-anti":
        kw["anti_affinity"] = (AffinityTerm(L.HOSTNAME, me),)
    elif topo == "zone-anti":
        kw["anti_affinity"] = (AffinityTerm(L.ZONE, me),)
    elif topo == "zone-aff":
        target = draw(st.sampled_from([app, "d0"]))
        kw["affinity"] = (AffinityTerm(L.ZONE, LabelSelector.of({"app": target})),)
    elif topo == "host-aff":
        kw["affinity"] = (AffinityTerm(L.HOSTNAME, me),)
    elif topo == "pref-anti":
        kw["preferred_anti_affinity"] = (WeightedAffinityTerm(50, AffinityTerm(L.HOSTNAME, me)),)
    elif topo == "spread-d0":  # counts d0's pods, which may otherwise be unconstrained
        kw["spread"] = (TopologySpread(draw(st.sampled_from([L.ZONE, L.HOSTNAME])), 1,
                                       selector=LabelSelector.of({"app": "d0"})),)
    elif topo == "pref-anti-d0":
        kw["preferred_anti_affinity"] = (WeightedAffinityTerm(50, AffinityTerm(L.HOSTNAME, LabelSelector.of({"app": "d0"}))),)
    elif topo == "ports":
        kw["host_ports"] = (HostPort(8080),)
    cpu = draw(st.sampled_from([100, 500, 1000, 1500, 3000, 7000]))
    mem = draw(st.sampled_from([128, 1024, 4096, 12000]))
    requests = {"cpu": cpu, "memory": mem * MIB}
    if choice == "gpu":
        requests["nvidia.com/gpu"] = 1
    n = draw(st.integers(1, 8))
    return [PodSpec(f"ns/{app}-{i}", dict(requests), **kw) for i in range(n)]


@st.composite
def scenarios(draw):
    pools = [draw(pool_specs(name)) for name in draw(st.lists(st.sampled_from(["alpha", "beta", "gamma"]), min_size=1, max_size=3, unique=True))]
    batch = [p for i in range(draw(st.integers(1, 5))) for p in draw(deployments(i))]
    existing = []
    for i in range(draw(st.integers(0, 2))):
        zone = draw(st.sampled_from(ZONES))
        running = tuple(PodSpec(f"old/r{i}-{j}", {"cpu": 100}, labels={"app": draw(st.sampled_from(["d0", "d1", "zz"]))})
                        for j in range(draw(st.integers(0, 2))))
        existing.append(ExistingNode(f"node-{i}", {L.ZONE: zone, L.ARCH: "amd64", "team": "a"},
                                     {"cpu": draw(st.sampled_from([0, 1000, 4000])), "memory": 8 * GIB, "pods": 10},
                                     pods=running))
    return pools, batch, existing


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenarios())
def test_every_plan_respects_every_hard_constraint(scenario):
    pools, batch, existing = scenario
    result = run(batch, pools, existing=existing)  # asserts verify() == []
    for key, reasons in result.unschedulable.items():
        assert set(reasons) == ({p.name for p in pools} or {"*"}), key
        assert all(reasons.values())


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 30), st.integers(1, 3), st.sampled_from([L.ZONE, L.HOSTNAME]))
def test_self_spread_skew_never_exceeds_max_skew(n, skew, key):
    me = LabelSelector.of({"app": "w"})
    batch = [PodSpec(f"ns/w-{i}", {"cpu": 250, "memory": 256 * MIB}, labels={"app": "w"},
                     spread=(TopologySpread(key, skew, selector=me),)) for i in range(n)]
    pool = PoolSpec("p", TYPES[:3], requirements=Requirements.from_labels({L.NODEPOOL: "p"}))
    result = run(batch, [pool])
    assert not result.unschedulable
