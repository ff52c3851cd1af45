"""A NodePool edited mid-run (an `apply` of the changed document: `kubectl apply` to the simulated cluster)
is seen within seconds of simulated time: the functions list the config again every
`CONFIG_RECHECK_SECONDS` by their clock.

The pool first allows c5.large and m5.large (c5.large is cheaper, so it is chosen); at `EDITED_AT` its
requirements drop c5. Pods created those seconds later get m5.large nodes, and the c5.large nodes drift
(their instance type no longer satisfies the requirements) and are replaced."""

from __future__ import annotations

from typing import Any

import pytest

from carpool.app.cluster_config_source import CONFIG_RECHECK_SECONDS
from carpool.sim.run.result import SimResult
from carpool.sim.run.runner import simulate
from carpool.sim.run.scenario import parse_scenario

from .conftest import registered

EDITED_AT = 120
#: how long a function may keep serving the config it listed (`ClusterConfigSource`)
CONFIG_MAX_AGE = CONFIG_RECHECK_SECONDS
SCALED_AT = EDITED_AT + CONFIG_MAX_AGE


def _pool(types: list[str]) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types},
                                 {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}}}}


DISCOVERY = [{"tags": {"karpenter.sh/discovery": "edit"}}]
SCENARIO = {
    "name": "nodepool-edit",
    "cluster": {"name": "edit", "version": "1.32", "zones": ["us-east-1a", "us-east-1b"]},
    "amis": [{"parameter": "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id",
              "name": "amazon-eks-node-al2023-x86_64-standard-1.32-v20241215", "creationDate": "2024-12-15"}],
    "manifests": [
        _pool(["c5.large", "m5.large"]),
        {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
         "spec": {"role": "carpool-node", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                  "subnetSelectorTerms": DISCOVERY, "securityGroupSelectorTerms": DISCOVERY}},
    ],
    "workload": [
        {"at": 0, "apply": {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                         {"name": "web", "image": "web", "resources": {"requests": {"cpu": "1200m", "memory": "1Gi"}}}]}}}}},
        {"at": EDITED_AT, "apply": _pool(["m5.large"])},
        {"at": SCALED_AT, "scale": {"deployment": "web", "replicas": 4}},
    ],
    "duration": 900,
    "tickSeconds": 10,
    "expect": {"allPodsScheduled": True},
}


@pytest.fixture(scope="module")
def result() -> SimResult:
    return simulate(parse_scenario(SCENARIO, "nodepool-edit"))


def test_before_the_edit_the_cheaper_allowed_type_was_launched(result: SimResult) -> None:
    before = [i for i in registered(result) if i.launched_at < EDITED_AT]
    assert len(before) == 2 and {i.instance_type for i in before} == {"c5.large"}


def test_seconds_after_the_edit_every_launch_follows_it(result: SimResult) -> None:
    later = [i for i in result.launches if i.launched_at >= SCALED_AT]
    assert later, "the scale-up after the edit launched nothing"
    assert {i.instance_type for i in later} == {"m5.large"}


def test_the_nodes_the_edit_excludes_drift_and_every_pod_runs(result: SimResult) -> None:
    assert result.pods.total == 4 and result.pods.pending == 0
    assert {i.instance_type for i in result.instances} == {"m5.large"}
    assert any("no longer satisfies the NodePool's requirements" in d.message for d in result.decisions)
