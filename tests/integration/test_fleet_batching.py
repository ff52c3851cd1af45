"""Claims with identical CreateFleet requests launch together, as Karpenter's CreateFleet batcher does:
one request for as many instances, handed out one per claim. Such instances are tagged with their claims'
names once their nodes register (by the registrar, as Karpenter's tagging controller does), not while
launching. EC2 may fulfil such a request in part (fewer instances, plus the errors of what it could not launch): the
claims left without an instance fail over on their own and the books still balance."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from carpool_env import CLUSTER, MakeDeps, manifests, nodeclass, nodepool, pending_pods, running_instances

from carpool import labels
from carpool.app import register
from carpool.app.provisioning import provision
from carpool.sim.localaws.server import LocalAws
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
    # a claim launched alone is named by its request; a batch's instances are named when their nodes register
    assert all(_tags(instances[c.instance_id]).get("karpenter.sh/nodeclaim", c.name) == c.name for c in claims)
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


def _join(deps: Any, instance: dict[str, Any]) -> str:
    """The node a kubelet registers for `instance` (providerID set by the cloud node controller)."""
    name = instance["PrivateDnsName"] or f"ip-{instance['InstanceId']}"
    zone = instance["Placement"]["AvailabilityZone"]
    deps.cluster.add_node({
        "metadata": {"name": name, "labels": {labels.INSTANCE_TYPE: instance["InstanceType"], labels.ZONE: zone,
                                              labels.NODEPOOL: "default", labels.OWNED_BY: CLUSTER}},
        "spec": {"providerID": f"aws:///{zone}/{instance['InstanceId']}",
                 "taints": [{"key": labels.UNREGISTERED_TAINT, "effect": "NoExecute"}]},
        "status": {"capacity": {"cpu": "2", "memory": "4Gi", "pods": "29"},
                   "allocatable": {"cpu": "1930m", "memory": "3Gi", "pods": "29"},
                   "conditions": [{"type": "Ready", "status": "False"}]},
    })
    return name


def test_a_batchs_instances_are_named_when_their_nodes_register_not_while_launching(
    calls: tuple[Any, FleetCalls], aws: LocalAws
) -> None:
    deps, _ = calls
    tagging: list[dict[str, Any]] = []

    def seen_tagging(params: dict[str, Any], **_: Any) -> None:
        tagging.append(params)

    events = deps.compute.client.meta.events
    events.register("before-parameter-build.ec2.CreateTags", seen_tagging)
    try:
        outcome = provision.provision_pods(pending_pods(3, cpu="1500m", prefix="n", deps=deps), deps, reason="test")
        assert len(outcome.launched) == 3 and tagging == []  # the launch path writes no tag
        instances = {i["InstanceId"]: i for i in running_instances(aws)}
        assert all("karpenter.sh/nodeclaim" not in _tags(i) for i in instances.values())
        for claim in outcome.launched:
            assert claim.instance_id is not None
            summary = register.RegisterSummary()
            register.reconcile(_join(deps, instances[claim.instance_id]), deps, summary)
            assert summary.tagged == [claim.instance_id]
    finally:
        events.unregister("before-parameter-build.ec2.CreateTags", seen_tagging)
    assert len(tagging) == 3
    named = {i["InstanceId"]: _tags(i).get("karpenter.sh/nodeclaim") for i in running_instances(aws)}
    assert named == {c.instance_id: c.name for c in outcome.launched}


def _pinned_pods(deps: Any, types: list[str]) -> list[Any]:
    """One 1500m pod per instance type, each pinned to its type: claims whose requests all differ."""
    from carpool.api.k8s import Pod

    pods = [Pod.model_validate({
        "metadata": {"name": f"t{i}", "namespace": "default", "uid": f"t{i}"},
        "spec": {"nodeSelector": {labels.INSTANCE_TYPE: t},
                 "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    }) for i, t in enumerate(types)]
    for pod in pods:
        deps.cluster.add_pod(pod.to_json_dict())
    return pods


def test_a_later_group_is_launched_only_while_the_deadline_allows_it(calls: tuple[Any, FleetCalls], aws: LocalAws) -> None:
    """Groups launch one after another; a later one starts only while a claim's worst case still fits:
    near the deadline it is released and its pods are retried, the launched ones are kept."""
    from carpool.app.deadline import Deadline

    deps, seen = calls
    ticks = iter([100.0] * 3)  # the round and both claims start in time; then the deadline is near
    deadline = Deadline(at=125.0, claim_budget=10.0, clock=lambda: next(ticks, 120.0))
    pods = _pinned_pods(deps, ["c5.large", "m5.large"])
    outcome = provision.provision_pods(pods, deps, reason="test", deadline=deadline)
    assert len(seen.requests) == 1 and len(outcome.launched) == 1
    (late,) = outcome.failed
    assert "deadline" in outcome.failed[late] and late not in {p for c in outcome.launched for p in c.pods}
    _balanced(deps, aws)


def test_a_launch_template_that_cannot_be_created_fails_only_the_claims_launching_from_it(
    make_deps: MakeDeps, aws: LocalAws
) -> None:
    """A batch's launch templates are created together; a refused one (a denied or throttled
    CreateLaunchTemplate) fails only its claims: their reservations are released and their pods retried."""
    from botocore.exceptions import ClientError

    from carpool.api.k8s import Pod

    any_capacity = {k: v for k, v in ONE_POD_PER_NODE.items() if k != "karpenter.sh/capacity-type"}
    deps = make_deps(manifests(nodepool(requirements=any_capacity, limits={"cpu": "1000"}), nodeclass()))
    pods = [Pod.model_validate({
        "metadata": {"name": ct, "namespace": "default", "uid": ct},
        "spec": {"nodeSelector": {"karpenter.sh/capacity-type": ct},
                 "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1500m"}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    }) for ct in ("spot", "on-demand")]
    for pod in pods:
        deps.cluster.add_pod(pod.to_json_dict())
    refused: list[str] = []

    def refuse_spot(params: dict[str, Any], **_: Any) -> None:
        data = params["LaunchTemplateData"]
        if any(t["ResourceType"] == "spot-instances-request" for t in data.get("TagSpecifications", [])):
            refused.append(params["LaunchTemplateName"])
            raise ClientError({"Error": {"Code": "UnauthorizedOperation", "Message": "denied (injected)"}},
                              "CreateLaunchTemplate")

    events = deps.compute.client.meta.events
    events.register("before-parameter-build.ec2.CreateLaunchTemplate", refuse_spot)
    try:
        outcome = provision.provision_pods(pods, deps, reason="test")
    finally:
        events.unregister("before-parameter-build.ec2.CreateLaunchTemplate", refuse_spot)
    assert refused
    assert [c.pods for c in outcome.launched] == [["default/on-demand"]]
    assert list(outcome.failed) == ["default/spot"] and "UnauthorizedOperation" in outcome.failed["default/spot"]
    assert [c.name for c in deps.ledger.active()] == [outcome.launched[0].name]  # the refused claim is released
    assert len(running_instances(aws)) == 1
