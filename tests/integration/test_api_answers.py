"""The Kubernetes API as it really answers, through both `Cluster` implementations: the simulated cluster
in memory, and the lightkube adapter talking HTTP to the same simulated cluster served on 127.0.0.1 with
kube-apiserver's codes and Status bodies (`carpool.sim.cluster.apiserver`).

- A pod selected by two PodDisruptionBudgets: the eviction answers 500 "This pod has more than one
  PodDisruptionBudget..."; the drain reports that pod blocked, with the reason, and evicts the others.
- A paginated list whose continue token expires between two pages (410 Expired): the list starts again
  and sees every object once.
- Cordon/taint of a node that is already gone (404): nothing to cordon, and an EC2 state-change for its
  instance still releases the claim.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from carpool.adapters.k8s import cluster as lightkube_cluster
from carpool.adapters.k8s.cluster import ClusterAccess, LightkubeCluster
from carpool.api import events as ev
from carpool.app import drain, interrupt
from carpool.app.cluster_config_source import ClusterConfigSource
from carpool.app.settings import Settings
from carpool.ports import Cluster
from carpool.sim.cluster.apiserver import SimApiServer
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.state.memory import MemoryLedger
from carpool.state.models import Claim, ClaimStatus

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
NODE = "ip-10-0-0-1.ec2.internal"
DEPLOYMENT = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d9c", "uid": "rs"}]


class FixedToken:
    stale = False

    def token(self) -> str:
        return "k8s-aws-v1.test"


def node_json(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"providerID": "aws:///us-east-1a/i-0abc"},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                       "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod_json(name: str, app: str, tier: str = "frontend") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "shop", "labels": {"app": app, "tier": tier},
                         "ownerReferences": DEPLOYMENT},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]}}


def pdb_json(name: str, selector: dict[str, Any], max_unavailable: int = 2) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": "shop"},
            "spec": {"selector": selector, "maxUnavailable": max_unavailable}}


class World:
    """One simulated cluster, and the `Cluster` carpool uses on it (in memory, or lightkube over HTTP)."""

    def __init__(self, sim: SimulatedCluster, cluster: Cluster, server: SimApiServer | None) -> None:
        self.sim, self.cluster, self.server = sim, cluster, server


@pytest.fixture(params=["simulated", "lightkube"])
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    sim = SimulatedCluster(lambda: NOW)
    if request.param == "simulated":
        yield World(sim, sim, None)
        return
    with SimApiServer(sim) as server:
        adapter = LightkubeCluster("test", "us-east-1", access=ClusterAccess(server.url, ""), tokens=FixedToken())
        yield World(sim, adapter, server)


def shop(sim: SimulatedCluster) -> None:
    """A node running checkout (two budgets select it: one per app, one for the whole frontend tier), search
    and tax pods (one budget each, with room to evict). The checkout pod is listed, and evicted, first."""
    sim.add_node(node_json(NODE))
    for name, app, tier in [("checkout-1", "checkout", "frontend"), ("search-1", "search", "backend"), ("tax-1", "tax", "backend")]:
        sim.add_pod(pod_json(name, app, tier))
    sim.bind()
    sim.add_pdb(pdb_json("checkout", {"matchLabels": {"app": "checkout"}}))
    sim.add_pdb(pdb_json("frontend", {"matchLabels": {"tier": "frontend"}}))
    sim.add_pdb(pdb_json("search", {"matchLabels": {"app": "search"}}))
    sim.add_pdb(pdb_json("tax", {"matchExpressions": [{"key": "app", "operator": "In", "values": ["tax"]}]}))


# -- two budgets on one pod ----------------------------------------------------------------------------------
def test_a_pod_with_two_budgets_is_reported_blocked_and_the_drain_goes_on(world: World) -> None:
    shop(world.sim)
    assert drain.cordon(world.cluster, NODE) is True
    result = drain.drain(world.cluster, NODE, voluntary=False)

    assert sorted(result.evicted) == ["shop/search-1", "shop/tax-1"]
    assert list(result.blocked) == ["shop/checkout-1"]
    reason = result.blocked["shop/checkout-1"]
    assert "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support." in reason
    assert "several budgets" in reason
    on_node = {p.name for p in world.sim.list_pods() if p.spec.node_name == NODE}
    assert on_node == {"checkout-1"}
    node = world.sim.node_raw(NODE)
    assert node is not None and node["spec"]["unschedulable"] is True
    assert [t["key"] for t in node["spec"]["taints"]] == ["karpenter.sh/disrupted"]
    if world.server is not None:  # the 500 crossed HTTP as kube-apiserver writes it
        evictions = [p for m, p in world.server.requests if m == "POST"]
        assert evictions == [f"/api/v1/namespaces/shop/pods/{n}/eviction" for n in ("checkout-1", "search-1", "tax-1")]


def test_removing_one_of_the_two_budgets_lets_the_pod_go(world: World) -> None:
    shop(world.sim)
    drain.cordon(world.cluster, NODE)
    assert "shop/checkout-1" in drain.drain(world.cluster, NODE, voluntary=False).blocked
    del world.sim.pdbs["shop/frontend"]
    assert drain.drain(world.cluster, NODE, voluntary=False).evicted == ["shop/checkout-1"]


# -- a list whose continue token expires ---------------------------------------------------------------------
def test_a_list_whose_continue_token_expires_starts_again(monkeypatch: pytest.MonkeyPatch) -> None:
    sim = SimulatedCluster(lambda: NOW)
    sim.add_node(node_json(NODE))
    for i in range(7):
        sim.add_pod(pod_json(f"web-{i}", "web"))
    monkeypatch.setattr(lightkube_cluster, "LIST_CHUNK", 3)  # three pages of 3, 3 and 1 pods
    with SimApiServer(sim) as server:
        adapter = LightkubeCluster("test", "us-east-1", access=ClusterAccess(server.url, ""), tokens=FixedToken())
        server.lists.expire_next_continue()  # a compaction lands between the first and second page

        pods = adapter.list_pods()

        assert sorted(p.name for p in pods) == [f"web-{i}" for i in range(7)]  # each once
        codes = [(token is not None, code) for _resource, token, code in server.lists.served]
        assert codes == [(False, 200), (True, 410), (False, 200), (True, 200), (True, 200)]
        assert adapter.resource_versions["Pod"] == sim.resource_version

        server.lists.expire_next_continue(times=10)  # every attempt overtaken: the error surfaces
        with pytest.raises(Exception, match="continue parameter is too old"):
            adapter.list_pods()


# -- a node that is gone -------------------------------------------------------------------------------------
def _terminated(instance_id: str) -> ev.AwsEvent:
    return ev.parse_aws_event(json.dumps({
        "version": "0", "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718", "source": "aws.ec2",
        "detail-type": ev.INSTANCE_STATE_CHANGE, "account": "123456789012", "region": "us-east-1",
        "time": NOW.strftime("%Y-%m-%dT%H:%M:%SZ"), "resources": [],
        "detail": {"instance-id": instance_id, "state": "terminated"}}))


def test_a_gone_node_has_nothing_to_cordon_and_its_claim_is_still_released(world: World) -> None:
    assert drain.cordon(world.cluster, NODE) is False
    assert drain.drain(world.cluster, NODE, voluntary=False).evicted == []

    ledger = MemoryLedger()
    claim = Claim(name="c1", nodepool="default", nodeclass="default", created_at=NOW, instance_types=["m5.large"],
                  pods=[], reserved={"nodes": 1}, requested={})
    ledger.reserve(claim, None, NOW, 600)
    ledger.mark_launched(claim.model_copy(update={"status": ClaimStatus.LAUNCHED, "instance_id": "i-0abc"}))
    ledger.mark_registered("c1", NODE, NOW)  # its node registered, and was deleted since
    # EC2 no longer knows the instance (DescribeInstances answers nothing): the state change is confirmed
    deps = SimpleNamespace(ledger=ledger, cluster=world.cluster, clock=lambda: NOW, settings=Settings("demo"), cache={},
                           compute=SimpleNamespace(describe_instances=lambda filters: []), karpenter=None,
                           config=ClusterConfigSource(world.sim, clock=lambda: NOW))

    summary, retry = interrupt.run({"m1": _terminated("i-0abc")}, deps)  # type: ignore[arg-type]

    assert summary.handled == {"i-0abc": "state-change"} and retry == {}
    assert ledger.active() == []
    if world.server is not None:  # the writes really went out and were answered 404
        assert ("PATCH", f"/api/v1/nodes/{NODE}") in world.server.requests


# -- the joining nodes: a label selector -------------------------------------------------------------------
def test_joining_nodes_are_those_labelled_for_a_claim_and_not_initialized(world: World) -> None:
    """`carpool.dev/nodeclaim,!karpenter.sh/initialized`: registered for a claim, not initialized yet. Over
    HTTP the API server filters (the list carries only the joining node)."""
    world.sim.add_node({"metadata": {"name": "joining", "labels": {"carpool.dev/nodeclaim": "c1"}}})
    world.sim.add_node({"metadata": {"name": "up", "labels": {"carpool.dev/nodeclaim": "c2",
                                                              "karpenter.sh/initialized": "true"}}})
    world.sim.add_node({"metadata": {"name": "someone-elses"}})
    assert [n.name for n in world.cluster.joining_nodes()] == ["joining"]
    if world.server is not None:
        (answer,) = [s for s in world.server.lists.served if s[0] == "nodes"]
        assert answer[2] == 200


def test_the_watchers_resync_reads_node_names_and_only_the_launched_nodes_not_initialized(world: World) -> None:
    """The resync's node reads: every name (metadata only), and the full objects of the nodes a NodePool
    launched that are not initialized (`karpenter.sh/initialized!=true` also selects a node without it)."""
    world.sim.add_node({"metadata": {"name": "booting", "labels": {"karpenter.sh/nodepool": "p"}}})
    world.sim.add_node({"metadata": {"name": "starting", "labels": {"karpenter.sh/nodepool": "p",
                                                                    "karpenter.sh/initialized": "false"}}})
    world.sim.add_node({"metadata": {"name": "up", "labels": {"karpenter.sh/nodepool": "p",
                                                              "karpenter.sh/initialized": "true"}}})
    world.sim.add_node({"metadata": {"name": "node-group", "labels": {"eks.amazonaws.com/nodegroup": "ng"}}})
    assert world.cluster.node_names() == {"booting", "starting", "up", "node-group"}
    pages = list(world.cluster.uninitialized_node_pages())
    assert sorted(n.name for page in pages for n in page) == ["booting", "starting"]


# -- events: created once, then aggregated ------------------------------------------------------------------
def test_an_event_is_created_then_its_repeats_patch_count_and_last_timestamp(world: World) -> None:
    """As Kubernetes' event correlator aggregates repeats: one Event object whose count grows. Over HTTP the
    second write is a POST answered 409 AlreadyExists, a GET and a merge PATCH."""
    from carpool import k8s_events

    event = k8s_events.failed_scheduling("shop/web-1", "u-1", {"default": "no instance type fits cpu=500"})
    world.cluster.record_event(event, NOW)
    world.cluster.record_event(event, NOW + timedelta(minutes=3))
    (stored,) = world.sim.events_of("Pod", "web-1")
    assert (stored["reason"], stored["type"], stored["count"]) == ("FailedScheduling", "Warning", 2)
    assert stored["involvedObject"]["uid"] == "u-1" and stored["metadata"]["namespace"] == "shop"
    assert stored["lastTimestamp"] != stored["firstTimestamp"]
    if world.server is not None:
        writes = [(m, p.rsplit("/", 2)[-2]) for m, p in world.server.requests if "/events" in p]
        assert [m for m, _ in writes] == ["POST", "POST", "GET", "PATCH"]
