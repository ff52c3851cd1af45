"""A node class whose subnets or AMIs select nothing is said where a user looks (issue 38), as a missing
role is (`test_launch_failure_visible`): Karpenter's EC2NodeClass `SubnetsReady` / `AMIsReady` False.

The scenario is that test's, with the node class `missing` given a real role and broken otherwise:
subnet terms matching no subnet, an AMI id that does not exist (EC2 answers DescribeImages by id with
`InvalidAMIID.NotFound`), or an alias for which no AMI is published for the cluster's version. `web`'s pods
can only use its pool `broken`: each gets one `FailedScheduling` naming the cause; `api`'s pods launch from
`fallback` in the first invocation; `carpool status` names the node class; `NodeClassNotReady` is sent."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from carpool.sim.run.result import SimResult
from carpool.sim.run.runner import simulate
from carpool.sim.run.scenario import parse_scenario

from .test_launch_failure_visible import SCENARIO

AMI_NOT_FOUND = "spec.amiSelectorTerms: AMISelector did not match any AMIs"
#: label -> (the node class's spec changes, cause, message)
BROKEN: dict[str, tuple[dict[str, Any], str, str]] = {
    "subnet": ({"subnetSelectorTerms": [{"tags": {"nope": "x"}}]}, "SubnetInvalid",
               "spec.subnetSelectorTerms: no subnet matches"),
    "ami-id": ({"amiSelectorTerms": [{"id": "ami-0123456789abcdef0"}], "amiFamily": "AL2023"}, "AmiInvalid",
               f"{AMI_NOT_FOUND} (id ami-0123456789abcdef0)"),
    "ami-alias": ({"amiSelectorTerms": [{"alias": "bottlerocket@latest"}]}, "AmiInvalid",
                  f"{AMI_NOT_FOUND} (alias bottlerocket@latest: no AMI published for Kubernetes 1.32)"),
}


def _scenario(spec: dict[str, Any]) -> dict[str, Any]:
    scenario = copy.deepcopy(SCENARIO)
    scenario["duration"] = 150  # the watcher publishes the pending pods again at each minute
    nodeclass = scenario["manifests"][2]
    assert nodeclass["metadata"]["name"] == "missing"
    nodeclass["spec"].update(role="carpool-node", **copy.deepcopy(spec))
    return scenario


@pytest.fixture(scope="module", params=sorted(BROKEN))
def case(request: pytest.FixtureRequest) -> tuple[SimResult, str, str]:
    spec, cause, message = BROKEN[request.param]
    return simulate(parse_scenario(_scenario(spec))), cause, message


def test_the_pods_only_the_broken_pool_serves_say_why_once(case: tuple[SimResult, str, str]) -> None:
    result, cause, message = case
    web = [e for e in result.events if e.kind == "Pod" and e.name.startswith("web-")]
    failed = [e for e in web if e.reason == "FailedScheduling"]
    assert len({e.name for e in failed}) == 6 and len(failed) == 6
    for event in failed:
        assert event.type == "Warning" and event.message.startswith("Failed to schedule pod, ")
        assert f"""incompatible with nodepool "broken", EC2NodeClass 'missing' is not ready ({cause}): {message}""" \
            in event.message
        assert event.count == 1


def test_the_other_pods_launch_from_the_next_pool_in_the_first_invocation(case: tuple[SimResult, str, str]) -> None:
    result, _, _ = case
    assert {i.node_pool for i in result.launches} == {"fallback"}
    assert all(i.launched_at <= 15 for i in result.launches)
    counts = {name.rsplit("/", 1)[-1]: c for name, c in result.workloads.items()}
    assert (counts["api"].scheduled, counts["web"].scheduled) == (4, 0)


def test_status_names_the_node_class_its_cause_and_pool(case: tuple[SimResult, str, str]) -> None:
    result, cause, message = case
    assert result.status is not None
    (missing,) = result.status.not_ready
    assert (missing.nodeclass, missing.cause, missing.nodepools, missing.message) == (
        "missing", cause, ["broken"], message)
    pending = {p.pod: p.reasons for p in result.status.pending}
    assert len(pending) == 6 and all(cause in r["broken"] for r in pending.values())


def test_the_cause_is_logged_once_and_counted_for_its_alarm(case: tuple[SimResult, str, str]) -> None:
    result, cause, _ = case
    logged = [d for d in result.decisions if d.message.startswith(f"EC2NodeClass missing is not ready ({cause})")]
    assert len(logged) == 1
    assert any(s.startswith("Carpool NodeClassNotReady ") for s in result.own_cost.metric_series)
