"""`kubectl apply` of a NodePool while pods wait for one: served within seconds, with no deploy.

Pods ask for `team: batch`, which no NodePool gives, so they stay pending. At `APPLIED_AT` a NodePool
giving that label (c5 only) is applied to the cluster, as `kubectl apply` does. The watcher, following
the NodePool watch, publishes the pending pods again (`carpool.app.watch`, `CONFIG_RECHECK_SECONDS` after
the change), so the pods are launched for within seconds of the apply, not at the next watcher run
(`APPLIED_AT` is 45 s before it), and bound within a minute plus the node's boot. At `EDITED_AT` the pool's instance family is
edited to m5; the pods of a scale-up just after are launched on m5."""

from __future__ import annotations

from typing import Any

import pytest

from carpool.app.cluster_config_source import CONFIG_RECHECK_SECONDS
from carpool.sim.run.result import SimResult
from carpool.sim.run.runner import simulate
from carpool.sim.run.scenario import parse_scenario

#: between two watcher runs (they start every minute): the next run's resync is 45 s away
APPLIED_AT = 75
EDITED_AT = 400
SCALED_AT = EDITED_AT + CONFIG_RECHECK_SECONDS + 5
#: the step a timeline point is taken every (the resolution of "bound by")
TICK = 5
DISCOVERY = [{"tags": {"karpenter.sh/discovery": "apply"}}]
CLASS_REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


def _pool(name: str, family: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    template: dict[str, Any] = {"spec": {"nodeClassRef": CLASS_REF, "requirements": [
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": [family]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}}
    if labels:
        template["metadata"] = {"labels": labels}
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": template}}


SCENARIO = {
    "name": "nodepool-apply",
    "cluster": {"name": "apply", "version": "1.32", "zones": ["us-east-1a", "us-east-1b"]},
    "amis": [{"parameter": "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id",
              "name": "amazon-eks-node-al2023-x86_64-standard-1.32-v20241215", "creationDate": "2024-12-15"}],
    "manifests": [
        _pool("general", "m5"),
        {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
         "spec": {"role": "carpool-node", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                  "subnetSelectorTerms": DISCOVERY, "securityGroupSelectorTerms": DISCOVERY}},
    ],
    "workload": [
        {"at": 0, "apply": {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "batch"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "batch"}},
                     "template": {"metadata": {"labels": {"app": "batch"}}, "spec": {
                         "nodeSelector": {"team": "batch"},
                         "containers": [{"name": "b", "image": "b",
                                         "resources": {"requests": {"cpu": "1200m", "memory": "1Gi"}}}]}}}}},
        {"at": APPLIED_AT, "apply": _pool("batch", "c5", {"team": "batch"})},
        {"at": EDITED_AT, "apply": _pool("batch", "m5", {"team": "batch"})},
        {"at": SCALED_AT, "scale": {"deployment": "batch", "replicas": 4}},
    ],
    "duration": 700,
    "tickSeconds": TICK,
    "expect": {"allPodsScheduled": True},
}


@pytest.fixture(scope="module")
def result() -> SimResult:
    return simulate(parse_scenario(SCENARIO, "nodepool-apply"))


def test_no_pool_fits_before_the_apply(result: SimResult) -> None:
    assert not [i for i in result.launches if i.launched_at < APPLIED_AT]
    before = [p for p in result.timeline if p.at < APPLIED_AT and p.at > 10]
    assert before and all(p.pending_pods == 2 for p in before)


def test_the_applied_pool_is_launched_from_within_seconds(result: SimResult) -> None:
    first = min((i for i in result.launches if i.node_pool == "batch"), key=lambda i: i.launched_at)
    waited = first.launched_at - APPLIED_AT
    # the next watcher run would publish the pods 45 s after the apply: the watch does it much sooner
    assert 0 < waited <= CONFIG_RECHECK_SECONDS + 10, waited
    assert first.instance_type.startswith("c5.")


def test_the_pods_are_bound_within_a_minute_of_the_apply_besides_the_nodes_boot(result: SimResult) -> None:
    """What carpool answers for (the wait less EC2's boot and the kubelet's registration, which no
    autoscaler controls) is within a minute; the boot itself is the simulation's model of EC2."""
    bound = next(p.at for p in result.timeline if p.at >= APPLIED_AT and p.scheduled_pods == 2 and not p.pending_pods)
    ttc = result.time_to_capacity
    boot = ttc.create_fleet_to_node.max + ttc.node_to_ready.max
    assert bound - APPLIED_AT - boot <= 60, (bound - APPLIED_AT, boot)


def test_the_edit_is_used_by_the_next_launch(result: SimResult) -> None:
    later = [i for i in result.launches if i.launched_at >= SCALED_AT]
    assert later and {i.instance_type.split(".")[0] for i in later} == {"m5"}
    assert {i.node_pool for i in later} == {"batch"}
    assert result.pods.total == 4 and result.pods.pending == 0
