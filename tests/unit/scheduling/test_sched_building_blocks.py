"""Pod grouping, the instance index, the room index, topology counters and preference relaxation."""

from __future__ import annotations

from sched_factories import GIB, itype, pod, pods, spread, standard_types, term

from carpool import labels as L
from carpool.requirements import Requirement, Requirements
from carpool.scheduling.inputs import LabelSelector, PreferredNodeTerm, WeightedAffinityTerm
from carpool.scheduling.options import InstanceIndex, bits
from carpool.scheduling.podgroups import group_pods, normalized_requests
from carpool.scheduling.preferences import Preferences
from carpool.scheduling.room import RoomIndex
from carpool.scheduling.topology import ANTI, SPREAD, TopologyGroup
from carpool.taints import Taint


def test_identical_pods_share_a_group_and_groups_go_biggest_first():
    batch = pods("a", 3, cpu=500, mem_mib=100) + pods("b", 2, cpu=1000, mem_mib=50) + pods("c", 2, cpu=500, mem_mib=900)
    batch.append(pod("a-odd", cpu=500, mem_mib=100, labels={"x": "1"}))
    groups, opted = group_pods(batch)
    assert [g.count for g in groups] == [2, 2, 3, 1]
    assert groups[0].keys == ["default/b-0", "default/b-1"]
    assert groups[1].keys[0] == "default/c-0"
    assert opted == []


def test_requests_always_take_a_pod_slot():
    assert normalized_requests(pod("p"))["pods"] == 1


def test_index_orders_cheapest_first_and_answers_fit_and_labels():
    types = standard_types() + [itype("c5.large", 2, 4, price=0.01, arch="arm64")]
    index = InstanceIndex(types, Requirements())
    assert index.types[0].name == "c5.large"
    fit = index.fit_mask({"cpu": 3000, "memory": 8 * GIB})
    assert index.names(fit) == ["m5.xlarge", "m5.2xlarge", "m5.4xlarge"]
    arm = index.label_mask(Requirements.from_labels({L.ARCH: "arm64"}))
    assert index.names(arm) == ["c5.large"]
    assert index.max_allocatable(fit, "cpu") == 16000
    assert index.max_allocatable(0, "cpu") == 0
    assert list(bits(0b1010)) == [1, 3]


def test_index_offering_mask_respects_zone_and_capacity_type():
    types = [itype("m5.large", 2, 8, unavailable=[("zone-a", "spot")])]
    index = InstanceIndex(types, Requirements())
    spot_a = Requirements.from_labels({L.ZONE: "zone-a", L.CAPACITY_TYPE: "spot"})
    assert index.compatible_mask(spot_a) == 0
    assert index.compatible_mask(Requirements.from_labels({L.ZONE: "zone-a"})) == 1


def test_index_tiers_follow_preference_rank():
    types = [itype("c7i.large", 2, 4), itype("c7i-flex.large", 2, 4), itype("m5.large", 2, 8)]
    index = InstanceIndex(types, Requirements())
    reqs = Requirements([Requirement.in_(L.INSTANCE_FAMILY, "c7i-flex", "c7i", "*")])
    tiers = [index.names(t) for t in index.tiers(reqs, [L.INSTANCE_FAMILY])]
    assert tiers == [["c7i-flex.large"], ["c7i.large"], ["m5.large"]]


def test_room_index_masks_shrink_with_room():
    room = RoomIndex([{"cpu": 500, "memory": GIB}, {"cpu": 2000, "memory": GIB}])
    room.update(0, {"cpu": 4000, "memory": 4 * GIB, "pods": 5})
    room.update(1, {"cpu": 1000, "memory": 4 * GIB, "pods": 5})
    big = room.position({"cpu": 2000, "memory": GIB, "pods": 1})
    small = room.position({"cpu": 500, "memory": GIB, "pods": 1})
    assert room.candidates(big) == 0b01 and room.candidates(small) == 0b11
    room.update(0, {"cpu": 1000, "memory": 4 * GIB, "pods": 0})
    assert room.candidates(big) == 0 and room.candidates(small) == 0b10


def test_spread_allowed_domains_and_budgets():
    tg = TopologyGroup(0, SPREAD, L.ZONE, LabelSelector.of({"app": "w"}), frozenset({"default"}), max_skew=1)
    tg.add("a", 2)
    tg.add("b", 1)
    doms = frozenset({"a", "b", "c"})
    assert tg.allowed(doms, True) == {"c": 1}
    tg.add("c", 1)
    assert tg.allowed(doms, True) == {"b": 1, "c": 1}
    tg.min_domains = 4  # fewer domains than minDomains: global minimum is 0
    assert tg.allowed(doms, True) == {}


def test_hostname_counts_keep_threshold_masks():
    tg = TopologyGroup(0, ANTI, L.HOSTNAME, LabelSelector.of({"app": "w"}), None)
    tg.track(2)
    tg.add_host(3, 1)
    tg.add_host(5, 2)
    assert tg.at_least[1] == (1 << 3) | (1 << 5)
    assert tg.at_least[2] == 1 << 5
    assert tg.host_budget(3, True) == 0 and tg.host_budget(4, True) == 1


def test_relaxation_order_follows_karpenter():
    p = pod(
        "p",
        preferred_affinity=(WeightedAffinityTerm(5, term(L.ZONE, app="a")), WeightedAffinityTerm(50, term(L.ZONE, app="b"))),
        preferred_anti_affinity=(WeightedAffinityTerm(1, term(L.HOSTNAME, app="c")),),
        preferred_node_affinity=(PreferredNodeTerm(1, Requirements.from_labels({L.ZONE: "z"})),),
        spread=(spread(L.ZONE, hard=False, app="p"), spread(L.HOSTNAME, hard=True, app="p")),
    )
    prefs = Preferences(p, tolerate_prefer_no_schedule=True)
    v = prefs.current
    assert len(v.affinity) == 2 and len(v.anti_affinity) == 1 and len(v.spreads) == 2
    assert v.terms[0][L.ZONE].has("z")
    steps = []
    while (nxt := prefs.relax()) is not None:
        steps.append(nxt.relaxed[-1])
    assert steps == [
        "preferred pod affinity on topology.kubernetes.io/zone (app=b)",
        "preferred pod affinity on topology.kubernetes.io/zone (app=a)",
        "preferred pod anti-affinity on kubernetes.io/hostname (app=c)",
        f"preferred node affinity {Requirements.from_labels({L.ZONE: 'z'})!r}",
        "ScheduleAnyway spread on topology.kubernetes.io/zone",
        "tolerating PreferNoSchedule taints",
    ]
    final = prefs.current
    assert final.affinity == () and final.anti_affinity == () and len(final.spreads) == 1
    assert final.terms == (Requirements(),)
    assert any(t.tolerates(Taint("x", "PreferNoSchedule")) for t in final.tolerations)
