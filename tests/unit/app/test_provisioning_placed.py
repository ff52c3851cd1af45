"""Which placed pods a batch's topology constraints count, and where (`carpool.app.provisioning.placed`,
Karpenter's `Topology.countDomains`): the lists read, the pods left out, and the bin each pod counts on."""

from __future__ import annotations

from typing import Any

from carpool import labels as L
from carpool.api.k8s import Node, Pod
from carpool.app.provisioning.placed import InFlight, Placed, queries
from carpool.requirements import Requirement, Requirements
from carpool.scheduling import convert
from carpool.scheduling import inputs as si
from carpool.scheduling.scheduler import schedule
from carpool.sim.clock import SimClock
from carpool.sim.cluster.simulated import SimulatedCluster

WEB = {"app": "web"}


def _zone_spread(key: str = L.ZONE, selector: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": selector or WEB}}


def _pod(name: str, node: str | None = None, *, spread: list[dict[str, Any]] | None = None,
         affinity: dict[str, Any] | None = None, labels: dict[str, str] | None = None, namespace: str = "shop",
         deleting: bool = False) -> Pod:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": name, "labels": WEB if labels is None else labels}
    if deleting:
        meta["deletionTimestamp"] = "2025-01-06T09:00:00Z"
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
                            "topologySpreadConstraints": spread or []}
    if affinity:
        spec["affinity"] = affinity
    if node:
        spec["nodeName"] = node
    return Pod.model_validate({"metadata": meta, "spec": spec,
                               "status": {"phase": "Running" if node else "Pending"}})


def _node(name: str, zone: str, *, cordoned: bool = False) -> Node:
    return Node.model_validate({
        "metadata": {"name": name, "labels": {L.ZONE: zone, L.HOSTNAME: name}},
        "spec": {"unschedulable": cordoned, "taints": []},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "58"},
                   "conditions": [{"type": "Ready", "status": "True"}]}})


def _keys(bins_pods: tuple[si.PodSpec, ...]) -> list[str]:
    return sorted(p.key for p in bins_pods)


# -- what is read ---------------------------------------------------------------------------------------
def test_a_spread_reads_its_selector_in_its_namespace_and_a_hostname_spread_needs_no_node() -> None:
    zone = _pod("a", spread=[_zone_spread()])
    host = _pod("b", spread=[_zone_spread(L.HOSTNAME, {"app": "api"})])
    plain = _pod("c")
    assert queries([zone, host, plain]) == {("shop", "app=web"): True, ("shop", "app=api"): False}


def test_affinity_on_hostname_needs_nodes_and_anti_affinity_reads_every_namespace_when_asked() -> None:
    term = {"topologyKey": L.HOSTNAME, "labelSelector": {"matchLabels": {"app": "cache"}}}
    anti = {"topologyKey": L.ZONE, "labelSelector": {"matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["db", "queue"]}]}, "namespaceSelector": {}}
    host_anti = {"topologyKey": L.HOSTNAME, "labelSelector": {"matchLabels": {"app": "web"}}}
    pod = _pod("a", affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]},
                              "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [anti, host_anti]}})
    assert queries([pod]) == {("shop", "app=cache"): True, (None, "tier in (db,queue)"): True, ("shop", "app=web"): False}


def test_selector_queries_in_the_api_syntax() -> None:
    selector = si.LabelSelector.of({"app": "web"}, [("tier", "NotIn", ["db"]), ("gpu", "DoesNotExist", []),
                                                    ("zone", "Exists", [])])
    assert selector.query() == "app=web,tier notin (db),!gpu,zone"
    assert si.LabelSelector.of().query() == ""  # selects every pod
    assert si.NOTHING.query() is None
    assert si.LabelSelector.of({}, [("app", "In", [])]).query() is None  # In no value selects nothing


def test_the_read_lists_each_selector_once_and_leaves_terminating_pods_out() -> None:
    cluster = SimulatedCluster(SimClock())
    cluster.add_node(_node("n1", "us-east-1a").to_json_dict())
    for pod in (_pod("web-0", "n1"), _pod("web-1", "n1", deleting=True), _pod("api-0", "n1", labels={"app": "api"}),
                _pod("web-x", "n1", namespace="other")):
        cluster.add_pod(pod.to_json_dict())
    batch = [_pod("web-new", spread=[_zone_spread()]), _pod("web-new2", spread=[_zone_spread()])]
    placed = Placed.read(cluster, batch)
    assert [p.key for p in placed.pods] == ["shop/web-0"]
    assert set(placed.nodes) == {"n1"}
    hostname_only = Placed.read(cluster, [_pod("web-new", spread=[_zone_spread(L.HOSTNAME)])])
    assert [p.key for p in hostname_only.pods] == ["shop/web-0"] and not hostname_only.nodes


# -- where each pod counts ---------------------------------------------------------------------------------
def test_pods_being_scheduled_never_count_and_others_count_on_their_nodes_with_no_room() -> None:
    placed = Placed((_pod("web-0", "n1"), _pod("web-1", "n1"), _pod("web-2", "n2")),
                    {"n1": _node("n1", "us-east-1a"), "n2": _node("n2", "us-east-1b")})
    bins = placed.bins({"shop/web-2"}, [])
    assert [(n.name, _keys(n.pods)) for n in bins.existing] == [("n1", ["shop/web-0", "shop/web-1"])]
    assert bins.existing[0].remaining == {}


def test_a_pod_leaving_a_cordoned_node_counts_on_the_claim_it_is_nominated_to() -> None:
    placed = Placed((_pod("web-0", "doomed"), _pod("web-1", "kept"), _pod("web-2", None), _pod("web-3", None)),
                    {"doomed": _node("doomed", "us-east-1b", cordoned=True), "kept": _node("kept", "us-east-1b")})
    coming = InFlight("fresh", ["shop/web-0", "shop/web-1", "shop/web-2"])
    bins = placed.bins(set(), [coming])
    # web-1 was bound elsewhere than planned: it stays where it is; web-3 is nominated nowhere: nowhere
    assert _keys(bins.held["fresh"]) == ["shop/web-0", "shop/web-2"]
    assert [(n.name, _keys(n.pods)) for n in bins.existing] == [("kept", ["shop/web-1"])]


def test_a_pod_bound_to_the_ready_node_of_a_claim_in_flight_counts_on_that_claim() -> None:
    placed = Placed((_pod("web-0", "joining"),), {"joining": _node("joining", "us-east-1a")})
    bins = placed.bins(set(), [InFlight("fresh", [], node="joining")])
    assert _keys(bins.held["fresh"]) == ["shop/web-0"] and bins.existing == ()


# -- what the scheduler makes of them ----------------------------------------------------------------------
def test_counted_pods_steer_a_zone_spread_and_their_nodes_take_no_pod() -> None:
    """Two pods already run in us-east-1a: two more with zone spread go to us-east-1b only, and none onto
    the node counted (it has no room to the provisioner, whatever its allocatable)."""
    offers = tuple(si.Offering(z, L.CAPACITY_ON_DEMAND, 0.2) for z in ("us-east-1a", "us-east-1b"))
    labels = {L.INSTANCE_TYPE: "m5.xlarge", L.ARCH: "amd64", L.OS: "linux"}
    option = si.InstanceOption("m5.xlarge", Requirements.from_labels(labels),
                               {"cpu": 3900, "memory": 15 * 2**30, "pods": 58}, offers)
    pool = si.PoolSpec("default", [option], requirements=Requirements([Requirement.in_(L.NODEPOOL, "default")]))
    placed = Placed((_pod("web-0", "n1"), _pod("web-1", "n1")), {"n1": _node("n1", "us-east-1a")})
    batch = [_pod("web-2", spread=[_zone_spread()]), _pod("web-3", spread=[_zone_spread()])]

    result = schedule([convert.pod_spec(p) for p in batch], [pool], existing=placed.bins(set(), []).existing)
    assert not result.unschedulable
    assert {c.labels.get(L.ZONE) for c in result.claims} == {"us-east-1b"}
    assert sorted(p for c in result.claims for p in c.pods) == ["shop/web-2", "shop/web-3"]
