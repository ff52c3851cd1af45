"""A launch that cannot succeed is said where a user looks (issue 38): an EC2NodeClass whose `spec.role`
names no IAM role. Local IAM refuses AddRoleToInstanceProfile for it with NoSuchEntity, as IAM does.

Pool `broken` (weight 100) uses that node class; pool `fallback` (weight 10) the stack's role. `web`'s pods
can only use `broken`: they stay pending, each with one `FailedScheduling` naming the cause although the
watcher publishes them every minute; `api`'s pods fall back to `fallback` in the invocation that met the
refusal. `carpool status` names the node class, its cause and pool; the `NodeClassNotReady` metric is sent."""

from __future__ import annotations

from typing import Any

import pytest

from carpool.sim.run.result import SimResult
from carpool.sim.run.runner import simulate
from carpool.sim.run.scenario import parse_scenario

DISCOVERY = [{"tags": {"karpenter.sh/discovery": "roles"}}]
AL2023 = {"parameter": "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id",
          "name": "amazon-eks-node-al2023-x86_64-standard-1.32-v20250115", "architecture": "x86_64",
          "creationDate": "2025-01-15T00:00:00Z"}


def _pool(name: str, weight: int, nodeclass: str) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"weight": weight, "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": nodeclass},
                "requirements": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5", "c5"]},
                                 {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}}}}


def _nodeclass(name: str, role: str) -> dict[str, Any]:
    return {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name},
            "spec": {"role": role, "amiSelectorTerms": [{"alias": "al2023@latest"}],
                     "subnetSelectorTerms": DISCOVERY, "securityGroupSelectorTerms": DISCOVERY}}


def _deployment(name: str, replicas: int, selector: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": name, "image": name,
                                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}
    if selector:
        spec["nodeSelector"] = selector
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


SCENARIO = {
    "name": "missing-role",
    "cluster": {"name": "roles", "version": "1.32", "region": "us-east-1", "zones": ["us-east-1a", "us-east-1b"]},
    "amis": [AL2023],
    "manifests": [_pool("broken", 100, "missing"), _pool("fallback", 10, "default"),
                  _nodeclass("missing", "no-such-role"), _nodeclass("default", "carpool-node")],
    "workload": [{"at": 0, "apply": _deployment("web", 6, {"karpenter.sh/nodepool": "broken"})},
                 {"at": 0, "apply": _deployment("api", 4)}],
    "duration": 240,
}


@pytest.fixture(scope="module")
def result() -> SimResult:
    return simulate(parse_scenario(SCENARIO))


def test_the_pods_only_the_broken_pool_serves_say_why_once(result: SimResult) -> None:
    web = [e for e in result.events if e.kind == "Pod" and e.name.startswith("web-")]
    failed = [e for e in web if e.reason == "FailedScheduling"]
    assert len({e.name for e in failed}) == 6 and len(failed) == 6
    for event in failed:
        assert event.type == "Warning" and event.message.startswith("Failed to schedule pod, ")
        assert 'nodepool "broken"' in event.message and "RoleNotFound" in event.message
        assert "spec.role: IAM role 'no-such-role' does not exist" in event.message
        # the watcher publishes the pods every minute: the event is written when the reason changes, once
        assert event.count == 1


def test_the_other_pods_fall_back_to_the_next_pool_in_the_same_invocation(result: SimResult) -> None:
    assert {i.node_pool for i in result.launches} == {"fallback"}
    assert result.launches and all(i.launched_at <= 15 for i in result.launches)
    counts = {name.rsplit("/", 1)[-1]: c for name, c in result.workloads.items()}
    assert (counts["api"].scheduled, counts["web"].scheduled) == (4, 0)


def test_status_names_the_node_class_its_cause_and_pool(result: SimResult) -> None:
    assert result.status is not None
    (missing,) = result.status.not_ready
    assert (missing.nodeclass, missing.cause, missing.nodepools) == ("missing", "RoleNotFound", ["broken"])
    assert missing.message == "spec.role: IAM role 'no-such-role' does not exist"
    pending = {p.pod: p.reasons for p in result.status.pending}
    assert len(pending) == 6 and all(p.startswith("default/web-") for p in pending)
    assert all("RoleNotFound" in r["broken"] for r in pending.values())


def test_the_cause_is_logged_once_and_counted_for_its_alarm(result: SimResult) -> None:
    logged = [d for d in result.decisions if d.message.startswith("EC2NodeClass missing is not ready (RoleNotFound)")]
    assert len(logged) == 1
    assert any(s.startswith("Carpool NodeClassNotReady ") for s in result.own_cost.metric_series)
