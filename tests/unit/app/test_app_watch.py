"""The watcher: level-triggered resync, then changes from the watch stream; one PutEvents call."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from carpool import observability
from carpool.app import watch
from carpool.app.settings import Settings
from carpool.app.sources import StaticCatalogSource, TextConfigSource
from carpool.app.wiring import Dependencies
from carpool.sim.cluster import SimulatedCluster
from carpool.state.memory import MemoryCapacityCache, MemoryLedger, MemoryOfferings

NOW = datetime(2026, 5, 1, tzinfo=UTC)
CONFIG = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  limits: {cpu: "100"}
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


class Publisher:
    def __init__(self) -> None:
        self.calls: list[list[dict[str, Any]]] = []

    def put_events(self, entries: Any) -> int:
        self.calls.append(list(entries))
        return 0


def _deps(cluster: SimulatedCluster, publisher: Publisher) -> Dependencies:
    return Dependencies(
        settings=Settings(cluster_name="demo", event_bus="carpool-demo"), cluster=cluster, compute=None,  # type: ignore[arg-type]
        ledger=MemoryLedger(), offerings=MemoryOfferings(), capacity=MemoryCapacityCache(), publisher=publisher,
        ami_source=None, config=TextConfigSource(lambda: CONFIG), catalog=StaticCatalogSource("us-east-1"),
        clock=lambda: NOW,
    )


def _pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}


def test_resync_publishes_every_pending_pod_each_run() -> None:
    cluster, pub = SimulatedCluster(lambda: NOW), Publisher()
    for n in ("a", "b"):
        cluster.add_pod(_pod(n))
    cluster.bind()  # no nodes: both pods become Unschedulable
    deps = _deps(cluster, pub)
    for _ in range(2):  # level-triggered: the same pods again on the next run
        summary = watch.run(deps)
        assert summary.pending_pods == 2
    assert len(pub.calls) == 2
    assert all(sorted(e["DetailType"] for e in call) == ["Pod Unschedulable"] * 2 for call in pub.calls)
    assert all(e["EventBusName"] == "carpool-demo" and e["Source"] == "carpool.cluster" for e in pub.calls[0])


def test_pods_nominated_to_a_live_claim_are_not_published_again() -> None:
    from carpool.state.models import Claim

    cluster, pub = SimulatedCluster(lambda: NOW), Publisher()
    for n in ("a", "b", "c"):
        cluster.add_pod(_pod(n))
    cluster.bind()
    deps = _deps(cluster, pub)
    booting = Claim(name="c1", nodepool="default", nodeclass="default", created_at=NOW, instance_types=["m5.large"],
                    pods=["default/a"], reserved={"cpu": 2000, "nodes": 1}, requested={"cpu": 1000})
    gone = booting.model_copy(update={"name": "c2", "pods": ["default/b"]})
    deps.ledger.reserve(booting, None, NOW, 600)
    deps.ledger.reserve(gone, None, NOW, 600)
    deps.ledger.release(gone)  # its nomination no longer holds the pod

    summary = watch.run(deps, watch_seconds=1.0)  # the watch stream replays the pods too

    assert summary.watch_events >= 1
    published = sorted(json.loads(e["Detail"])["pod"]["metadata"]["name"] for e in pub.calls[0])
    assert summary.pending_pods == 3 and summary.awaiting_nodes == 1
    assert published == ["b", "c"]


def test_pool_usage_gauges_are_emitted_for_limited_resources_only(monkeypatch: pytest.MonkeyPatch) -> None:
    deps = _deps(SimulatedCluster(lambda: NOW), Publisher())
    limited = set(deps.config.load().nodepools[0].limits() or {})
    assert "cpu" in limited
    sent: list[tuple[str, dict[str, str]]] = []
    emit = observability.emit
    monkeypatch.setattr(observability, "emit", lambda name, *a, **dims: (sent.append((name, dims)), emit(name, *a, **dims)))
    watch.run(deps)
    assert {d["resource"] for n, d in sent if n == "NodePoolUsage"} == limited
    # the limit is the deployed config's: no series of its own
    assert "NodePoolLimit" not in {n for n, _ in sent}


def test_follow_adds_changes_after_the_resync() -> None:
    cluster, pub = SimulatedCluster(lambda: NOW), Publisher()
    cluster.add_pod(_pod("a"))
    cluster.bind()
    summary = watch.run(_deps(cluster, pub), watch_seconds=1.0)
    assert summary.watch_events >= 1
    assert {e["DetailType"] for e in pub.calls[0]} == {"Pod Unschedulable"}


def test_nothing_pending_publishes_nothing() -> None:
    cluster, pub = SimulatedCluster(lambda: NOW), Publisher()
    summary = watch.run(_deps(cluster, pub))
    assert summary.published == 0 and pub.calls == []


# -- nodes for the registrar ----------------------------------------------------------------------------------
UNREGISTERED = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}


def _launched(deps: Dependencies, name: str, iid: str, status: str = "launched", node: str | None = None) -> None:
    from carpool.state.models import Claim, ClaimStatus

    claim = Claim(name=name, nodepool="default", nodeclass="default", created_at=NOW, instance_types=["m5.large"],
                  pods=[], reserved={"nodes": 1}, requested={})
    deps.ledger.reserve(claim, None, NOW, 600)
    deps.ledger.mark_launched(claim.model_copy(update={"status": ClaimStatus.LAUNCHED, "instance_id": iid}))
    if status == "registered":
        deps.ledger.mark_registered(name, node or f"ip-{iid}", NOW)


def _join(cluster: SimulatedCluster, iid: str, *, ready: bool, node_labels: dict[str, str] | None = None,
          taints: list[dict[str, str]] | None = None) -> None:
    cluster.add_node({"metadata": {"name": f"ip-{iid}", "labels": node_labels or {}},
                      "spec": {"providerID": f"aws:///us-east-1a/{iid}", "taints": taints or []},
                      "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}})


def _published_nodes(pub: Publisher) -> list[str]:
    return sorted(json.loads(e["Detail"])["node"]["metadata"]["name"] for call in pub.calls for e in call
                  if e["DetailType"] == "Node Registered")


def test_nodes_are_published_while_the_registrar_has_a_step_to_take() -> None:
    cluster, pub = SimulatedCluster(lambda: NOW), Publisher()
    deps = _deps(cluster, pub)
    done = {"carpool.dev/owned-by": "demo", "karpenter.sh/registered": "true", "carpool.dev/nodeclaim": "c-done",
            "karpenter.sh/initialized": "true"}
    _launched(deps, "c-new", "i-new")
    _join(cluster, "i-new", ready=False, node_labels={"carpool.dev/owned-by": "demo"}, taints=[UNREGISTERED])
    _launched(deps, "c-ready", "i-ready")  # registered on the node, but its claim not yet (it was NotReady)
    _join(cluster, "i-ready", ready=True, node_labels={**done, "carpool.dev/nodeclaim": "c-ready",
                                                       "karpenter.sh/initialized": "false"})
    _launched(deps, "c-init", "i-init", status="registered")  # waits for its startup taints to go
    _join(cluster, "i-init", ready=True, node_labels={**done, "carpool.dev/nodeclaim": "c-init",
                                                      "karpenter.sh/initialized": "false"})
    _launched(deps, "c-done", "i-done", status="registered")
    _join(cluster, "i-done", ready=True, node_labels=done)
    _join(cluster, "i-lost", ready=False, taints=[UNREGISTERED])  # no claim knows it: the registrar asks EC2
    _join(cluster, "i-group", ready=True, node_labels={"eks.amazonaws.com/nodegroup": "ng"})
    _join(cluster, "i-other", ready=False, node_labels={"carpool.dev/owned-by": "other"}, taints=[UNREGISTERED])

    summary = watch.run(deps)

    assert _published_nodes(pub) == ["ip-i-init", "ip-i-lost", "ip-i-new", "ip-i-ready"]
    assert summary.registered_nodes == 4


def test_a_node_change_seen_by_the_watch_is_published() -> None:
    cluster, pub = SimulatedCluster(lambda: NOW), Publisher()
    deps = _deps(cluster, pub)
    _launched(deps, "c1", "i-1")

    stream = cluster.watch
    joined: list[bool] = []

    def watch_then_join(versions: Any, timeout: float = 0.0) -> Any:
        if not joined:  # the node appears after the resync listed the nodes
            joined.append(True)
            _join(cluster, "i-1", ready=False, taints=[UNREGISTERED])
        return stream(versions, timeout)

    cluster.watch = watch_then_join  # type: ignore[method-assign]
    summary = watch.run(deps, watch_seconds=1.0)
    assert summary.registered_nodes == 0 and _published_nodes(pub) == ["ip-i-1"]
