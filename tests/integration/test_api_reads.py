"""What the watcher and the disruption function ask the API server for, counted by the simulated
kube-apiserver (`carpool.sim.cluster.apiserver`) that the lightkube adapter talks to over HTTP.

A cluster's bound pods outnumber everything else carpool reads by orders of magnitude, so the reads that
run every minute must be narrow: the watcher lists and watches unbound Pending pods only (field selector
`spec.nodeName=,status.phase=Pending`, watch with bookmarks), the disruption pass lists unfinished pods
once per observation, a drain lists its node's pods only, and `pod_keys` reads metadata only.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from lightkube import ApiError

from carpool.adapters.k8s import reads
from carpool.adapters.k8s.cluster import ClusterAccess, LightkubeCluster
from carpool.app import disruption_executor, drain, watch
from carpool.app.disruption_summary import DisruptSummary
from carpool.app.settings import Settings
from carpool.app.sources import StaticCatalogSource, TextConfigSource
from carpool.app.wiring import Dependencies
from carpool.disruption import podview
from carpool.sim.cluster.apiserver import SimApiServer
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.state.memory import MemoryCapacityCache, MemoryLedger, MemoryOfferings

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
CONFIG = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: r
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {a: b}}]
  securityGroupSelectorTerms: [{tags: {a: b}}]
"""


class FixedToken:
    stale = False

    def token(self) -> str:
        return "k8s-aws-v1.test"


class Publisher:
    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    def put_events(self, entries: Any) -> int:
        self.entries.extend(entries)
        return 0


def node_json(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod_json(name: str, node: str | None = None, phase: str | None = None, cpu: str = "100m") -> dict[str, Any]:
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "shop"},
                           "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}}
    if node:
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": phase or "Running"}
    return pod


@pytest.fixture
def sim() -> SimulatedCluster:
    """Two nodes with 20 running pods and one finished pod; three pods that fit nowhere."""
    cluster = SimulatedCluster(lambda: NOW)
    for n in ("n1", "n2"):
        cluster.add_node(node_json(n))
    for i in range(20):
        cluster.add_pod(pod_json(f"run-{i}", node=f"n{1 + i % 2}"))
    cluster.add_pod(pod_json("job-done", node="n1", phase="Succeeded"))
    for i in range(3):
        cluster.add_pod(pod_json(f"big-{i}", cpu="64"))
    cluster.bind()  # the big pods become Unschedulable
    return cluster


@pytest.fixture
def served(sim: SimulatedCluster) -> Iterator[tuple[SimApiServer, LightkubeCluster]]:
    with SimApiServer(sim) as server:
        yield server, LightkubeCluster("test", "us-east-1", access=ClusterAccess(server.url, ""), tokens=FixedToken())


def deps_for(adapter: LightkubeCluster, publisher: Publisher) -> Dependencies:
    return Dependencies(
        settings=Settings(cluster_name="test", event_bus="bus"), cluster=adapter, compute=None,  # type: ignore[arg-type]
        ledger=MemoryLedger(), offerings=MemoryOfferings(), capacity=MemoryCapacityCache(), publisher=publisher,
        ami_source=None, config=TextConfigSource(lambda: CONFIG), catalog=StaticCatalogSource("us-east-1"),
        clock=lambda: NOW)


def pod_reads(server: SimApiServer) -> list[tuple[str, str, bool]]:
    """(list or watch, field selector, metadata only) of every pod request."""
    return [("watch" if "watch" in r.query else "list", r.query.get("fieldSelector", ""), r.metadata_only)
            for r in server.log if r.path.endswith("/pods")]


def test_the_watcher_lists_and_watches_unbound_pending_pods_only(served: tuple[SimApiServer, LightkubeCluster],
                                                                sim: SimulatedCluster) -> None:
    server, adapter = served
    publisher = Publisher()

    def meanwhile() -> None:  # during the watch: a new pod that fits nowhere, and a running pod changes
        # once the pod watch is open (a fixed delay is not enough on a busy machine: the list could come after)
        deadline = time.monotonic() + 30
        while not any(r.path.endswith("/pods") and "watch" in r.query for r in list(server.log)):
            if time.monotonic() > deadline:
                return
            time.sleep(0.02)
        with server.lock:
            sim.add_pod(pod_json("late", cpu="64"))
            sim.bind()
            sim.delete_pod("shop/run-0")

    writer = threading.Thread(target=meanwhile)
    writer.start()
    summary = watch.run(deps_for(adapter, publisher), watch_seconds=3.0)
    writer.join()

    assert pod_reads(server) == [("list", reads.PENDING_UNBOUND, False), ("watch", reads.PENDING_UNBOUND, False)]
    pod_watch = next(r for r in server.log if r.path.endswith("/pods") and "watch" in r.query)
    assert pod_watch.query["allowWatchBookmarks"] == "true"
    assert summary.pending_pods == 3
    published = sorted(json.loads(e["Detail"])["pod"]["metadata"]["name"] for e in publisher.entries
                       if e["DetailType"] == "Pod Unschedulable")
    assert published == ["big-0", "big-1", "big-2", "late"]
    # the bookmark 2 s before the stream closed moved the pod watch's resume point past every change
    assert int(adapter.resource_versions["Pod"]) >= int(sim.resource_version)


def test_the_disruption_pass_reads_unfinished_pods_once_per_observation(
        served: tuple[SimApiServer, LightkubeCluster]) -> None:
    server, adapter = served
    world = disruption_executor._observe(deps_for(adapter, Publisher()))
    assert pod_reads(server) == [("list", reads.NOT_FINISHED, False)]
    assert "shop/job-done" not in {p.key for p in world.pods}
    assert len(world.pods) == 23 and len(world.pods_on("n1")) == 10


def test_pod_views_through_the_adapter_are_the_views_of_the_pods_the_cluster_holds(
        served: tuple[SimApiServer, LightkubeCluster], sim: SimulatedCluster) -> None:
    server, adapter = served
    for name in ("guarded", "daemon"):
        raw = pod_json(name, node="n2")
        if name == "guarded":
            raw["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
            raw["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "x"}}}]}}
        else:
            raw["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "agent", "controller": True}]
        sim.add_pod(raw)
    views = adapter.pod_views()
    on_n2 = adapter.pod_views("n2")
    unbound = adapter.pod_views("")
    assert pod_reads(server) == [("list", reads.NOT_FINISHED, False),
                                 ("list", f"spec.nodeName=n2,{reads.NOT_FINISHED}", False),
                                 ("list", f"spec.nodeName=,{reads.NOT_FINISHED}", False)]
    expected = {p.key: podview.from_pod(p) for p in sim.active_pods()}
    assert {v.key: v for v in views} == expected
    assert {v.key for v in on_n2} == {k for k, v in expected.items() if v.node == "n2"} and len(on_n2) == 12
    assert sorted(v.key for v in unbound) == ["shop/big-0", "shop/big-1", "shop/big-2"]
    guarded = next(v for v in views if v.key == "shop/guarded")
    assert guarded.protection and guarded.spec is not None and guarded.spec.anti_affinity
    assert next(v for v in views if v.key == "shop/daemon").spec is None


def test_a_consolidation_run_reads_every_pod_once(served: tuple[SimApiServer, LightkubeCluster]) -> None:
    server, adapter = served
    disruption_executor.run(deps_for(adapter, Publisher()), NOW, DisruptSummary())
    assert pod_reads(server) == [("list", reads.NOT_FINISHED, False)]


def test_a_drain_reads_its_node_only_and_keys_are_metadata_only(served: tuple[SimApiServer, LightkubeCluster]) -> None:
    server, adapter = served
    on_n2 = drain.pods_on(adapter, "n2")
    keys = adapter.pod_keys()
    assert pod_reads(server) == [("list", "spec.nodeName=n2", False), ("list", "", True)]
    assert sorted(p.name for p in on_n2) == sorted(f"run-{i}" for i in range(1, 20, 2))
    assert len(keys) == 24 and "shop/job-done" in keys
    assert adapter.read_stats.pages == 2


def test_a_field_the_api_server_cannot_select_on_is_refused(served: tuple[SimApiServer, LightkubeCluster]) -> None:
    server, adapter = served
    from lightkube.resources.core_v1 import Pod as PodResource

    with pytest.raises(ApiError) as refused:
        adapter._paged(PodResource, reads.ObjectName, fields="spec.priorityClassName=high")
    assert refused.value.status.code == 400
    assert refused.value.status.message == "field label not supported: spec.priorityClassName"


def test_a_topology_count_lists_only_the_pods_its_selector_selects(served: tuple[SimApiServer, LightkubeCluster],
                                                                   sim: SimulatedCluster) -> None:
    """What a spread or affinity counts is one list with its label selector in its namespace (Karpenter's
    countDomains), finished pods left out by the field selector: the same pods the simulated cluster
    answers in process."""
    server, adapter = served
    for name, labels, namespace, phase in (("web-0", {"app": "web"}, "shop", None), ("web-1", {"app": "web", "tier": "db"}, "shop", None),
                                           ("web-done", {"app": "web"}, "shop", "Succeeded"),
                                           ("web-away", {"app": "web"}, "other", None)):
        pod = pod_json(name, node="n1", phase=phase)
        pod["metadata"] |= {"labels": labels, "namespace": namespace}
        sim.add_pod(pod)
    selector = "app=web,tier notin (db)"

    found = adapter.pods_selected("shop", selector)
    everywhere = adapter.pods_selected(None, "app in (web)")

    assert [p.key for p in found] == ["shop/web-0"] == [p.key for p in sim.pods_selected("shop", selector)]
    assert sorted(p.key for p in everywhere) == ["other/web-away", "shop/web-0", "shop/web-1"]
    lists = [r for r in server.log if r.path.endswith("/pods")]
    assert lists[0].path.endswith("/namespaces/shop/pods")
    assert [r.query.get("labelSelector") for r in lists] == [selector, "app in (web)"]
    assert all(r.query.get("fieldSelector", "").startswith(reads.NOT_FINISHED) for r in lists)
