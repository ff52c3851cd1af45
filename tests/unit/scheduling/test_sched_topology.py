"""Topology spread, pod affinity and anti-affinity on zone and hostname."""

from __future__ import annotations

from collections import Counter

from sched_factories import GIB, ZONES, claim_of, pod, pods, pool, run, spread, term

from carpool import labels as L
from carpool.requirements import Requirement, Requirements
from carpool.scheduling.inputs import ExistingNode, WeightedAffinityTerm


def zones_of(result, keys):
    return Counter(claim_of(result, k).zone for k in keys)


def test_zone_spread_max_skew_one_balances_three_zones():
    batch = pods("web", 9, labels={"app": "web"}, spread=(spread(L.ZONE, 1, app="web"),))
    result = run(batch, [pool()])
    assert zones_of(result, [p.key for p in batch]) == {z: 3 for z in ZONES}


def test_zone_spread_counts_existing_pods():
    existing = ExistingNode("old", {L.ZONE: "zone-a"}, {}, pods=tuple(pods("old", 2, labels={"app": "web"})))
    batch = pods("web", 4, labels={"app": "web"}, spread=(spread(L.ZONE, 1, app="web"),))
    result = run(batch, [pool()], existing=[existing])
    # zone-a already holds 2: the 4 new pods fill b and c first (2 + 2), never a
    assert zones_of(result, [p.key for p in batch]) == {"zone-b": 2, "zone-c": 2}


def test_zone_spread_max_skew_two_allows_uneven():
    batch = pods("web", 4, labels={"app": "web"}, spread=(spread(L.ZONE, 2, app="web"),),
                 requirements=(Requirements.from_labels({L.CAPACITY_TYPE: "on-demand"}),))
    result = run(batch, [pool()])
    counts = zones_of(result, [p.key for p in batch])
    assert max(counts.values()) - min(counts.get(z, 0) for z in ZONES) <= 2


def test_min_domains_forces_min_zero_when_too_few_domains():
    # only two zones exist but minDomains=3: global minimum counts as 0, so skew 1 allows one pod per zone
    two_zone = pool(reqs=[Requirement.in_(L.ZONE, "zone-a", "zone-b")])
    batch = pods("web", 4, labels={"app": "web"}, spread=(spread(L.ZONE, 1, min_domains=3, app="web"),))
    result = run(batch, [two_zone])
    placed = [p.key for p in batch if p.key in result.placements]
    assert len(placed) == 2
    assert zones_of(result, placed) == {"zone-a": 1, "zone-b": 1}
    assert "topology spread" in result.unschedulable["default/web-2"]["default"]


def test_hostname_spread_one_per_node_and_two_per_node():
    batch = pods("web", 4, labels={"app": "web"}, spread=(spread(L.HOSTNAME, 1, app="web"),))
    result = run(batch, [pool()])
    assert len({result.placements[p.key].target for p in batch}) == 4
    batch = pods("api", 4, labels={"app": "api"}, spread=(spread(L.HOSTNAME, 2, app="api"),))
    result = run(batch, [pool()])
    assert sorted(Counter(result.placements[p.key].target for p in batch).values()) == [2, 2]


def test_schedule_anyway_spread_is_relaxed_when_unsatisfiable():
    crowded = ExistingNode("old-a", {L.ZONE: "zone-a"}, {}, pods=tuple(pods("old", 3, labels={"app": "web"})))
    empty_b = ExistingNode("old-b", {L.ZONE: "zone-b"}, {})
    only_a = pool(reqs=[Requirement.in_(L.ZONE, "zone-a")])
    hard = pod("hard", labels={"app": "web"}, spread=(spread(L.ZONE, 1, app="web"),))
    result = run([hard], [only_a], existing=[crowded, empty_b])
    assert "topology spread on topology.kubernetes.io/zone maxSkew=1" in result.unschedulable["default/hard"]["default"]
    soft = pod("soft", labels={"app": "web"}, spread=(spread(L.ZONE, 1, hard=False, app="web"),))
    result = run([soft], [only_a], existing=[crowded, empty_b])
    assert claim_of(result, "soft").zone == "zone-a"
    assert result.relaxed["default/soft"] == ("ScheduleAnyway spread on topology.kubernetes.io/zone",)


def test_spread_not_selecting_itself_does_not_limit_its_own_count():
    batch = pods("web", 6, labels={"app": "web"}, spread=(spread(L.HOSTNAME, 1, app="db"),))
    result = run(batch, [pool()])
    assert len(result.claims) == 1


def test_hostname_anti_affinity_one_pod_per_node():
    batch = pods("web", 5, labels={"app": "web"}, anti_affinity=(term(L.HOSTNAME, app="web"),))
    result = run(batch + pods("filler", 10, cpu=100), [pool()])
    assert len({result.placements[p.key].target for p in batch}) == 5


def test_zone_anti_affinity_one_pod_per_zone_then_explained():
    batch = pods("db", 4, labels={"app": "db"}, anti_affinity=(term(L.ZONE, app="db"),))
    result = run(batch, [pool()])
    placed = [p.key for p in batch if p.key in result.placements]
    assert zones_of(result, placed) == {z: 1 for z in ZONES}
    left = [p.key for p in batch if p.key not in result.placements]
    assert len(left) == 1
    assert "pod anti-affinity on topology.kubernetes.io/zone" in result.unschedulable[left[0]]["default"]


def test_anti_affinity_is_symmetric_for_existing_pods():
    guard = pod("guard", labels={"app": "guard"}, anti_affinity=(term(L.HOSTNAME, app="web"),))
    node = ExistingNode("n1", {L.ZONE: "zone-a"}, {"cpu": 8000, "memory": 8 * GIB, "pods": 20}, pods=(guard,))
    result = run([pod("web", labels={"app": "web"}), pod("other")], [pool()], existing=[node])
    assert result.placements["default/web"].kind == "claim"
    assert result.placements["default/other"].target == "n1"


def test_anti_affinity_is_symmetric_within_the_batch():
    guard = pod("guard", cpu=2000, labels={"app": "guard"}, anti_affinity=(term(L.HOSTNAME, app="web"),))
    webs = pods("web", 3, cpu=100, labels={"app": "web"})
    result = run([guard] + webs, [pool()])
    guard_node = result.placements["default/guard"].target
    assert all(result.placements[w.key].target != guard_node for w in webs)


def test_zone_affinity_follows_existing_pods():
    node = ExistingNode("db-node", {L.ZONE: "zone-b"}, {}, pods=(pod("db", labels={"app": "db"}),))
    batch = pods("web", 4, labels={"app": "web"}, affinity=(term(L.ZONE, app="db"),))
    result = run(batch, [pool()], existing=[node])
    assert zones_of(result, [p.key for p in batch]) == {"zone-b": 4}


def test_zone_self_affinity_bootstraps_into_one_zone():
    batch = pods("web", 6, labels={"app": "web"}, affinity=(term(L.ZONE, app="web"),),
                 anti_affinity=(term(L.HOSTNAME, app="web"),))
    result = run(batch, [pool()])
    assert len(zones_of(result, [p.key for p in batch])) == 1
    assert len(result.claims) == 6


def test_affinity_to_absent_pods_waits_for_them_in_the_same_batch():
    # the cache pods are smaller, so they come later in the queue; web retries after them
    web = pods("web", 2, cpu=2000, labels={"app": "web"}, affinity=(term(L.HOSTNAME, app="cache"),))
    cache = pods("cache", 1, cpu=100, labels={"app": "cache"})
    result = run(web + cache, [pool()])
    target = result.placements["default/cache-0"].target
    assert all(result.placements[p.key].target == target for p in web)


def test_affinity_to_pods_that_never_exist_is_explained():
    result = run([pod("web", affinity=(term(L.HOSTNAME, app="ghost"),))], [pool()])
    assert "pod affinity on kubernetes.io/hostname" in result.unschedulable["default/web"]["default"]


def test_hostname_affinity_onto_existing_node_with_room_only():
    node = ExistingNode("n1", {L.ZONE: "zone-a"}, {"cpu": 1000, "memory": 4 * GIB, "pods": 10},
                        pods=(pod("db", labels={"app": "db"}),))
    batch = pods("side", 3, labels={"app": "side"}, affinity=(term(L.HOSTNAME, app="db"),))
    result = run(batch, [pool()], existing=[node])
    placed = [p.key for p in batch if p.key in result.placements]
    assert len(placed) == 2 and all(result.placements[k].target == "n1" for k in placed)


def test_preferred_anti_affinity_is_relaxed_after_it_cannot_hold():
    pref = (WeightedAffinityTerm(100, term(L.ZONE, app="db")),)
    batch = pods("db", 5, labels={"app": "db"}, preferred_anti_affinity=pref)
    result = run(batch, [pool()])
    assert all(p.key in result.placements for p in batch)
    assert len(zones_of(result, [p.key for p in batch[:3]])) == 3
    assert any("preferred pod anti-affinity" in " ".join(v) for v in result.relaxed.values())


def test_preferred_affinity_relaxed_before_preferred_anti_affinity():
    prefs = dict(
        preferred_affinity=(WeightedAffinityTerm(10, term(L.HOSTNAME, app="ghost")),),
        preferred_anti_affinity=(WeightedAffinityTerm(10, term(L.HOSTNAME, app="web")),),
    )
    batch = pods("web", 3, labels={"app": "web"}, **prefs)
    result = run(batch, [pool()])
    # the impossible affinity is dropped first; anti-affinity still holds (one per node)
    assert len({result.placements[p.key].target for p in batch}) == 3
    assert result.relaxed["default/web-0"] == ("preferred pod affinity on kubernetes.io/hostname (app=ghost)",)
