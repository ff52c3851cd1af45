"""NodePool and EC2NodeClass status as Karpenter writes it, in a whole simulation through the real handlers
(issue 39: "a node role that does not exist left 35 pods pending with nothing visible in the cluster").

The scenario is `test_launch_failure_visible`'s: pool `broken` (weight 100) uses EC2NodeClass `missing`,
whose `spec.role` names no IAM role; pool `fallback` (weight 10) the stack's role. `web`'s pods can only
use `broken`, `api`'s fall back; `api` is scaled up later. The disruption function writes the status each
minute (`carpool.app.karpenter_status`):
- `missing` has `InstanceProfileReady=False` (`RoleNotFound`, naming `spec.role`) and `Ready=False`;
  `broken` has `NodeClassReady=False` and `Ready=False`;
- no instance is ever launched from `broken`, and once the status says so the provisioner does not even
  try it (it reads the class's status with the config), while `fallback` serves `api`;
- `fallback`'s `status.resources` is the sum of its nodes' capacity after the scale-up, `status.nodes` their
  count, and its registrations made it `NodeRegistrationHealthy`."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from carpool import quantity
from carpool.karpenter_objects import EC2NODECLASS, NODEPOOL
from carpool.sim.run.result import SimResult
from carpool.sim.run.runner import SimRunner
from carpool.sim.run.scenario import parse_scenario

from .test_launch_failure_visible import SCENARIO

SCALED_AT = 200
BASE = ("cpu", "memory", "pods", "ephemeral-storage")


@pytest.fixture(scope="module")
def run() -> tuple[SimRunner, SimResult]:
    scenario: dict[str, Any] = copy.deepcopy(SCENARIO)
    scenario["name"] = "karpenter-status"
    scenario["duration"] = 480
    scenario["workload"].append({"at": SCALED_AT, "scale": {"deployment": "api", "replicas": 9}})
    runner = SimRunner(parse_scenario(scenario))
    return runner, runner.run()


def _conditions(runner: SimRunner, kind: Any, name: str) -> dict[str, dict[str, Any]]:
    obj = runner.cluster.get_object(kind, name)
    assert obj is not None and obj.get("status"), f"{kind.kind} {name} has no status"
    return {c["type"]: c for c in obj["status"]["conditions"]}


def test_the_class_whose_role_does_not_exist_is_not_ready_with_the_reason(run: tuple[SimRunner, SimResult]) -> None:
    runner, _ = run
    cond = _conditions(runner, EC2NODECLASS, "missing")
    profile = cond["InstanceProfileReady"]
    assert (profile["status"], profile["reason"]) == ("False", "RoleNotFound")
    assert profile["message"] == "spec.role: IAM role 'no-such-role' does not exist"
    assert (cond["Ready"]["status"], cond["Ready"]["reason"]) == ("False", "UnhealthyDependents")
    assert cond["Ready"]["observedGeneration"] == runner.cluster.get_object(EC2NODECLASS, "missing")["metadata"]["generation"]
    assert {k: c["status"] for k, c in cond.items() if k in ("SubnetsReady", "SecurityGroupsReady", "AMIsReady")} == {
        "SubnetsReady": "True", "SecurityGroupsReady": "True", "AMIsReady": "True"}
    good = _conditions(runner, EC2NODECLASS, "default")
    assert good["Ready"]["status"] == "True"


def test_its_nodepool_says_its_class_is_not_ready(run: tuple[SimRunner, SimResult]) -> None:
    runner, _ = run
    cond = _conditions(runner, NODEPOOL, "broken")
    assert (cond["NodeClassReady"]["status"], cond["NodeClassReady"]["reason"]) == ("False", "UnhealthyDependents")
    assert "InstanceProfileReady=False" in cond["NodeClassReady"]["message"]
    assert cond["ValidationSucceeded"]["status"] == "True"
    assert cond["Ready"]["status"] == "False"
    assert _conditions(runner, NODEPOOL, "fallback")["Ready"]["status"] == "True"


def test_nothing_is_launched_from_it_and_once_its_status_says_so_it_is_not_tried(run: tuple[SimRunner, SimResult]) -> None:
    _, result = run
    assert result.launches and {i.node_pool for i in result.launches} == {"fallback"}
    refused = [d for d in result.decisions if "refused" in d.message and "broken" in d.message]
    skipped = [d for d in result.decisions if "NodePool broken not tried (its EC2NodeClass's status)" in d.message]
    assert skipped, "the provisioner never read the class's status"
    assert max(d.at for d in refused) < min(d.at for d in skipped)  # no launch is tried once the status says it
    counts = {name.rsplit("/", 1)[-1]: c for name, c in result.workloads.items()}
    assert (counts["api"].scheduled, counts["web"].scheduled) == (9, 0)


def test_the_pools_resources_are_the_sum_of_its_nodes_capacity(run: tuple[SimRunner, SimResult]) -> None:
    runner, result = run
    assert [i for i in result.launches if i.launched_at > SCALED_AT], "the scale-up launched nothing"
    nodes = [r.raw for r in runner.cluster.nodes.values()
             if r.raw["metadata"].get("labels", {}).get("karpenter.sh/nodepool") == "fallback"]
    assert len(nodes) >= 2
    status = runner.cluster.get_object(NODEPOOL, "fallback")["status"]
    summed = {k: sum(quantity.resource_value(k, n["status"]["capacity"].get(k, 0)) for n in nodes) for k in BASE}
    assert {k: quantity.resource_value(k, status["resources"][k]) for k in BASE} == summed
    assert status["nodes"] == len(nodes) and status["resources"]["nodes"] == str(len(nodes))
    assert _conditions(runner, NODEPOOL, "fallback")["NodeRegistrationHealthy"]["status"] == "True"
    broken = runner.cluster.get_object(NODEPOOL, "broken")["status"]
    assert broken["nodes"] == 0 and broken["resources"]["cpu"] == "0"


FIXED_AT = 150


@pytest.fixture(scope="module")
def fixed() -> tuple[SimRunner, SimResult]:
    """The same cluster, the class's role fixed with `kubectl apply` at `FIXED_AT` (generation 2)."""
    scenario: dict[str, Any] = copy.deepcopy(SCENARIO)
    scenario["name"] = "karpenter-status-fixed"
    scenario["duration"] = 360
    missing = copy.deepcopy(next(m for m in scenario["manifests"] if m["metadata"]["name"] == "missing"))
    missing["spec"]["role"] = "carpool-node"
    scenario["workload"].append({"at": FIXED_AT, "apply": missing})
    runner = SimRunner(parse_scenario(scenario))
    return runner, runner.run()


def test_an_edit_that_fixes_the_class_is_tried_at_once_and_its_status_follows(fixed: tuple[SimRunner, SimResult]) -> None:
    runner, result = fixed
    from_broken = [i for i in result.launches if i.node_pool == "broken"]
    assert from_broken and min(i.launched_at for i in from_broken) >= FIXED_AT
    # the edit is seen by the watch, not the next minute's resync, nor after the refusal record lapses
    assert min(i.launched_at for i in from_broken) - FIXED_AT <= 60
    counts = {name.rsplit("/", 1)[-1]: c for name, c in result.workloads.items()}
    assert counts["web"].scheduled == 6
    cond = _conditions(runner, EC2NODECLASS, "missing")
    assert cond["InstanceProfileReady"]["status"] == cond["Ready"]["status"] == "True"
    assert cond["Ready"]["observedGeneration"] == 2
    assert _conditions(runner, NODEPOOL, "broken")["Ready"]["status"] == "True"
