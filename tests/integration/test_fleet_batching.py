"""Claims with identical CreateFleet requests launch together, as Karpenter's CreateFleet batcher does:
one request for as many instances, handed out one per claim, each instance tagged with its claim's name.
EC2 may fulfil such a request in part (fewer instances, plus the errors of what it could not launch): the
claims left without an instance fail over on their own and the books still balance."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from carpool_env import MakeDeps, manifests, nodeclass, nodepool, pending_pods, running_instances

from carpool.app import provision
from carpool.sim.localaws import LocalAws
from carpool.state.models import ClaimStatus

#: 2-vCPU on-demand types only: a 1500m pod needs a node of its own, and every claim asks for the same
ONE_POD_PER_NODE = {"karpenter.k8s.aws/instance-family": ["c5", "m5"], "karpenter.sh/capacity-type": ["on-demand"],
                    "karpenter.k8s.aws/instance-size": ["large"]}


@dataclass
class FleetCalls:
    """Records CreateFleet requests; with `fulfil`, the next request asking for more launches only that
    many instances and answers InsufficientInstanceCapacity for its cheapest override, as EC2 does when
    an instant fleet is fulfilled in part."""

    fulfil: int | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    _error: dict[str, Any] | None = None

    def before(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        self.requests.append(copy.deepcopy(params))
        spec = params["TargetCapacitySpecification"]
        if self.fulfil is None or spec["TotalTargetCapacity"] <= self.fulfil:
            return
        config = params["LaunchTemplateConfigs"][0]
        first = config["Overrides"][0]
        self._error = {"LaunchTemplateAndOverrides": {"LaunchTemplateSpecification": config["LaunchTemplateSpecification"],
                                                      "Overrides": first},
                       "Lifecycle": "on-demand", "ErrorCode": "InsufficientInstanceCapacity",
                       "ErrorMessage": "We currently do not have sufficient capacity (injected)"}
        spec["TotalTargetCapacity"] = self.fulfil
        self.fulfil = None  # later requests skip the offering that ran out (it is marked unavailable)

    def after(self, parsed: dict[str, Any], **_: Any) -> None:
        if self._error is not None:
            parsed.setdefault("Errors", []).append(self._error)
            self._error = None


@pytest.fixture
def calls(make_deps: MakeDeps) -> Iterator[tuple[Any, FleetCalls]]:
    deps = make_deps(manifests(nodepool(requirements=ONE_POD_PER_NODE, limits={"cpu": "1000"}), nodeclass()))
    seen = FleetCalls()
    events = deps.compute.client.meta.events
    events.register("before-parameter-build.ec2.CreateFleet", seen.before)
    events.register("after-call.ec2.CreateFleet", seen.after)
    yield deps, seen
    events.unregister("before-parameter-build.ec2.CreateFleet", seen.before)
    events.unregister("after-call.ec2.CreateFleet", seen.after)


def _tags(instance: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in instance.get("Tags", [])}


def _balanced(deps: Any, aws: LocalAws) -> list[Any]:
    claims = deps.ledger.active()
    assert all(c.status == ClaimStatus.LAUNCHED and c.instance_id for c in claims)
    instances = {i["InstanceId"]: i for i in running_instances(aws)}
    assert sorted(instances) == sorted(c.instance_id for c in claims)
    assert all(_tags(instances[c.instance_id])["karpenter.sh/nodeclaim"] == c.name for c in claims)
    usage = deps.ledger.usage()["default"]
    assert usage["nodes"] == len(claims) and usage["cpu"] == sum(c.reserved["cpu"] for c in claims)
    held = [p for c in claims for p in c.pods]
    assert len(held) == len(set(held))
    return claims


def test_identical_claims_launch_with_one_create_fleet(calls: tuple[Any, FleetCalls], aws: LocalAws) -> None:
    deps, seen = calls
    pods = pending_pods(6, cpu="1500m", prefix="b", deps=deps)
    outcome = provision.provision_pods(pods, deps, reason="test")
    assert len(outcome.launched) == 6 and not outcome.failed
    (request,) = seen.requests
    assert request["TargetCapacitySpecification"]["TotalTargetCapacity"] == 6
    fleet_tags = {t["Key"] for spec in request["TagSpecifications"] for t in spec["Tags"]}
    assert "karpenter.sh/nodeclaim" not in fleet_tags  # one request cannot name six claims
    claims = _balanced(deps, aws)
    assert sorted(p for c in claims for p in c.pods) == sorted(p.key for p in pods)


def test_a_partly_fulfilled_fleet_fails_over_only_the_claims_left_without_an_instance(
    calls: tuple[Any, FleetCalls], aws: LocalAws
) -> None:
    deps, seen = calls
    seen.fulfil = 2
    pods = pending_pods(5, cpu="1500m", prefix="q", deps=deps)
    outcome = provision.provision_pods(pods, deps, reason="test")
    assert not outcome.failed and outcome.rounds == 2
    assert seen.requests[0]["TargetCapacitySpecification"]["TotalTargetCapacity"] == 5
    # the offering EC2 ran out of is skipped for the three claims it could not serve, in the same invocation
    first = seen.requests[0]["LaunchTemplateConfigs"][0]["Overrides"][0]
    short = (first["InstanceType"], first["AvailabilityZone"])
    assert (*short, "on-demand") in deps.offerings.unavailable(deps.clock())
    retried = [r for r in seen.requests[1:] if r["TargetCapacitySpecification"]["TotalTargetCapacity"] == 3]
    assert retried and all(short != (o["InstanceType"], o["AvailabilityZone"])
                           for c in retried[0]["LaunchTemplateConfigs"] for o in c["Overrides"])
    claims = _balanced(deps, aws)
    assert len(claims) == 5
    assert sorted(p for c in claims for p in c.pods) == sorted(p.key for p in pods)
