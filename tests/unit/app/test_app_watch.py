"""The watcher: level-triggered resync, then changes from the watch stream; one PutEvents call."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from carpool import observability
from carpool.app import watch
from carpool.app.settings import Settings
from carpool.app.sources import StaticCatalogSource, TextConfigSource
from carpool.app.wiring import Dependencies
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.state.memory import MemoryCapacityCache, MemoryLedger, MemoryOfferings
from carpool.state.models import NOMINATION_HOLD_AFTER_REGISTRATION, Claim

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


def _claim(name: str, pods: list[str]) -> Claim:
    return Claim(name=name, nodepool="default", nodeclass="default", created_at=NOW, instance_types=["m5.large"],
                 pods=pods, reserved={"cpu": 2000, "nodes": 1}, requested={"cpu": 1000})


def _published_pods(pub: Publisher) -> list[str]:
    return sorted(json.loads(e["Detail"])["pod"]["metadata"]["name"] for e in pub.calls[-1]
                  if e["DetailType"] == "Pod Unschedulable")


def _counting_nominated(ledger: MemoryLedger) -> list[object]:
    """Wraps (does not replace) `ledger.nominated`: every call is recorded and answered by the ledger."""
    calls: list[object] = []
    real = ledger.nominated

    def counted(*args: Any, **kwargs: Any) -> dict[str, str]:
        calls.append(args)
        return real(*args, **kwargs)

    ledger.nominated = counted  # type: ignore[method-assign]
    return calls


def test_pods_nominated_to_a_live_claim_are_not_published_again() -> None:
    cluster, pub = SimulatedCluster(lambda: NOW), Publisher()
    for n in ("a", "b", "c"):
        cluster.add_pod(_pod(n))
    cluster.bind()
    deps = _deps(cluster, pub)
    deps.ledger.reserve(_claim("c1", ["default/a"]), None, NOW, 600)
    deps.ledger.reserve(_claim("c2", ["default/b"]), None, NOW, 600)
    deps.ledger.release(_claim("c2", []))  # its nomination no longer holds the pod

    summary = watch.run(deps, watch_seconds=1.0)  # the watch stream replays the pods too

    assert summary.watch_events >= 1
    assert summary.pending_pods == 3 and summary.awaiting_nodes == 1
    assert _published_pods(pub) == ["b", "c"]


def test_awaiting_pods_are_read_from_the_claims_not_from_the_nominations() -> None:
    """Each way a nomination stops holding publishes its pod again; the watcher's answer agrees with the
    ledger's own (`nominated`) without asking it."""
    minute = timedelta(minutes=1)
    cases = {
        "live": ("c-live", NOW, 600),  # reserved now: its node is booting
        "grown": None,  # nominated later onto the live claim
        "held": ("c-held", NOW - 5 * minute, 3600),  # registered half a hold ago: within the hold
        "past-hold": ("c-past", NOW - 5 * minute, 3600),  # registered 3 minutes ago: past the hold
        "expired": ("c-exp", NOW - 11 * minute, 600),  # reserved with a 10-minute TTL 11 minutes ago
        "released": ("c-rel", NOW, 600),
        "legacy": ("c-old", NOW, 600),  # a claim written before `nominated_until` existed
        "free": None,  # never nominated
    }
    cluster, pub = SimulatedCluster(lambda: NOW), Publisher()
    for pod in cases:
        cluster.add_pod(_pod(pod))
    cluster.bind()
    deps = _deps(cluster, pub)
    ledger: MemoryLedger = deps.ledger  # type: ignore[assignment]
    for pod, reservation in cases.items():
        if reservation is not None:
            name, at, ttl = reservation
            ledger.reserve(_claim(name, [f"default/{pod}"]), None, at, ttl)
    ledger.nominate("c-live", ["default/grown"], {"cpu": 1000}, NOW, 600)
    ledger.mark_registered("c-held", "node-held", NOW - NOMINATION_HOLD_AFTER_REGISTRATION / 2)
    ledger.mark_registered("c-past", "node-past", NOW - 3 * minute)
    ledger.release(_claim("c-rel", []))
    ledger.claims["c-old"].nominated_until = None
    calls = _counting_nominated(ledger)

    summary = watch.run(deps)

    assert calls == []
    assert _published_pods(pub) == ["expired", "free", "legacy", "past-hold", "released"]
    assert summary.awaiting_nodes == 3
    # the ledger agrees, but for the claim without the field: its pod is left to the provisioner to judge
    nominated = ledger.nominated(NOW, [f"default/{p}" for p in cases])
    assert sorted(nominated) == ["default/grown", "default/held", "default/legacy", "default/live"]


def test_a_claim_whose_earliest_nomination_expired_publishes_every_pod() -> None:
    """`nominated_until` is the earliest expiry: once past, pods added later by `nominate` (still nominated)
    are published too, which the provisioner drops. The lower bound never hides a freed pod."""
    cluster, pub = SimulatedCluster(lambda: NOW), Publisher()
    for n in ("a", "b"):
        cluster.add_pod(_pod(n))
    cluster.bind()
    deps = _deps(cluster, pub)
    deps.ledger.reserve(_claim("c1", ["default/a"]), None, NOW - timedelta(seconds=600), 600)
    deps.ledger.nominate("c1", ["default/b"], {"cpu": 1000}, NOW - timedelta(seconds=300), 600)

    watch.run(deps)

    assert deps.ledger.get("c1").nominated_until == NOW  # type: ignore[union-attr]
    assert _published_pods(pub) == ["a", "b"]


def test_pool_usage_gauges_are_emitted_for_limited_resources_only(monkeypatch: pytest.MonkeyPatch) -> None:
    deps = _deps(SimulatedCluster(lambda: NOW), Publisher())
    limited = set(deps.config.load().nodepools[0].limits() or {})
    assert "cpu" in limited
    sent: list[tuple[str, dict[str, str]]] = []
    emit = observability.emit
    monkeypatch.setattr(observability, "emit", lambda name, *a, **dims: (sent.append((name, dims)), emit(name, *a, **dims)))
    watch.run(deps)
    assert {d["resource"] for n, d in sent if n == "NodePoolUsage"} == limited
    # the limit is the deployed config's: no series of its own; one point says the highest share used
    assert "NodePoolLimit" not in {n for n, _ in sent}
    (highest,) = [d for n, d in sent if n == "NodePoolLimitUsed"]
    assert highest["nodepool"] == deps.config.load().nodepools[0].name and highest["resource"] in limited


def test_the_highest_share_of_any_limit_is_the_one_series(monkeypatch: pytest.MonkeyPatch) -> None:
    deps = _deps(SimulatedCluster(lambda: NOW), Publisher())
    pool = deps.config.load().nodepools[0]
    limits = pool.limits() or {}
    busiest = sorted(limits)[-1]
    used = {r: int(v * (0.9 if r == busiest else 0.2)) for r, v in limits.items()}
    monkeypatch.setattr(deps.ledger, "usage", lambda: {pool.name: used})
    sent: list[tuple[str, float, dict[str, str]]] = []
    monkeypatch.setattr(observability, "emit", lambda name, value=1.0, *a, **dims: sent.append((name, value, dims)))
    watch.run(deps)
    (point,) = [(v, d) for n, v, d in sent if n == "NodePoolLimitUsed"]
    assert point[0] == pytest.approx(90.0, abs=0.01) and point[1] == {"nodepool": pool.name, "resource": busiest}


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
          taints: list[dict[str, str]] | None = None, pool: str | None = "default") -> None:
    """A node as its kubelet registers it: a launched one carries its NodePool's label from the user data."""
    launched = {"karpenter.sh/nodepool": pool} if pool else {}
    cluster.add_node({"metadata": {"name": f"ip-{iid}", "labels": {**launched, **(node_labels or {})}},
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
    _join(cluster, "i-group", ready=True, node_labels={"eks.amazonaws.com/nodegroup": "ng"}, pool=None)
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

    def watch_then_join(versions: Any, timeout: float = 0.0, idle_seconds: float | None = None) -> Any:
        if not joined:  # the node appears after the resync listed the nodes
            joined.append(True)
            _join(cluster, "i-1", ready=False, taints=[UNREGISTERED])
        return stream(versions, timeout, idle_seconds)

    cluster.watch = watch_then_join  # type: ignore[method-assign]
    summary = watch.run(deps, watch_seconds=1.0)
    assert summary.registered_nodes == 0 and _published_nodes(pub) == ["ip-i-1"]
