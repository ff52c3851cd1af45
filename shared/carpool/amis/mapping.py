"""Which AMI each instance type boots: the fix for the "first AMI" seed bug.

Karpenter once took the first AMI of a node class for every instance type, and later matched AMI
requirements against the looser NodeClaim requirements with undefined well-known labels allowed; both
put nvidia images on non-GPU types (aws/karpenter-provider-aws#7925). carpool matches each image's
requirements against the *instance type's own* requirements with strict compatibility
(`Requirements.compatible`): a key the AMI requires that the type does not define matches only a
negative operator. A non-GPU type has no `instance-gpu-count` label, so `gpu-count Exists` (nvidia) fails
on it while `gpu-count DoesNotExist` (standard) passes.

This relies on the catalog labelling accelerator counts only when the type has accelerators (never
`instance-gpu-count=0`), as Karpenter does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from carpool.amis.model import ResolvedAmi, preference_key
from carpool.requirements import Requirements


class InstanceTypeLike(Protocol):
    """What mapping needs of `carpool.catalog.InstanceType`."""

    @property
    def name(self) -> str: ...

    @property
    def requirements(self) -> Requirements: ...


@dataclass(frozen=True)
class AmiRejection:
    """One AMI that cannot boot an instance type, and why (for `carpool amis` and claim explanations)."""

    ami: ResolvedAmi
    reason: str

    def __str__(self) -> str:
        return f"{self.ami.describe()}: {self.reason}"


def _ranked(amis: Iterable[ResolvedAmi]) -> list[ResolvedAmi]:
    """Best first, independent of the order the caller passes (the order is what the seed bug used)."""
    return sorted(amis, key=preference_key)


def ami_for(it: InstanceTypeLike, ranked: Sequence[ResolvedAmi]) -> ResolvedAmi | None:
    """The first of `ranked` (best first) whose requirements the type strictly satisfies, else None."""
    for ami in ranked:
        if it.requirements.compatible(ami.requirements) is None:
            return ami
    return None


def map_instance_types(
    amis: Iterable[ResolvedAmi], instance_types: Iterable[InstanceTypeLike]
) -> dict[str, ResolvedAmi]:
    """Instance type name -> the AMI it launches with. Types no AMI can boot are absent (not offered)."""
    ranked = _ranked(amis)
    out: dict[str, ResolvedAmi] = {}
    for it in instance_types:
        ami = ami_for(it, ranked)
        if ami is not None:
            out[it.name] = ami
    return out


def explain_mapping(
    amis: Iterable[ResolvedAmi], instance_types: Iterable[InstanceTypeLike]
) -> dict[str, list[AmiRejection]]:
    """For every instance type no AMI can boot, each AMI with the reason it was rejected.

    An empty list means the node class resolved no AMI at all.
    """
    ranked = _ranked(amis)
    out: dict[str, list[AmiRejection]] = {}
    for it in instance_types:
        if ami_for(it, ranked) is not None:
            continue
        out[it.name] = [AmiRejection(ami, str(it.requirements.compatible(ami.requirements))) for ami in ranked]
    return out


def group_by_ami(mapping: Mapping[str, ResolvedAmi]) -> dict[str, list[str]]:
    """AMI id -> instance type names (sorted), the shape launch-template grouping starts from."""
    groups: dict[str, list[str]] = {}
    for name in sorted(mapping):
        groups.setdefault(mapping[name].id, []).append(name)
    return groups
