"""EC2NodeClass status as the AWS provider's nodeclass reconcilers write it: each condition True, and
False with Karpenter's reason and message (or carpool's cause where Karpenter says nothing)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from carpool.amis import AmiNotFound, ResolvedAmi
from carpool.karpenter_status import nodeclass as nc
from carpool.requirements import Requirements

T0 = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
SUBNETS = [
    {"SubnetId": "subnet-b", "AvailabilityZone": "us-east-1b", "AvailabilityZoneId": "use1-az2", "AvailableIpAddressCount": 10},
    {"SubnetId": "subnet-a", "AvailabilityZone": "us-east-1a", "AvailabilityZoneId": "use1-az1", "AvailableIpAddressCount": 200},
]
GROUPS = [{"GroupId": "sg-2", "GroupName": "nodes"}, {"GroupId": "sg-1", "GroupName": "cluster"}]
AMI = ResolvedAmi(id="ami-1", name="al2023-standard", arch="x86_64", variant="standard",
                  requirements=Requirements.from_specs([
                      {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                      {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "DoesNotExist"}]),
                  creation_date="2026-11-01T00:00:00Z")
GOOD = nc.NodeClassReadings(subnets=SUBNETS, security_groups=GROUPS, amis=[AMI], instance_profile="prof")


def _obj(generation: int = 1, status: dict | None = None) -> dict:
    return {"metadata": {"name": "default", "generation": generation, "creationTimestamp": "2026-12-01T00:00:00Z"},
            "spec": {}, "status": status or {}}


def _conditions(status: dict) -> dict[str, dict]:
    return {c["type"]: c for c in status["conditions"]}


def test_a_class_whose_parts_are_found_is_ready_with_karpenters_lists() -> None:
    status = nc.nodeclass_status(_obj(), GOOD, T0)
    cond = _conditions(status)
    assert {k: c["status"] for k, c in cond.items()} == dict.fromkeys(
        ["AMIsReady", "SubnetsReady", "SecurityGroupsReady", "InstanceProfileReady", "ValidationSucceeded",
         "PlacementGroupReady", "Ready"], "True")
    assert all(c["observedGeneration"] == 1 for c in cond.values())
    # most available addresses first; groups by id
    assert status["subnets"] == [{"id": "subnet-a", "zone": "us-east-1a", "zoneID": "use1-az1"},
                                 {"id": "subnet-b", "zone": "us-east-1b", "zoneID": "use1-az2"}]
    assert status["securityGroups"] == [{"id": "sg-1", "name": "cluster"}, {"id": "sg-2", "name": "nodes"}]
    assert status["amis"] == [{"id": "ami-1", "name": "al2023-standard", "requirements": [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "DoesNotExist"}]}]
    assert status["instanceProfile"] == "prof"
    assert nc.not_ready({**_obj(), "status": status}) is None


@pytest.mark.parametrize(("readings", "kind", "reason", "message"), [
    (nc.NodeClassReadings(subnets=[], security_groups=GROUPS, amis=[AMI], instance_profile="p"),
     "SubnetsReady", "SubnetsNotFound", "SubnetSelector did not match any Subnets"),
    (nc.NodeClassReadings(subnets=SUBNETS, security_groups=[], amis=[AMI], instance_profile="p"),
     "SecurityGroupsReady", "SecurityGroupsNotFound", "SecurityGroupSelector did not match any SecurityGroups"),
    (nc.NodeClassReadings(subnets=SUBNETS, security_groups=GROUPS, amis=[], instance_profile="p"),
     "AMIsReady", "AMINotFound", "AMISelector did not match any AMIs"),
    (nc.NodeClassReadings(subnets=SUBNETS, security_groups=GROUPS, amis=AmiNotFound("al2023@v2099: none"),
                          instance_profile="p"),
     "AMIsReady", "AMINotFound", "AMISelector did not match any AMIs (al2023@v2099: none)"),
    (nc.NodeClassReadings(subnets=SUBNETS, security_groups=GROUPS, amis=[AMI],
                          instance_profile=nc.Problem("RoleNotFound", "spec.role: IAM role 'x' does not exist")),
     "InstanceProfileReady", "RoleNotFound", "spec.role: IAM role 'x' does not exist"),
])
def test_a_part_found_missing_is_false_with_its_reason_and_the_class_not_ready(
        readings: nc.NodeClassReadings, kind: str, reason: str, message: str) -> None:
    obj = _obj(generation=2)
    status = nc.nodeclass_status(obj, readings, T0)
    cond = _conditions(status)
    assert (cond[kind]["status"], cond[kind]["reason"], cond[kind]["message"]) == ("False", reason, message)
    assert (cond["ValidationSucceeded"]["status"], cond["ValidationSucceeded"]["reason"]) == ("False", "DependenciesNotReady")
    assert (cond["Ready"]["status"], cond["Ready"]["reason"]) == ("False", "UnhealthyDependents")
    assert f"{kind}=False" in cond["Ready"]["message"]
    # the provisioner's reading names the part, not validation's echo of it
    assert nc.not_ready({**obj, "status": status}) == (kind, nc.Problem(reason, message))


def test_a_launch_the_class_refused_fails_the_part_it_names() -> None:
    readings = nc.NodeClassReadings(subnets=SUBNETS, security_groups=GROUPS, amis=[AMI], instance_profile="p",
                                    refused=("RoleNotFound", "spec.role: IAM role 'gone' does not exist"))
    cond = _conditions(nc.nodeclass_status(_obj(), readings, T0))
    assert (cond["InstanceProfileReady"]["status"], cond["InstanceProfileReady"]["reason"]) == ("False", "RoleNotFound")
    assert cond["Ready"]["status"] == "False"


def test_a_refused_launch_template_fails_validation_itself() -> None:
    readings = nc.NodeClassReadings(subnets=SUBNETS, security_groups=GROUPS, amis=[AMI], instance_profile="p",
                                    refused=("LaunchTemplateInvalid", "spec: user data too large"))
    cond = _conditions(nc.nodeclass_status(_obj(), readings, T0))
    assert (cond["ValidationSucceeded"]["reason"], cond["ValidationSucceeded"]["message"]) == (
        "LaunchTemplateInvalid", "spec: user data too large")
    assert cond["SubnetsReady"]["status"] == "True"


def test_a_class_carpool_refuses_says_why_in_validation() -> None:
    readings = nc.NodeClassReadings(problems=("spec.kubelet.maxPods: must be at least 1",))
    cond = _conditions(nc.nodeclass_status(_obj(), readings, T0))
    assert (cond["ValidationSucceeded"]["status"], cond["ValidationSucceeded"]["reason"],
            cond["ValidationSucceeded"]["message"]) == ("False", "NodeClassValidationFailed",
                                                        "spec.kubelet.maxPods: must be at least 1")
    assert cond["Ready"]["status"] == "False"


def test_no_security_group_terms_is_ready_as_karpenter_says() -> None:
    readings = nc.NodeClassReadings(subnets=SUBNETS, security_groups=[], security_group_terms=False, amis=[AMI],
                                    instance_profile="p")
    status = nc.nodeclass_status(_obj(), readings, T0)
    assert _conditions(status)["SecurityGroupsReady"]["status"] == "True"
    assert "securityGroups" not in status


def test_a_part_not_read_is_left_as_it_was() -> None:
    first = nc.nodeclass_status(_obj(), GOOD, T0)
    again = nc.nodeclass_status(_obj(status=first), nc.NodeClassReadings(subnets=SUBNETS, security_groups=GROUPS,
                                                                          amis=None, instance_profile="prof"),
                                T0 + timedelta(minutes=1))
    assert again == first  # nothing moved: the writer sends nothing


def test_a_fixed_part_turns_true_and_ready_follows() -> None:
    broken = nc.nodeclass_status(_obj(), nc.NodeClassReadings(subnets=[], security_groups=GROUPS, amis=[AMI],
                                                               instance_profile="p"), T0)
    later = T0 + timedelta(minutes=3)
    fixed = nc.nodeclass_status(_obj(status=broken), GOOD, later)
    cond = _conditions(fixed)
    assert cond["SubnetsReady"]["status"] == cond["Ready"]["status"] == "True"
    assert cond["Ready"]["lastTransitionTime"] == "2026-12-02T06:03:00Z"
    assert cond["AMIsReady"]["lastTransitionTime"] == "2026-12-02T06:00:00Z"  # unchanged: kept
