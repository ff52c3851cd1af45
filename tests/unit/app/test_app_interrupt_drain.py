"""The interruption drain's steps on the simulated API server: PDB-blocked evictions are retried by a
delayed follow-up while pods are left, the quarter rule holds without a PDB, and the disruption run can
take the same step."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from carpool.api import events as ev
from carpool.app import interrupt
from carpool.app.cluster_config_source import ClusterConfigSource
from carpool.app.settings import Settings
from carpool.disruption.decision import Reason
from carpool.sim.clock import SimClock
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.state.memory import MemoryLedger
from carpool.state.models import Claim, ClaimStatus, DisruptionProgress

WARNED = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
NODE = "doomed"


def _node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"providerID": f"aws:///us-east-1a/i-{name}", "taints": []},
            "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "58"},
                       "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "58"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _pod(name: str, app: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": app},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{app}-rs"}]},
            "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "x",
                                                        "resources": {"requests": {"cpu": "100m"}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def _claim(name: str, status: ClaimStatus, **extra: Any) -> Claim:
    return Claim(name=name, nodepool="spot", nodeclass="default", created_at=WARNED, instance_types=["m5.large"],
                 pods=[], reserved={"nodes": 1}, requested={}, status=status, **extra)


def _world(replacement: ClaimStatus, web: int = 3, api: int = 4) -> SimpleNamespace:
    clock = SimClock(WARNED)
    cluster = SimulatedCluster(clock, elapsed=lambda: clock.elapsed)
    cluster.add_node(_node(NODE))
    for i in range(web):
        cluster.add_pod(_pod(f"web-{i}", "web"), controller="Deployment/default/web")
    for i in range(api):
        cluster.add_pod(_pod(f"api-{i}", "api"), controller="Deployment/default/api")
    cluster.add_pdb({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                     "metadata": {"name": "web", "namespace": "default"},
                     "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    ledger = MemoryLedger()
    doomed = _claim("doomed", ClaimStatus.REGISTERED, node_name=NODE, instance_id="i-doomed",
                    disruption=DisruptionProgress(reason=Reason.INTERRUPTED.value, replaced_by=["fresh"], decided_at=WARNED))
    for claim in (doomed, _claim("fresh", replacement)):
        ledger.reserve(claim, None, WARNED, 600)
        ledger.mark_launched(claim)
    # the cluster's config (no NodePool: nothing of the drain needs one, only that the config can be read)
    return SimpleNamespace(cluster=cluster, ledger=ledger, clock=clock, settings=Settings("demo"), cache={},
                           config=ClusterConfigSource(cluster))


def _warning() -> ev.AwsEvent:
    return ev.parse_aws_event(json.dumps({
        "version": "0", "id": "e1", "detail-type": "EC2 Spot Instance Interruption Warning", "source": "aws.ec2",
        "account": "123456789012", "time": WARNED.strftime("%Y-%m-%dT%H:%M:%SZ"), "region": "us-east-1",
        "resources": [], "detail": {"instance-id": "i-doomed", "instance-action": "terminate"}}))


def _bind_pending(cluster: SimulatedCluster, node: str) -> None:
    """What kube-scheduler and the kubelet do for the recreated pods once a node has room."""
    for rec in cluster.pods.values():
        if not rec.raw["spec"].get("nodeName"):
            rec.raw["spec"]["nodeName"] = node
            rec.raw["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}


def test_a_step_evicts_within_budgets_and_asks_for_a_follow_up() -> None:
    deps = _world(ClaimStatus.LAUNCHED)
    later: list[tuple[str, int]] = []
    summary, retry = interrupt.run({"m": _warning()}, deps, lambda e, delay: later.append((e.id, delay)))
    assert retry == {}
    evicted = [t for _at, verb, t in deps.cluster.actions if verb == "evict"]
    assert sorted(evicted) == ["default/api-0", "default/web-0"]  # one of web (PDB), a quarter of api
    assert later == [("e1", 5)]
    assert any("evicted 2, 5 left" in d for d in summary.decisions)


def test_blocked_pods_go_one_step_at_a_time_and_the_follow_ups_stop_when_the_node_is_empty() -> None:
    deps = _world(ClaimStatus.REGISTERED)
    deps.cluster.add_node(_node("fresh-node"))
    later: list[int] = []
    steps = 0
    while steps < 20:
        asked = len(later)
        interrupt.run({"m": _warning()}, deps, lambda _e, delay: later.append(delay))
        steps += 1
        _bind_pending(deps.cluster, "fresh-node")
        deps.clock.advance(5)
        if len(later) == asked:
            break
    left = [k for k, r in deps.cluster.pods.items() if r.raw["spec"].get("nodeName") == NODE]
    assert left == []
    assert 3 <= steps <= 5  # web's PDB lets one pod go per step; steps come every 5 s, not once a minute
    assert set(later) == {5}


def test_near_the_reclaim_everything_is_evicted_at_once_and_after_it_nothing_is_asked() -> None:
    deps = _world(ClaimStatus.LAUNCHED, web=0)
    deps.clock.advance(95)
    later: list[int] = []
    interrupt.run({"m": _warning()}, deps, lambda _e, delay: later.append(delay))
    assert sorted(t for _a, verb, t in deps.cluster.actions if verb == "evict") == [f"default/api-{i}" for i in range(4)]
    assert later == []


def test_the_disruption_run_takes_the_same_step_without_a_follow_up() -> None:
    deps = _world(ClaimStatus.LAUNCHED)
    claim = deps.ledger.get("doomed")
    assert interrupt.continue_drain(claim, deps, deps.clock()) is True
    assert len([1 for _a, verb, _t in deps.cluster.actions if verb == "evict"]) == 2
    deps.clock.advance(130)
    assert interrupt.continue_drain(claim, deps, deps.clock()) is False  # reclaimed: nothing left to do
    assert timedelta(seconds=130) > interrupt.evacuation.NOTICE


def test_the_follow_up_goes_back_to_the_queue_it_came_from_and_parses_as_the_same_event() -> None:
    from carpool.adapters.aws.sqs import SqsFollowUp

    sent: list[dict[str, Any]] = []
    client = SimpleNamespace(send_message=lambda **kw: sent.append(kw))
    follow_up = SqsFollowUp("arn:aws:sqs:eu-west-1:123456789012:carpool-c-interruption", client=client)
    follow_up(_warning(), 5)
    [message] = sent
    assert message["QueueUrl"] == "https://sqs.eu-west-1.amazonaws.com/123456789012/carpool-c-interruption"
    assert message["DelaySeconds"] == 5
    again = ev.parse_aws_event(message["MessageBody"])
    assert isinstance(again, ev.SpotInterruptionEvent)
    assert again.instance_ids() == ["i-doomed"] and again.time == _warning().time
