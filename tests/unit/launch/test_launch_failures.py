"""Which part of an EC2NodeClass an EC2 error names (`carpool.launch.failures`): the launch is the node
class's fault, not EC2's capacity, and each cause is named for the field a user fixes."""

from __future__ import annotations

import pytest

from carpool.launch.failures import Cause, of_ec2_error
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
