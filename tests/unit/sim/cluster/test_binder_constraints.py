"""The binder's inter-pod filters (kube-scheduler's InterPodAffinity and PodTopologySpread): exact placements."""

from typing import Any

from carpool.sim.cluster.simulated import pod_unschedulable

from ..conftest import make_node, make_pod

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def node_of(cluster, key):
    return cluster.pods[key].raw["spec"].get("nodeName")


def placements(cluster, names):
    return [node_of(cluster, f"default/{n}") for n in names]


def anti_affinity(app: str, key: str = HOST) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}]}}


def affinity(app: str, key: str = ZONE) -> dict[str, Any]:
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}]}}


def spread(max_skew: int = 1, key: str = ZONE, **extra: Any) -> list[dict[str, Any]]:
    return [{"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"app": "web"}}, **extra}]


def zonal_nodes(cluster, layout: dict[str, str], cpu: str = "8") -> None:
    for name, zone in layout.items():
        cluster.add_node(make_node(name, cpu=cpu, memory="64Gi", labels={ZONE: zone}))


def test_hostname_anti_affinity_puts_one_pod_per_node_and_leaves_the_rest_unschedulable(cluster):
    for n in ("n1", "n2", "n3"):
        cluster.add_node(make_node(n, cpu="8", memory="32Gi"))
    names = [f"web-{i}" for i in range(5)]
    for name in names:
        cluster.add_pod(make_pod(name, affinity=anti_affinity("web")))
    stats = cluster.bind()
    assert (stats.bound, stats.pending, stats.newly_unschedulable) == (3, 2, 2)
    assert placements(cluster, names) == ["n1", "n2", "n3", None, None]
    assert [pod_unschedulable(cluster.pods[f"default/{n}"].raw) for n in names] == [False, False, False, True, True]


def test_anti_affinity_counts_pods_bound_in_earlier_passes_and_by_zone(cluster):
    zonal_nodes(cluster, {"a1": "a", "a2": "a", "b1": "b"})
    cluster.add_pod(make_pod("web-0", affinity=anti_affinity("web", ZONE)))
    cluster.bind()
    for i in (1, 2):
        cluster.add_pod(make_pod(f"web-{i}", affinity=anti_affinity("web", ZONE)))
    stats = cluster.bind()
    assert (stats.bound, stats.pending) == (1, 1)
    assert placements(cluster, ["web-0", "web-1", "web-2"]) == ["a1", "b1", None]


def test_an_existing_pods_anti_affinity_refuses_a_pod_without_constraints(cluster):
    cluster.add_node(make_node("n1", cpu="8", memory="32Gi"))
    cluster.add_node(make_node("n2", cpu="8", memory="32Gi"))
    cluster.add_pod(make_pod("guard-0", affinity=anti_affinity("web")))
    cluster.bind()
    cluster.add_pod(make_pod("web-0"))
    cluster.add_pod(make_pod("web-1"))
    cluster.add_pod(make_pod("other-0"))
    cluster.bind()
    assert placements(cluster, ["guard-0", "web-0", "web-1", "other-0"]) == ["n1", "n2", "n2", "n1"]


def test_symmetric_anti_affinity_within_one_pass_and_with_no_other_node(cluster):
    cluster.add_node(make_node("n1", cpu="8", memory="32Gi"))
    cluster.add_pod(make_pod("guard-0", affinity=anti_affinity("web")))
    cluster.add_pod(make_pod("web-0"))
    stats = cluster.bind()
    assert (stats.bound, stats.newly_unschedulable) == (1, 1)
    assert node_of(cluster, "default/web-0") is None
    assert pod_unschedulable(cluster.pods["default/web-0"].raw)


def test_zone_spread_max_skew_1_over_three_zones_alternates_zones(cluster):
    zonal_nodes(cluster, {"a1": "a", "a2": "a", "b1": "b", "c1": "c"})
    names = [f"web-{i}" for i in range(7)]
    for name in names:
        cluster.add_pod(make_pod(name, topologySpreadConstraints=spread()))
    assert cluster.bind().bound == 7
    assert placements(cluster, names) == ["a1", "b1", "c1", "a1", "b1", "c1", "a1"]


def test_zone_spread_refuses_pods_once_a_full_zone_would_be_left_behind(cluster):
    zonal_nodes(cluster, {"a1": "a", "b1": "b"})
    cluster.add_node(make_node("c1", cpu="1", memory="64Gi", labels={ZONE: "c"}))  # room for two pods
    names = [f"web-{i}" for i in range(9)]
    for name in names:
        cluster.add_pod(make_pod(name, topologySpreadConstraints=spread()))
    stats = cluster.bind()
    assert (stats.bound, stats.newly_unschedulable) == (8, 1)
    # zone c is full at 2: a and b may run one ahead of it, not two
    assert placements(cluster, names) == ["a1", "b1", "c1", "a1", "b1", "c1", "a1", "b1", None]


def test_a_not_ready_nodes_zone_is_a_domain_and_min_domains_counts_missing_ones(cluster):
    zonal_nodes(cluster, {"a1": "a", "b1": "b"})
    cluster.add_node(make_node("c1", labels={ZONE: "c"}, ready=False))  # nodeTaintsPolicy Ignore: zone c counts
    for i in range(3):
        cluster.add_pod(make_pod(f"web-{i}", topologySpreadConstraints=spread()))
    for i in range(4):
        cluster.add_pod(make_pod(f"api-{i}", labels={"app": "api"}, topologySpreadConstraints=[
            {**spread(key=HOST, minDomains=3)[0], "labelSelector": {"matchLabels": {"app": "api"}}}]))
    cluster.bind()
    assert placements(cluster, ["web-0", "web-1", "web-2"]) == ["a1", "b1", None]
    # two schedulable hosts plus the NotReady one make 3 domains: the emptiest (c1) stays at 0
    assert placements(cluster, [f"api-{i}" for i in range(4)]) == ["a1", "b1", None, None]


def test_spread_domains_follow_the_pods_node_selector(cluster):
    zonal_nodes(cluster, {"a1": "a", "b1": "b"})
    cluster.add_node(make_node("c1", cpu="8", memory="64Gi", labels={ZONE: "c", "pool": "other"}))
    names = [f"web-{i}" for i in range(4)]
    for name in names:
        cluster.add_pod(make_pod(name, nodeSelector={"pool": "other"}, topologySpreadConstraints=spread()))
    cluster.bind()
    # zones a and b are no domains of a pod that only c1 admits (nodeAffinityPolicy Honor)
    assert placements(cluster, names) == ["c1", "c1", "c1", "c1"]


def test_pod_affinity_follows_the_matching_pods_zone(cluster):
    zonal_nodes(cluster, {"a1": "a", "b1": "b", "b2": "b"})
    cluster.add_node(make_node("x", cpu="8", memory="64Gi"))  # no zone label: never passes affinity by zone
    cluster.add_pod(make_pod("db-0", nodeSelector={HOST: "b2"}))
    for i in range(3):
        cluster.add_pod(make_pod(f"cache-{i}", affinity=affinity("db")))
    cluster.add_pod(make_pod("lost-0", affinity=affinity("missing")))
    cluster.bind()
    assert placements(cluster, ["db-0", "cache-0", "cache-1", "cache-2", "lost-0"]) == ["b2", "b1", "b1", "b1", None]
    assert pod_unschedulable(cluster.pods["default/lost-0"].raw)


def test_the_first_pod_with_affinity_to_its_own_kind_goes_anywhere_and_the_rest_follow(cluster):
    cluster.add_node(make_node("x", cpu="8", memory="64Gi"))  # no zone label: not even the first pod goes here
    zonal_nodes(cluster, {"a1": "a", "b1": "b", "a2": "a"}, cpu="1")  # two pods a node
    names = [f"web-{i}" for i in range(6)]
    for name in names:
        cluster.add_pod(make_pod(name, affinity=affinity("web")))
    cluster.bind()
    assert placements(cluster, names) == ["a1", "a1", "a2", "a2", None, None]


def test_pods_without_constraints_still_bind_by_signature_beside_constrained_ones(cluster):
    for n in range(20):
        cluster.add_node(make_node(f"n{n}", cpu="4", memory="16Gi", pods="110", labels={ZONE: "abc"[n % 3]}))
    for i in range(400):  # n0..n9 full (40 pods each)
        cluster.add_pod(make_pod(f"plain-{i}", cpu="100m", memory="128Mi"))
    for i in range(30):
        cluster.add_pod(make_pod(f"web-{i}", cpu="100m", memory="128Mi", affinity=anti_affinity("web")))
    stats = cluster.bind()
    assert (stats.bound, stats.pending) == (410, 20)
    assert placements(cluster, [f"web-{i}" for i in range(11)]) == [f"n{n}" for n in range(10, 20)] + [None]
