"""Which part of an EC2NodeClass an EC2 error names (`carpool.launch.failures`): the launch is the node
class's fault, not EC2's capacity, and each cause is named for the field a user fixes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from carpool.amis import AmiNotFound, AmiSelectionError
from carpool.launch.failures import Cause, before_launch, of_ec2_error
from carpool.launch.templates import LaunchTemplateError


@pytest.mark.parametrize(("code", "message", "cause"), [
    ("InvalidParameterValue", "Value (carpool-x) for parameter iamInstanceProfile.name is invalid. Invalid IAM "
     "Instance Profile name", Cause.INSTANCE_PROFILE),
    ("UnauthorizedOperation", "You are not authorized to perform: iam:PassRole on resource: role/x", Cause.ROLE),
    ("InvalidAMIID.NotFound", "The image id '[ami-1]' does not exist", Cause.AMI),
    ("InvalidSubnetID.NotFound", "The subnet ID 'subnet-1' does not exist", Cause.SUBNET),
    ("InvalidGroup.NotFound", "The security group 'sg-1' does not exist", Cause.SECURITY_GROUP),
    ("InvalidBlockDeviceMapping", "The device 'xvda' is used in more than one block-device mapping",
     Cause.LAUNCH_TEMPLATE),
])
def test_an_ec2_error_naming_a_part_of_the_node_class_is_that_cause(code: str, message: str, cause: Cause) -> None:
    assert of_ec2_error(code, message) is cause


@pytest.mark.parametrize(("code", "message"), [
    ("InsufficientInstanceCapacity", "We currently do not have sufficient capacity"),
    ("RequestLimitExceeded", "Request limit exceeded."),
    ("InvalidParameterValue", "Value (9) for parameter count is invalid"),
    ("UnauthorizedOperation", "You are not authorized to perform: ec2:CreateFleet"),
])
def test_capacity_throttles_and_other_errors_are_no_node_class_cause(code: str, message: str) -> None:
    assert of_ec2_error(code, message) is None


def test_each_cause_names_the_field_to_fix_and_a_template_error_defaults_to_the_template() -> None:
    assert Cause.ROLE.field == "spec.role" and Cause.SUBNET.field == "spec.subnetSelectorTerms"
    assert LaunchTemplateError("spec.blockDeviceMappings[0].deviceName is required").cause is Cause.LAUNCH_TEMPLATE


def _nodeclass(*terms: dict[str, str]) -> SimpleNamespace:
    return SimpleNamespace(spec=SimpleNamespace(ami_selector_terms=list(terms)))


def test_a_node_class_selecting_no_ami_is_ami_invalid_naming_the_selector_in_karpenters_words() -> None:
    nc = _nodeclass({"id": "ami-0123456789abcdef0"}, {"name": "my-*", "owner": "self"})
    assert before_launch(nc, [], {"us-east-1a"}) == (
        Cause.AMI, "spec.amiSelectorTerms: AMISelector did not match any AMIs (id ami-0123456789abcdef0; name my-* owner self)")
    missing = AmiNotFound("alias al2023@latest: no AMI published for Kubernetes 1.99")
    assert before_launch(_nodeclass({"alias": "al2023@latest"}), missing, None) == (
        Cause.AMI, "spec.amiSelectorTerms: AMISelector did not match any AMIs (alias al2023@latest: no AMI "
        "published for Kubernetes 1.99)")
    other = AmiSelectionError("spec.amiSelectorTerms: an alias term must be the only term")
    assert before_launch(nc, other, None) == (Cause.AMI, str(other))


def test_a_node_class_selecting_no_subnet_is_subnet_invalid_and_one_selecting_both_is_ready() -> None:
    nc, amis = _nodeclass({"alias": "al2023@latest"}), [object()]
    assert before_launch(nc, amis, set()) == (Cause.SUBNET, "spec.subnetSelectorTerms: no subnet matches")
    assert before_launch(nc, amis, {"us-east-1a"}) is None
    assert before_launch(nc, amis, None) is None  # zones not known: any zone
