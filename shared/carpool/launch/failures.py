"""Why a launch failed when the fault is the EC2NodeClass's, not EC2's capacity: a named cause per part of
the node class (role, instance profile, subnets, security groups, AMI, launch template).

Karpenter keeps these as the EC2NodeClass's status conditions (`InstanceProfileReady`, `SubnetsReady`,
`SecurityGroupsReady`, `AMIsReady`, `ValidationSucceeded`) and, when a launch meets one, writes
`NodeClassNotReady` on the NodeClaim (kubernetes-sigs/karpenter `pkg/controllers/nodeclaim/lifecycle`).
carpool says a cause on the pods, in `carpool status`, as a metric (`carpool.app.provisioning.settle`)
and in the EC2NodeClass's status conditions (`carpool.karpenter_status.nodeclass`, the cause's value as the
reason); this module only names the causes and tells them from EC2's answers
and from what the node class's selectors found (`before_launch`: no subnet, no AMI, found before any
launch as Karpenter's `SubnetsReady` and `AMIsReady` are).
Such a failure repeats until the node class (or IAM, or the network) is fixed: retrying it helps nobody,
unlike a capacity error.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from enum import StrEnum
from typing import Any

from carpool.amis import AmiNotFound, AmiSelectionError, describe_terms


class Cause(StrEnum):
    """What part of a node class made its launch fail (the value is what users and metrics see)."""

    ROLE = "RoleNotFound"
    INSTANCE_PROFILE = "InstanceProfileInvalid"
    SUBNET = "SubnetInvalid"
    SECURITY_GROUP = "SecurityGroupInvalid"
    AMI = "AmiInvalid"
    LAUNCH_TEMPLATE = "LaunchTemplateInvalid"

    @property
    def field(self) -> str:
        """The EC2NodeClass field a user fixes."""
        return _FIELDS[self]


_FIELDS = {
    Cause.ROLE: "spec.role",
    Cause.INSTANCE_PROFILE: "spec.instanceProfile",
    Cause.SUBNET: "spec.subnetSelectorTerms",
    Cause.SECURITY_GROUP: "spec.securityGroupSelectorTerms",
    Cause.AMI: "spec.amiSelectorTerms",
    Cause.LAUNCH_TEMPLATE: "spec",
}

#: EC2 error code prefixes (CreateFleet's `Errors`, CreateLaunchTemplate's refusals) naming a node class's part
_CODE_PREFIXES: tuple[tuple[str, Cause], ...] = (
    ("InvalidAMIID", Cause.AMI),
    ("InvalidSubnet", Cause.SUBNET),
    ("InvalidGroup", Cause.SECURITY_GROUP),
    ("InvalidSecurityGroup", Cause.SECURITY_GROUP),
    ("InvalidIamInstanceProfile", Cause.INSTANCE_PROFILE),
    ("InvalidBlockDeviceMapping", Cause.LAUNCH_TEMPLATE),
    ("InvalidUserData", Cause.LAUNCH_TEMPLATE),
)


def of_ec2_error(code: str, message: str) -> Cause | None:
    """The cause an EC2 error names, or None (a capacity error, a throttle, anything not the node class's).

    EC2 names a profile it cannot use in an `InvalidParameterValue` ("Value (...) for parameter
    iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name"), and a role it may not pass in
    an `UnauthorizedOperation` naming `iam:PassRole`."""
    for prefix, cause in _CODE_PREFIXES:
        if code.startswith(prefix):
            return cause
    lowered = message.lower()
    if code.startswith("InvalidParameter") and "iaminstanceprofile" in lowered:
        return Cause.INSTANCE_PROFILE
    if code == "UnauthorizedOperation" and "iam:passrole" in lowered:
        return Cause.ROLE
    return None


#: Karpenter's EC2NodeClass AMIsReady=False message (reason AMINotFound), kept for users who know it
AMI_NOT_FOUND = "AMISelector did not match any AMIs"


def before_launch(nodeclass: Any, amis: Sequence[Any] | AmiSelectionError,
                  subnet_zones: Collection[str] | None) -> tuple[Cause, str] | None:
    """Why no launch from the node class can succeed, seen before trying one: what its AMI terms selected
    (`amis`: the images, or why resolving them failed) or the zones of the subnets its subnet terms
    selected (None: not known, any zone). None when both found something."""
    if isinstance(amis, AmiNotFound):
        return Cause.AMI, f"{Cause.AMI.field}: {AMI_NOT_FOUND} ({amis})"
    if isinstance(amis, AmiSelectionError):
        text = str(amis)
        return Cause.AMI, text if text.startswith("spec.") else f"{Cause.AMI.field}: {text}"
    if not amis:
        return Cause.AMI, f"{Cause.AMI.field}: {AMI_NOT_FOUND} ({describe_terms(nodeclass)})"
    if subnet_zones is not None and not subnet_zones:
        return Cause.SUBNET, f"{Cause.SUBNET.field}: no subnet matches"
    return None
