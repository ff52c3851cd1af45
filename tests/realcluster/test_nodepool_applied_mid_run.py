"""A NodePool applied with kubectl mid-run, on the real control plane. The tier starts with
`examples/flex-first.yaml`'s pools (`flex`, `general`); a Deployment asks for nodes of a pool that does
not exist yet (`nodeSelector: karpenter.sh/nodepool: late`, as Karpenter lets a pod pick its pool). What
users see: while no pool can serve the pods, carpool launches nothing and says why on the pods
(Karpenter's `FailedScheduling`, "incompatible with nodepool ..."); once the user applies the `late`
NodePool with kubectl, carpool's running functions read it (no redeploy, no restart), launch for it, and
the real scheduler binds every pod to a `late` node whose hollow kubelet reports it Running; the
instances are tagged with the pool, the NodeClaims are the pool's."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tests.realcluster.controlplane import require_binaries
from tests.realcluster.tier import RealTier

#: boot to kubelet start; short so the scenario stays short, still after the launch (`CARPOOL_TIER_BOOT_SECONDS`)
BOOT_SECONDS = float(os.environ.get("CARPOOL_TIER_BOOT_SECONDS", "10"))
REPLICAS = 3
POOL = "late"
#: the watcher's first pass over the pending pods, on a shared machine
TOLD_WITHIN = 120.0
#: after the NodePool is applied: a watcher pass, a batch, CreateFleet, the boot, registration, binding
SERVED_WITHIN = 240.0


def late_pool() -> dict[str, Any]:
    """The pool the user applies mid-run: general-purpose types, on the scenario's node class."""
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": POOL},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [
                    {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["m"]},
                    {"key": "karpenter.k8s.aws/instance-size", "operator": "In", "values": ["large", "xlarge"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}}}}


@pytest.fixture(scope="module")
def tier() -> Iterator[RealTier]:
    require_binaries(("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubemark"))
    started = time.monotonic()
    with RealTier(boot_seconds=BOOT_SECONDS) as running:
        yield running
    print(f"NodePool-applied-mid-run scenario: {time.monotonic() - started:.0f} s")


def _running(tier: RealTier) -> list[dict[str, Any]]:
    pods = tier.pods("app=batch", namespace="default")
    done = [p for p in pods if p["status"].get("phase") == "Running" and p["spec"].get("nodeName")]
    return done if len(done) == REPLICAS else []


def _told_no_pool_fits(tier: RealTier) -> list[dict[str, Any]]:
    return [e for e in tier.events("FailedScheduling")
            if e["involvedObject"].get("kind") == "Pod" and e["involvedObject"]["name"].startswith("batch-")
            and "incompatible with nodepool" in e.get("message", "")]


def test_pods_for_a_missing_pool_wait_and_are_told_why(tier: RealTier) -> None:
    tier.apply([tier.deployment("batch", REPLICAS, spec={"nodeSelector": {"karpenter.sh/nodepool": POOL}})])
    told = tier.wait_for("carpool's FailedScheduling on the batch pods", lambda: _told_no_pool_fits(tier), TOLD_WITHIN)
    messages = {e["message"] for e in told}
    assert any('nodepool "flex"' in m and 'nodepool "general"' in m for m in messages), messages
    assert not tier.instances(), [(i["InstanceId"], i["InstanceType"]) for i in tier.instances()]
    assert not tier.nodeclaims()
    assert not [p for p in tier.pods("app=batch", namespace="default") if p["spec"].get("nodeName")]


def test_a_nodepool_applied_with_kubectl_serves_them(tier: RealTier) -> None:
    """Runs after the waiting test, on the same tier: the user applies the pool, as `kubectl apply`."""
    tier.wait_for("carpool's FailedScheduling on the batch pods", lambda: _told_no_pool_fits(tier), TOLD_WITHIN)
    assert "created" in tier.apply([late_pool()])
    running = tier.wait_for(f"{REPLICAS} batch pods Running", lambda: _running(tier), SERVED_WITHIN)

    nodes = {n["metadata"]["name"]: n for n in tier.nodes()}
    for pod in running:
        node = nodes[pod["spec"]["nodeName"]]
        assert node["metadata"]["labels"].get("karpenter.sh/nodepool") == POOL, node["metadata"]["labels"]
        assert node["metadata"]["labels"].get("node.kubernetes.io/instance-type", "").startswith("m"), \
            node["metadata"]["labels"]
    instances = tier.instances(("pending", "running"))
    tags = [{t["Key"]: t["Value"] for t in i.get("Tags", [])} for i in instances]
    assert instances and all(t.get("karpenter.sh/nodepool") == POOL for t in tags), tags
    assert {c["metadata"]["labels"].get("karpenter.sh/nodepool") for c in tier.nodeclaims()} == {POOL}
    assert not tier.lambdas.errors(), [e.error for e in tier.lambdas.errors()][:2]
