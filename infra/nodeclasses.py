"""What the EC2NodeClasses of the config ask of the functions' IAM, read at synth from the config text.

A launch passes a role to EC2 and may make EC2 use a KMS key, so the grants follow the config:

* ``spec.role``: ``iam:PassRole`` on that role, and (unless it is the stack's node role, whose profile
  the stack makes) the instance-profile actions on carpool's own profiles (``carpool.launch.profiles``);
* ``spec.instanceProfile``: the profile's role cannot be read from the config, so the deployment names
  it with ``-c instanceProfileRoleArns=...`` and PassRole covers exactly those roles; a config naming an
  instance profile without that key is refused at synth (the launch would be denied at runtime);
* ``blockDeviceMappings[].ebs.kmsKeyID``: EC2 creates grants on the key for the launch, which carpool
  may only ask for keys named with ``-c ebsKmsKeyArns=...``; a node class naming another key is refused
  at synth, with the field, rather than failing every launch.

The key ID in a node class may be the key's ARN or its bare id (the last part of the ARN); an alias
cannot be resolved to a key at synth and is refused with the same line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from infra.config import ConfigError
from infra.settings import Settings


@dataclass(frozen=True)
class NodeClassNeeds:
    """The roles, instance profiles and KMS keys the node classes name, each with where it is named."""

    #: role name (as written: a path may precede the name) -> "EC2NodeClass <name>"
    roles: dict[str, str]
    #: instance profile name -> "EC2NodeClass <name>"
    instance_profiles: dict[str, str]
    #: kmsKeyID as written -> "EC2NodeClass <name>: spec.blockDeviceMappings[i].ebs.kmsKeyID"
    kms_keys: dict[str, str]

    def roles_needing_profiles(self, stack_role_name: str) -> list[str]:
        """The roles carpool makes instance profiles for: every one but the stack's node role. A role
        that is a CDK token is the stack's own (only the built-in default config holds one)."""
        return sorted(r for r in self.roles if r != stack_role_name and not r.startswith("${Token["))


def needs_of(text: str) -> NodeClassNeeds:
    """Read the node classes' roles, profiles and keys from the config text (already checked as YAML)."""
    roles: dict[str, str] = {}
    profiles: dict[str, str] = {}
    keys: dict[str, str] = {}
    for doc in yaml.safe_load_all(text):
        if not isinstance(doc, dict) or doc.get("kind") != "EC2NodeClass":
            continue
        where = f"EC2NodeClass {(doc.get('metadata') or {}).get('name')}"
        spec: dict[str, Any] = doc.get("spec") or {}
        if isinstance(spec.get("role"), str):
            roles.setdefault(spec["role"], where)
        if isinstance(spec.get("instanceProfile"), str):
            profiles.setdefault(spec["instanceProfile"], where)
        for i, mapping in enumerate(spec.get("blockDeviceMappings") or []):
            key = ((mapping or {}).get("ebs") or {}).get("kmsKeyID")
            if isinstance(key, str) and key:
                keys.setdefault(key, f"{where}: spec.blockDeviceMappings[{i}].ebs.kmsKeyID")
    return NodeClassNeeds(roles, profiles, keys)


def check(needs: NodeClassNeeds, settings: Settings, source: str) -> None:
    """Refuse, with the field, what the stack would not be allowed to launch with (module docstring)."""
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
