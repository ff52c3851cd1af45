"""An EC2NodeClass's `status` as the AWS provider v1.14.1 writes it (aws/karpenter-provider-aws
`pkg/apis/v1/ec2nodeclass_status.go`), one part per reconciler of `pkg/controllers/nodeclass/`, in their
order: `ami.go` (`amis`, AMIsReady), `placementgroup.go` (PlacementGroupReady), `subnet.go` (`subnets`,
SubnetsReady), `securitygroup.go` (`securityGroups`, SecurityGroupsReady), `instanceprofile.go`
(`instanceProfile`, InstanceProfileReady), `validation.go` (ValidationSucceeded); `Ready` is the root
over all six.

What carpool read (`carpool.app.karpenter_status` gathers it, with the reads the launch path makes
anyway: `carpool.app.discovery`, `carpool.app.images`, `carpool.app.profiles`) comes in as
`NodeClassReadings`; a reading that could not be made (None) leaves its part as it was, as a reconciler
that returns an error leaves its condition. Karpenter's reasons and messages are kept word for word where
Karpenter has them: `SubnetsNotFound` "SubnetSelector did not match any Subnets", `SecurityGroupsNotFound`
"SecurityGroupSelector did not match any SecurityGroups", `AMINotFound` "AMISelector did not match any
AMIs" (carpool adds which terms in parentheses), `DependenciesNotReady` "Awaiting AMI, Instance Profile,
Security Group, and Subnet resolution". Where carpool knows more than Karpenter says:
- a role that does not exist: Karpenter v1.14.1 fails the reconcile and leaves InstanceProfileReady
  Unknown (the reason only in its log); carpool sets it False with its cause's name (`RoleNotFound`,
  the same word `FailedScheduling` uses) and the message naming `spec.role`, so `kubectl describe` says it;
- a launch the class refused (`carpool.launch.failures.Cause`, remembered in `carpool.state.not_ready`)
  sets the part it names False with that cause and message (Karpenter learns the same from its dry-run
  validation and its launch errors);
- an object carpool's judgement refuses (`carpool.api.cluster_config`) has ValidationSucceeded False,
  `NodeClassValidationFailed`, with the problems naming their fields; its other parts are not read.
carpool has no placement groups or capacity reservations (the CRD's `placementGroupSelector` is refused
by its model): PlacementGroupReady is True as Karpenter sets it for a class without a selector.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from carpool.amis import AmiNotFound, AmiSelectionError, ResolvedAmi
from carpool.amis.model import preference_key
from carpool.karpenter_status.conditions import FALSE, UNKNOWN, ConditionSet, failing_dependents
from carpool.launch.failures import AMI_NOT_FOUND, Cause

__all__ = [
    "AMIS_READY",
    "DEPENDENTS",
    "INSTANCE_PROFILE_READY",
    "SECURITY_GROUPS_READY",
    "SUBNETS_READY",
    "VALIDATION_SUCCEEDED",
    "NodeClassReadings",
    "Problem",
    "launch_cause",
    "nodeclass_status",
    "not_ready",
]

AMIS_READY: Final = "AMIsReady"
SUBNETS_READY: Final = "SubnetsReady"
SECURITY_GROUPS_READY: Final = "SecurityGroupsReady"
INSTANCE_PROFILE_READY: Final = "InstanceProfileReady"
VALIDATION_SUCCEEDED: Final = "ValidationSucceeded"
PLACEMENT_GROUP_READY: Final = "PlacementGroupReady"
#: what `Ready` is computed from (`EC2NodeClass.StatusConditions`, capacity reservations off)
DEPENDENTS: Final = (AMIS_READY, SUBNETS_READY, SECURITY_GROUPS_READY, INSTANCE_PROFILE_READY,
                     VALIDATION_SUCCEEDED, PLACEMENT_GROUP_READY)
#: what validation waits for (`Validation.requiredConditions`)
_REQUIRED: Final = (AMIS_READY, INSTANCE_PROFILE_READY, SECURITY_GROUPS_READY, SUBNETS_READY)
DEPENDENCIES_NOT_READY: Final = "DependenciesNotReady"
_AWAITING: Final = "Awaiting AMI, Instance Profile, Security Group, and Subnet resolution"
SUBNETS_NOT_FOUND: Final = ("SubnetsNotFound", "SubnetSelector did not match any Subnets")
SECURITY_GROUPS_NOT_FOUND: Final = ("SecurityGroupsNotFound", "SecurityGroupSelector did not match any SecurityGroups")
#: the condition each cause of a refused launch is about
_CONDITION_OF: Final = {
    Cause.ROLE: INSTANCE_PROFILE_READY,
    Cause.INSTANCE_PROFILE: INSTANCE_PROFILE_READY,
    Cause.SUBNET: SUBNETS_READY,
    Cause.SECURITY_GROUP: SECURITY_GROUPS_READY,
    Cause.AMI: AMIS_READY,
    Cause.LAUNCH_TEMPLATE: VALIDATION_SUCCEEDED,
}


@dataclass(frozen=True, slots=True)
class Problem:
    """A part found failing: a condition's reason and message."""

    reason: str
    message: str


@dataclass(frozen=True)
class NodeClassReadings:
    """What the status of one EC2NodeClass is built from. None: not read this time (left as it was)."""

    #: carpool's judgement of the object (empty: valid; else nothing else is read)
    problems: Sequence[str] = ()
    #: DescribeSubnets shapes of the subnets its terms select
    subnets: Sequence[Mapping[str, Any]] | None = None
    #: DescribeSecurityGroups shapes of the groups its terms select
    security_groups: Sequence[Mapping[str, Any]] | None = None
    #: whether it has security group terms at all (none: nothing to find, Ready as Karpenter says)
    security_group_terms: bool = True
    #: the images its AMI terms select, or why they select none
    amis: Sequence[ResolvedAmi] | AmiSelectionError | None = None
    #: the instance profile it launches with, or why it has none
    instance_profile: str | Problem | None = None
    #: the last launch it refused, (cause, message), while remembered (`carpool.state.not_ready`)
    refused: tuple[str, str] | None = None


def nodeclass_status(obj: Mapping[str, Any], readings: NodeClassReadings, now: datetime) -> dict[str, Any]:
    """The status the EC2NodeClass `obj` (as read) should have."""
    before = obj.get("status") or {}
    status: dict[str, Any] = {k: before[k] for k in ("subnets", "securityGroups", "amis", "instanceProfile") if k in before}
    conditions = ConditionSet(obj, DEPENDENTS, now)
    if readings.problems:
        conditions.set_false(VALIDATION_SUCCEEDED, "NodeClassValidationFailed", "; ".join(readings.problems))
    else:
        refused = _refusal(readings.refused)
        _amis(conditions, status, readings.amis)
        conditions.set_true(PLACEMENT_GROUP_READY)
        _subnets(conditions, status, readings.subnets)
        _security_groups(conditions, status, readings.security_groups, readings.security_group_terms)
        _instance_profile(conditions, status, readings.instance_profile)
        if refused is not None and refused[0] != VALIDATION_SUCCEEDED:
            _refused_part(conditions, *refused)
        _validation(conditions, refused)
    status["conditions"] = conditions.conditions()
    return status


def _refusal(refused: tuple[str, str] | None) -> tuple[str, Problem] | None:
    """The condition a refused launch is about, with its cause as the reason."""
    if refused is None:
        return None
    try:
        cause = Cause(refused[0])
    except ValueError:
        return None
    return _CONDITION_OF[cause], Problem(str(cause), refused[1])


def _refused_part(conditions: ConditionSet, kind: str, problem: Problem) -> None:
    """What the launch met overrides a reading that found the part fine (a selector's own False stays)."""
    current = conditions.get(kind)
    if current is None or current.get("status") != FALSE:
        conditions.set_false(kind, problem.reason, problem.message)


def _amis(conditions: ConditionSet, status: dict[str, Any], amis: Sequence[ResolvedAmi] | AmiSelectionError | None) -> None:
    if amis is None:
        return
    if isinstance(amis, AmiNotFound) or (not isinstance(amis, AmiSelectionError) and not amis):
        detail = f" ({amis})" if isinstance(amis, AmiNotFound) and str(amis) else ""
        status.pop("amis", None)
        conditions.set_false(AMIS_READY, "AMINotFound", AMI_NOT_FOUND + detail)
        return
    if isinstance(amis, AmiSelectionError):
        conditions.set_false(AMIS_READY, "UnsupportedAlias", str(amis))
        return
    status["amis"] = [_ami(a) for a in sorted(amis, key=preference_key)]
    conditions.set_true(AMIS_READY)


def _ami(ami: ResolvedAmi) -> dict[str, Any]:
    """One `status.amis` entry: requirements as NodeSelectorRequirements (no minValues), shortest key
    first, as `ami.go` sorts them."""
    reqs = [{k: v for k, v in spec.items() if k != "minValues"} for spec in ami.requirements.specs()]
    reqs.sort(key=lambda r: (len(r["key"]), r["key"]))
    out: dict[str, Any] = {"id": ami.id}
    if ami.deprecated:
        out["deprecated"] = True
    if ami.name:
        out["name"] = ami.name
    out["requirements"] = reqs
    return out


def _subnets(conditions: ConditionSet, status: dict[str, Any], subnets: Sequence[Mapping[str, Any]] | None) -> None:
    if subnets is None:
        return
    if not subnets:
        status.pop("subnets", None)
        conditions.set_false(SUBNETS_READY, *SUBNETS_NOT_FOUND)
        return
    ordered = sorted(subnets, key=lambda s: (-int(s.get("AvailableIpAddressCount") or 0), str(s.get("SubnetId"))))
    status["subnets"] = [{"id": s["SubnetId"], "zone": s.get("AvailabilityZone", ""),
                          **({"zoneID": s["AvailabilityZoneId"]} if s.get("AvailabilityZoneId") else {})}
                         for s in ordered]
    conditions.set_true(SUBNETS_READY)


def _security_groups(conditions: ConditionSet, status: dict[str, Any], groups: Sequence[Mapping[str, Any]] | None,
                     has_terms: bool) -> None:
    if groups is None:
        return
    if not groups and has_terms:
        status.pop("securityGroups", None)
        conditions.set_false(SECURITY_GROUPS_READY, *SECURITY_GROUPS_NOT_FOUND)
        return
    ordered = sorted(groups, key=lambda g: str(g.get("GroupId")))
    listed = [{"id": g["GroupId"], **({"name": g["GroupName"]} if g.get("GroupName") else {})} for g in ordered]
    if listed:
        status["securityGroups"] = listed
    else:
        status.pop("securityGroups", None)
    conditions.set_true(SECURITY_GROUPS_READY)


def _instance_profile(conditions: ConditionSet, status: dict[str, Any], profile: str | Problem | None) -> None:
    if profile is None:
        return
    if isinstance(profile, Problem):
        conditions.set_false(INSTANCE_PROFILE_READY, profile.reason, profile.message)
        return
    status["instanceProfile"] = profile
    conditions.set_true(INSTANCE_PROFILE_READY)


def _validation(conditions: ConditionSet, refused: tuple[str, Problem] | None) -> None:
    """`validation.go`: waits for the parts it needs; carpool's own dry run is the launch (a launch
    template EC2 refused)."""
    states = [(conditions.get(kind) or {}).get("status") for kind in _REQUIRED]
    if FALSE in states:
        conditions.set_false(VALIDATION_SUCCEEDED, DEPENDENCIES_NOT_READY, _AWAITING)
    elif UNKNOWN in states:
        conditions.set_unknown(VALIDATION_SUCCEEDED, DEPENDENCIES_NOT_READY, _AWAITING)
    elif refused is not None and refused[0] == VALIDATION_SUCCEEDED:
        conditions.set_false(VALIDATION_SUCCEEDED, refused[1].reason, refused[1].message)
    else:
        conditions.set_true(VALIDATION_SUCCEEDED)


def not_ready(obj: Mapping[str, Any]) -> tuple[str, Problem] | None:
    """Why the EC2NodeClass `obj` is `Ready=False` at its current generation: the condition that failed
    most recently, preferring a part's own cause to validation's `DependenciesNotReady`; None when it is
    Ready, Unknown, or its status is older than its spec (an edited class is tried again)."""
    failing = failing_dependents(obj, DEPENDENTS)
    if not failing:
        return None
    first = next((c for c in failing if c.get("reason") != DEPENDENCIES_NOT_READY), failing[0])
    return str(first.get("type")), Problem(str(first.get("reason") or ""), str(first.get("message") or ""))


#: the cause a launch from a class failing a condition would meet (`carpool.launch.failures`)
_CAUSE_OF: Final = {
    AMIS_READY: Cause.AMI,
    SUBNETS_READY: Cause.SUBNET,
    SECURITY_GROUPS_READY: Cause.SECURITY_GROUP,
    INSTANCE_PROFILE_READY: Cause.INSTANCE_PROFILE,
    VALIDATION_SUCCEEDED: Cause.LAUNCH_TEMPLATE,
    PLACEMENT_GROUP_READY: Cause.LAUNCH_TEMPLATE,
}


def launch_cause(kind: str, problem: Problem) -> tuple[Cause, str]:
    """A failing condition as the provisioner says a class's refusal: its cause (the reason itself when
    it is one, `RoleNotFound`), and the message naming the field to fix."""
    try:
        cause = Cause(problem.reason)
    except ValueError:
        cause = _CAUSE_OF.get(kind, Cause.LAUNCH_TEMPLATE)
    message = problem.message if problem.message.startswith("spec") else f"{cause.field}: {problem.message}"
    return cause, message
