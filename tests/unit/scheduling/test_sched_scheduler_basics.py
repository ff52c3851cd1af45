"""Packing, resources, bins in Karpenter's order, node affinity, taints, host ports, opt-out."""

from __future__ import annotations

from sched_factories import GIB, MIB, claim_of, itype, pod, pods, pool, run, standard_types

from carpool import labels as L
from carpool.requirements import Requirement, Requirements
from carpool.scheduling.inputs import ExistingNode, HostPort, InFlightClaim, PodSpec, PreferredNodeTerm
from carpool.taints import Taint, Toleration


def test_identical_pods_pack_onto_one_claim_with_cheapest_option_first():
    result = run(pods("web", 6, cpu=1000, mem_mib=1024), [pool()])
    assert len(result.claims) == 1
    claim = result.claims[0]
    assert len(claim.pods) == 6
    # 6 cpu needs the 8-cpu type or bigger; cheapest first
    assert [t.name for t in claim.instance_types] == ["m5.2xlarge", "m5.4xlarge"]
    assert claim.instance_types[0].capacity_type == L.CAPACITY_SPOT
    assert result.hourly_cost == claim.price


def test_claim_keeps_every_type_that_still_fits_plus_daemonset_overhead():
    ds = PodSpec("kube-system/ds", {"cpu": 1500, "memory": 100 * MIB})
    result = run([pod("a", cpu=500)], [pool()], daemonsets=[ds])
    claim = result.claims[0]
    # 500m + 1500m daemonset = 2000m = exactly m5.large; all four remain
    assert claim.option_count == 4
    assert claim.requests["cpu"] == 2000
    result = run([pod("a", cpu=600)], [pool()], daemonsets=[ds])
    assert [t.name for t in result.claims[0].instance_types][0] == "m5.xlarge"


def test_daemonset_overhead_only_counts_daemonsets_that_land_on_the_pool():
    tainted = pool("tainted", taints=(Taint("dedicated", "NoSchedule", "gpu"),))
    ds_untolerating = PodSpec("kube-system/a", {"cpu": 1500})
    ds_other_arch = PodSpec("kube-system/b", {"cpu": 1500}, requirements=(Requirements.from_labels({L.ARCH: "arm64"}),))
    ds_ok = PodSpec("kube-system/c", {"cpu": 100}, tolerations=(Toleration(operator="Exists"),))
    p = pod("x", cpu=500, tolerations=(Toleration("dedicated", "Equal", "gpu", "NoSchedule"),))
    result = run([p], [tainted], daemonsets=[ds_untolerating, ds_other_arch, ds_ok])
    assert result.claims[0].requests["cpu"] == 600


def test_no_instance_type_fits_is_explained_with_the_requests():
    result = run([pod("huge", cpu=64000)], [pool()])
    assert not result.claims
    assert result.unschedulable["default/huge"]["default"].startswith("no instance type fits requests cpu=64")


def test_pods_are_placed_biggest_first():
    small = pods("small", 12, cpu=500, mem_mib=256)
    big = [pod("big", cpu=15000, mem_mib=1024)]
    result = run(small + big, [pool()])
    first = result.claims[0]
    assert "default/big" in first.pods  # the big pod opened the first claim, small ones filled it


def test_extended_resources_need_a_type_that_has_them():
    gpu = itype("g5.xlarge", 4, 16, extra={"nvidia.com/gpu": 1}, labels={L.INSTANCE_GPU_COUNT: "1"})
    types = standard_types() + [gpu]
    result = run([pod("train", extra={"nvidia.com/gpu": 1}), pod("web")], [pool(types=types)])
    assert [t.name for t in claim_of(result, "train").instance_types] == ["g5.xlarge"]


def test_initialized_nodes_first_then_uninitialized_by_name_then_new_claims():
    """Karpenter's sortExistingNodes: initialized nodes (and nodes no NodePool manages) first, then the
    uninitialized ones, in-flight claims included, by name; new claims last."""
    room = {"cpu": 1000, "memory": 2 * GIB, "pods": 10}
    inflight = InFlightClaim("b-inflight", "default", {L.ZONE: "zone-a", L.INSTANCE_TYPE: "m5.large"}, room)
    coming_up = ExistingNode("a-coming-up", {L.ZONE: "zone-b", L.NODEPOOL: "default"}, room, pool="default")
    ready = ExistingNode("z-ready", {L.ZONE: "zone-b", L.NODEPOOL: "default", L.NODE_INITIALIZED: "true"}, room,
                         pool="default")
    unmanaged = ExistingNode("y-unmanaged", {L.ZONE: "zone-c"}, room)
    result = run(pods("p", 9, cpu=500, mem_mib=256), [pool()], in_flight=[inflight],
                 existing=[coming_up, ready, unmanaged])
    targets = [result.placements[f"default/p-{i}"] for i in range(9)]
    assert [t.target for t in targets[:8]] == [
        "y-unmanaged", "y-unmanaged", "z-ready", "z-ready", "a-coming-up", "a-coming-up", "b-inflight", "b-inflight",
    ]
    assert [t.kind for t in targets[6:8]] == ["inflight", "inflight"]
    assert targets[8].kind == "claim"
    assert result.nominations()["b-inflight"] == ["default/p-6", "default/p-7"]


def test_existing_node_must_match_node_selector_and_taints():
    node = ExistingNode("node-1", {L.ZONE: "zone-b", "team": "a"}, {"cpu": 8000, "memory": 8 * GIB, "pods": 10},
                        taints=(Taint("team", "NoSchedule", "a"),))
    plain = pod("plain")
    tolerating = pod("tol", tolerations=(Toleration("team", "Equal", "a"),),
                     requirements=(Requirements.from_labels({"team": "a"}),))
    result = run([plain, tolerating], [pool()], existing=[node])
    assert result.placements["default/plain"].kind == "claim"
    assert result.placements["default/tol"].target == "node-1"


def test_required_node_affinity_terms_are_an_or():
    arm = itype("m7g.large", 2, 8, arch="arm64")
    types = standard_types() + [arm]
    terms = (
        Requirements([Requirement.in_(L.ZONE, "zone-nowhere")]),
        Requirements([Requirement.in_(L.ARCH, "arm64")]),
    )
    result = run([pod("p", requirements=terms)], [pool(types=types)])
    assert [t.name for t in claim_of(result, "p").instance_types] == ["m7g.large"]


def test_node_selector_on_zone_pins_the_claim():
    result = run([pod("p", requirements=(Requirements.from_labels({L.ZONE: "zone-c"}),))], [pool()])
    assert claim_of(result, "p").zone == "zone-c"


def test_custom_label_not_defined_by_pool_is_incompatible():
    result = run([pod("p", requirements=(Requirements.from_labels({"team": "a"}),))], [pool()])
    assert result.unschedulable["default/p"]["default"].startswith("incompatible requirement team")
    labelled = pool(labels={"team": "a"})
    result = run([pod("p", requirements=(Requirements.from_labels({"team": "a"}),))], [labelled])
    assert claim_of(result, "p").labels["team"] == "a"


def test_gpu_count_exists_excludes_types_without_the_label():
    gpu = itype("g5.xlarge", 4, 16, labels={L.INSTANCE_GPU_COUNT: "1"})
    types = standard_types() + [gpu]
    p = pod("p", requirements=(Requirements([Requirement.exists(L.INSTANCE_GPU_COUNT)]),))
    result = run([p], [pool(types=types)])
    assert [t.name for t in claim_of(result, "p").instance_types] == ["g5.xlarge"]


def test_preferred_node_affinity_is_honoured_then_relaxed():
    prefer_c = (PreferredNodeTerm(50, Requirements.from_labels({L.ZONE: "zone-c"})),)
    result = run([pod("p", preferred_node_affinity=prefer_c)], [pool()])
    assert claim_of(result, "p").zone == "zone-c"
    assert "default/p" not in result.relaxed
    impossible = (PreferredNodeTerm(50, Requirements.from_labels({L.ZONE: "zone-x"})),)
    result = run([pod("q", preferred_node_affinity=impossible)], [pool()])
    assert result.placements["default/q"].kind == "claim"
    assert "preferred node affinity" in result.relaxed["default/q"][0]


def test_heaviest_preferred_node_term_wins():
    prefs = (
        PreferredNodeTerm(10, Requirements.from_labels({L.ZONE: "zone-a"})),
        PreferredNodeTerm(90, Requirements.from_labels({L.ZONE: "zone-b"})),
    )
    result = run([pod("p", preferred_node_affinity=prefs)], [pool()])
    assert claim_of(result, "p").zone == "zone-b"


def test_taints_block_untolerating_pods_and_startup_taints_do_not():
    tainted = pool("gpu", taints=(Taint("nvidia.com/gpu", "NoSchedule"),), weight=10)
    startup = pool("startup", startup_taints=(Taint("node.cilium.io/agent-not-ready", "NoExecute"),))
    result = run([pod("p")], [tainted, startup])
    assert claim_of(result, "p").pool == "startup"
    assert claim_of(result, "p").startup_taints
    result = run([pod("q")], [tainted])
    assert result.unschedulable["default/q"]["gpu"] == "taint nvidia.com/gpu:NoSchedule not tolerated"


def test_prefer_no_schedule_taint_is_avoided_then_tolerated():
    soft = pool("soft", taints=(Taint("spot-only", "PreferNoSchedule"),), weight=50)
    hard_limit = pool("plain", limits={"cpu": 0})
    result = run([pod("p")], [soft, hard_limit])
    assert claim_of(result, "p").pool == "soft"
    assert "tolerating PreferNoSchedule taints" in result.relaxed["default/p"]


def test_host_ports_conflict_on_one_node():
    hp = (HostPort(8080),)
    result = run(pods("hp", 3, host_ports=hp) + [pod("other", host_ports=(HostPort(9090),))], [pool()])
    names = {result.placements[f"default/hp-{i}"].target for i in range(3)}
    assert len(names) == 3
    node = ExistingNode("n1", {L.ZONE: "zone-a"}, {"cpu": 8000, "memory": 8 * GIB, "pods": 10},
                        pods=(pod("running", host_ports=hp),))
    result = run([pod("new", host_ports=hp)], [pool()], existing=[node])
    assert result.placements["default/new"].kind == "claim"


def test_daemonset_host_ports_are_held_on_new_claims():
    """Karpenter reserves the host ports of a pool's DaemonSet pods on every new NodeClaim: a pod asking for
    the same port cannot go to a new node of that pool, a pod asking for another port can."""
    agent = pod("agent", cpu=100, mem_mib=64, host_ports=(HostPort(9100),))
    result = run([pod("clash", host_ports=(HostPort(9100),)), pod("fine", host_ports=(HostPort(8080),))],
                 [pool()], daemonsets=[agent], check=False)
    assert "default/clash" not in result.placements
    assert result.placements["default/fine"].kind == "claim"
    other = pool("other", weight=0)
    result = run([pod("clash", host_ports=(HostPort(9100),))], [pool(weight=10), other], daemonsets=[
        pod("agent", cpu=100, mem_mib=64, host_ports=(HostPort(9100),),
            requirements=(Requirements([Requirement.in_(L.NODEPOOL, "default")]),))], check=False)
    assert claim_of(result, "default/clash").pool == "other"


def test_pods_requiring_no_nodepool_are_left_alone():
    opt_out = pod("self-managed", requirements=(Requirements([Requirement.of(L.NODEPOOL, "DoesNotExist")]),))
    result = run([opt_out, pod("normal")], [pool()])
    assert result.opted_out == ["default/self-managed"]
    assert "default/self-managed" not in result.placements
    assert result.to_json()["pods"]["default/self-managed"]["reasons"]


def test_no_offering_available_is_explained():
    unavailable = [(z, ct) for z in ("zone-a", "zone-b", "zone-c") for ct in ("on-demand", "spot")]
    types = [itype("m5.large", 2, 8, unavailable=unavailable)]
    result = run([pod("p")], [pool(types=types)])
    assert result.unschedulable["default/p"]["default"] == "no offering available"


def test_capacity_type_requirement_restricts_offerings():
    p = pod("p", requirements=(Requirements.from_labels({L.CAPACITY_TYPE: L.CAPACITY_ON_DEMAND}),))
    result = run([p], [pool()])
    claim = claim_of(result, "p")
    assert claim.capacity_type == L.CAPACITY_ON_DEMAND
    assert all(t.capacity_type == L.CAPACITY_ON_DEMAND for t in claim.instance_types)


def test_json_shape():
    result = run(pods("web", 2), [pool()])
    out = result.to_json()
    assert set(out) >= {"nodeClaims", "pods", "hourlyCost", "schedulingSeconds"}
    claim = out["nodeClaims"][0]
    assert set(claim) >= {"name", "nodePool", "instanceTypes", "capacityType", "pods"}
    assert out["pods"]["default/web-0"] == {"nodeClaim": claim["name"]}


def test_same_input_same_plan():
    batch = pods("a", 7, cpu=700) + pods("b", 5, cpu=1300, mem_mib=3000)
    first = run(batch, [pool()]).to_json()
    second = run(list(reversed(batch)), [pool()]).to_json()
    first.pop("schedulingSeconds")
    second.pop("schedulingSeconds")
    assert first == second
