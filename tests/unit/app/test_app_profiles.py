"""Which instance profile a node class launches with (`carpool.app.profiles.instance_profile`): the user's
as given, the stack's for the stack's role, one made (and remembered) for any other role."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from carpool.api.loader import load
from carpool.api.nodeclass import EC2NodeClass
from carpool.app import profiles
from carpool.app.settings import Settings
from carpool.launch import profiles as naming
from carpool.launch.profiles import ExistingProfile, ProfileRequest
from carpool.launch.templates import LaunchTemplateError
from carpool.ports import RoleNotFound

NOW = datetime(2026, 1, 1, tzinfo=UTC)
STACK_ROLE = "arn:aws:iam::123456789012:role/carpool/stack-node-role"
TERMS = [{"tags": {"karpenter.sh/discovery": "demo"}}]


class LocalProfiles:
    """An in-memory `InstanceProfiles` with IAM's rules: a profile holds one role, the role must exist."""

    def __init__(self, roles: set[str]) -> None:
        self.roles = roles
        self.profiles: dict[str, ProfileRequest] = {}
        self.calls = 0

    def ensure(self, request: ProfileRequest) -> None:
        self.calls += 1
        if request.role not in self.roles:
            raise RoleNotFound(request.role)
        self.profiles[request.name] = request

    def list_profiles(self, path: str) -> list[ExistingProfile]:
        return [ExistingProfile(n, (r.role,), NOW - timedelta(days=1)) for n, r in self.profiles.items() if r.path == path]

    def delete(self, name: str) -> None:
        self.profiles.pop(name, None)


def nodeclass(name: str = "nc", **spec: Any) -> EC2NodeClass:
    body = {"amiSelectorTerms": [{"alias": "al2023@latest"}], "subnetSelectorTerms": TERMS,
            "securityGroupSelectorTerms": TERMS, **spec}
    (nc,) = load([{"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name},
                   "spec": body}]).nodeclasses
    return nc


def deps(local: LocalProfiles | None) -> Any:
    settings = Settings(cluster_name="demo", region="eu-west-1", node_role=STACK_ROLE, instance_profile="stack-profile")
    return SimpleNamespace(settings=settings, cache={}, clock=lambda: NOW, instance_profiles=local)


def test_instance_profile_is_used_as_given() -> None:
    local = LocalProfiles(set())
    assert profiles.instance_profile(nodeclass(instanceProfile="users-own"), deps(local)) == "users-own"
    assert local.calls == 0


@pytest.mark.parametrize("role", ["stack-node-role", "carpool/stack-node-role"])
def test_the_stack_role_uses_the_stacks_profile(role: str) -> None:
    local = LocalProfiles({"stack-node-role"})
    assert profiles.instance_profile(nodeclass(role=role), deps(local)) == "stack-profile"
    assert local.calls == 0


def test_another_role_gets_a_profile_made_once_per_ttl() -> None:
    local, d = LocalProfiles({"team-a"}), deps(None)
    d.instance_profiles = local
    name = profiles.instance_profile(nodeclass(role="team-a", tags={"team": "a"}), d)
    assert name == naming.profile_name("demo", "eu-west-1", "nc", "team-a")
    assert local.profiles[name].role == "team-a" and local.profiles[name].tags["team"] == "a"
    profiles.instance_profile(nodeclass(role="team-a"), d)
    assert local.calls == 1  # remembered
    d.clock = lambda: NOW + timedelta(seconds=profiles.PROFILE_TTL_SECONDS)
    profiles.instance_profile(nodeclass(role="team-a"), d)
    assert local.calls == 2  # ensured again: it may have been deleted


def test_a_missing_role_is_one_line_naming_spec_role() -> None:
    with pytest.raises(LaunchTemplateError, match=r"^spec\.role: IAM role 'ghost' does not exist$"):
        profiles.instance_profile(nodeclass(role="ghost"), deps(LocalProfiles(set())))
    with pytest.raises(LaunchTemplateError, match=r"^spec\.role: role 'team-a' is not the stack's node role"):
        profiles.instance_profile(nodeclass(role="team-a"), deps(None))


def test_collection_leaves_profiles_alone_when_the_config_names_no_role_needing_one() -> None:
    local = LocalProfiles({"team-a"})
    d = deps(local)
    profiles.instance_profile(nodeclass(role="team-a"), d)
    stack_only = [nodeclass(role="stack-node-role")]
    for step in range(3):  # the stack grants no IAM access then: nothing is listed or deleted
        assert profiles.collect(d, stack_only, lambda: [], NOW + step * profiles.COLLECT_EVERY) == []
    assert len(local.profiles) == 1
