"""What the cluster's EC2NodeClasses may ask of the functions' IAM, decided by the deployment, not by a file.

The config lives in the cluster and changes without a deploy, so the stack cannot read the node classes
at synth. It grants what Karpenter's controller policy grants (``aws/karpenter-provider-aws``
``website/content/en/docs/reference/cloudformation.md``, v1.14.1: ``AllowPassingInstanceRole`` passes the
one ``KarpenterNodeRole-${ClusterName}`` to EC2; the ``AllowScopedInstanceProfile*Actions`` make, tag and
delete profiles only with the cluster's tags), and a deployment widens it by context key:

* ``spec.role``: ``iam:PassRole`` (to EC2 only) on the stack's node role, plus the roles of
  ``-c nodeClassRoles`` (names, ARNs or patterns such as ``KarpenterNodeRole-*``, as a user of Karpenter
  edits ``AllowPassingInstanceRole``); carpool makes instance profiles only for those other roles, so the
  instance-profile actions are granted only when the key names some (``infra/functions.py``);
* ``spec.instanceProfile``: the profile's role cannot be read from a name, so the deployment names it
  with ``-c instanceProfileRoleArns=...``;
* ``blockDeviceMappings[].ebs.kmsKeyID``: EC2 creates grants on the key for the launch, which carpool may
  only ask for keys named with ``-c ebsKmsKeyArns=...``.

A node class asking for more launches nothing; the launch's refusal names the cause
(``carpool.launch.failures``, the class's status). A one-shot ``-c configFile=F`` is checked against
these grants at synth (`check`), by field, so F is refused before it is applied rather than at its first
launch. The key ID in a node class may be the key's ARN or its bare id (the last part of the ARN); an
alias cannot be resolved to a key at synth and is refused with the same line.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from carpool.api.loader import Manifests
from infra.config_file import ConfigError
from infra.settings import Settings

#: what a role ARN looks like before its name (and path)
_ROLE_ARN_PREFIX = ":role/"


@dataclass(frozen=True)
class NodeClassNeeds:
    """The roles, instance profiles and KMS keys some node classes name, each with where it is named."""

    #: role name (as written: a path may precede the name) -> "EC2NodeClass <name>"
    roles: dict[str, str]
    #: instance profile name -> "EC2NodeClass <name>"
    instance_profiles: dict[str, str]
    #: kmsKeyID as written -> "EC2NodeClass <name>: spec.blockDeviceMappings[i].ebs.kmsKeyID"
    kms_keys: dict[str, str]


def needs_of(manifests: Manifests) -> NodeClassNeeds:
    """The node classes' roles, profiles and keys (of manifests the library has judged)."""
    roles: dict[str, str] = {}
    profiles: dict[str, str] = {}
    keys: dict[str, str] = {}
    for nodeclass in manifests.nodeclasses:
        where = f"EC2NodeClass {nodeclass.name}"
        spec = nodeclass.spec
        if spec.role:
            roles.setdefault(spec.role, where)
        if spec.instance_profile:
            profiles.setdefault(spec.instance_profile, where)
        for i, mapping in enumerate(spec.block_device_mappings or []):
            key = mapping.ebs.kms_key_id if mapping.ebs is not None else None
            if key:
                keys.setdefault(key, f"{where}: spec.blockDeviceMappings[{i}].ebs.kmsKeyID")
    return NodeClassNeeds(roles, profiles, keys)


def role_arn_patterns(settings: Settings, partition: str, account: str) -> list[str]:
    """The ``-c nodeClassRoles`` entries as IAM resource ARNs (a name or pattern in the stack's account)."""
    return [role if role.startswith("arn:") else f"arn:{partition}:iam::{account}:role/{role}"
            for role in settings.node_class_roles]


def passable(role: str, settings: Settings, stack_role_name: str | None) -> bool:
    """Whether a node class's ``spec.role`` is one this deployment may pass: the stack's node role (its name
    known only when ``-c nodeRoleArn`` names it; a role the stack creates is named after the stack), or one
    ``-c nodeClassRoles`` names or matches."""
    if stack_role_name is not None and role == stack_role_name:
        return True
    if stack_role_name is None and role.startswith(f"{settings.stack_name}-"):
        return True
    names = (entry.split(_ROLE_ARN_PREFIX, 1)[-1] for entry in settings.node_class_roles)
    return any(fnmatchcase(role, name) for name in names)


def check(needs: NodeClassNeeds, settings: Settings, source: str, stack_role_name: str | None) -> None:
    """Refuse, with the field, what this deployment would not be allowed to launch with (module docstring).

    ``stack_role_name``: the stack's node role name when known at synth (``-c nodeRoleArn``), else None."""
    for role, where in sorted(needs.roles.items()):
        if not passable(role, settings, stack_role_name):
            raise ConfigError(
                f"{source}: {where}: spec.role {role!r}: carpool may pass only the stack's node role and the roles "
                f"the deployment names; deploy with -c nodeClassRoles={role}"
            )
    for profile, where in sorted(needs.instance_profiles.items()):
        if not settings.instance_profile_role_arns:
            raise ConfigError(
                f"{source}: {where}: spec.instanceProfile {profile!r}: carpool may pass only roles the deployment "
                "names; deploy with -c instanceProfileRoleArns=<ARN of the role in that profile>"
            )
    for key, where in sorted(needs.kms_keys.items(), key=lambda kv: kv[1]):
        if granted_key(key, settings.ebs_kms_key_arns) is None:
            raise ConfigError(
                f"{source}: {where}: KMS key {key!r} is not granted to this deployment; deploy with "
                f"-c ebsKmsKeyArns=<the key's ARN> (a key ARN or id, not an alias)"
            )


def granted_key(key: str, arns: tuple[str, ...]) -> str | None:
    """The granted key ARN a node class's ``kmsKeyID`` names (its ARN or bare id), or None."""
    return next((arn for arn in arns if key in (arn, arn.rsplit("/", 1)[-1])), None)
