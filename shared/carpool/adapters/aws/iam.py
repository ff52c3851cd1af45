"""IAM instance profiles for `EC2NodeClass.spec.role` (the `InstanceProfiles` port), as Karpenter's
`pkg/providers/instanceprofile` manages them: Get, then Create with the tags, then make the role the
profile's only one; Delete removes the role first (IAM refuses to delete a profile holding one).

IAM is a global service: the client is made for the functions' region and needs no endpoint of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from carpool.adapters.aws import session
from carpool.adapters.aws.ec2 import error_code
from carpool.launch.profiles import ExistingProfile, ProfileRequest
from carpool.ports import RoleNotFound

log = logging.getLogger(__name__)
NOT_FOUND = "NoSuchEntity"


class IamInstanceProfiles:
    """`carpool.ports.InstanceProfiles` on boto3's IAM client (`client` is public, as `Ec2Compute`'s)."""

    def __init__(self, client: Any | None = None) -> None:
        self.client = client if client is not None else session.client("iam")

    def ensure(self, request: ProfileRequest) -> None:
        profile = self._get(request.name)
        if profile is None:
            profile = self.client.create_instance_profile(
                InstanceProfileName=request.name, Path=request.path, Tags=_tag_list(request.tags)
            )["InstanceProfile"]
            log.info("created instance profile %s for role %s", request.name, request.role)
        roles = [r["RoleName"] for r in profile.get("Roles") or []]
        if roles == [request.role]:
            return
        for role in roles:  # a profile holds at most one role
            self.client.remove_role_from_instance_profile(InstanceProfileName=request.name, RoleName=role)
        try:
            self.client.add_role_to_instance_profile(InstanceProfileName=request.name, RoleName=request.role)
        except ClientError as e:
            if error_code(e) == NOT_FOUND:
                raise RoleNotFound(request.role) from e
            raise

    def list_profiles(self, path: str) -> list[ExistingProfile]:
        out = []
        for page in self.client.get_paginator("list_instance_profiles").paginate(PathPrefix=path):
            for p in page.get("InstanceProfiles") or []:
                roles = tuple(r["RoleName"] for r in p.get("Roles") or [])
                out.append(ExistingProfile(p["InstanceProfileName"], roles, _utc(p["CreateDate"])))
        return out

    def delete(self, name: str) -> None:
        profile = self._get(name)
        if profile is None:
            return
        for role in profile.get("Roles") or []:
            self.client.remove_role_from_instance_profile(InstanceProfileName=name, RoleName=role["RoleName"])
        try:
            self.client.delete_instance_profile(InstanceProfileName=name)
        except ClientError as e:
            if error_code(e) != NOT_FOUND:
                raise
        log.info("deleted instance profile %s", name)

    def _get(self, name: str) -> dict[str, Any] | None:
        try:
            return dict(self.client.get_instance_profile(InstanceProfileName=name)["InstanceProfile"])
        except ClientError as e:
            if error_code(e) == NOT_FOUND:
                return None
            raise


def _tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in sorted(tags.items())]


def _utc(when: datetime) -> datetime:
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
