"""The instance profile a node class launches with, and the garbage collection of those carpool made.

`spec.instanceProfile` is used as given: the user's profile, whatever role it holds (the stack's IAM
lets carpool pass only the roles the deployment names, `infra/functions.py`). `spec.role` gets the
stack's own profile when it names the stack's node role, and otherwise a profile made for it
(`carpool.launch.profiles`), ensured once per process and `PROFILE_TTL_SECONDS`, as Karpenter caches its
instance profiles. The disruption function, which runs every minute, deletes the profiles nothing names
or uses any more (`collect`), every `COLLECT_EVERY` as Karpenter's garbage collector runs.

A profile just created can take a few seconds to be usable by EC2 (IAM is eventually consistent): a
launch refused for it fails that claim alone, and its pods are provisioned again on the next round.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from carpool.api.nodeclass import EC2NodeClass
from carpool.app.wiring import Dependencies
from carpool.launch import profiles
from carpool.launch.failures import Cause
from carpool.launch.templates import LaunchTemplateError
from carpool.ports import RoleNotFound

log = logging.getLogger(__name__)
#: how long this process trusts that a profile it ensured still exists with its role
PROFILE_TTL_SECONDS = 300.0
#: how often the disruption function collects profiles (Karpenter: every 30 minutes)
COLLECT_EVERY = timedelta(minutes=30)
_ENSURED_KEY = "instance-profiles"
_COLLECTED_KEY = "instance-profiles-collected"
#: profile name -> since when nothing names or uses it, as this process has seen (the disruption
#: function's container lives across its runs; a cold start only delays a deletion)
_UNNAMED_KEY = "instance-profiles-unnamed-since"


def instance_profile(nodeclass: EC2NodeClass, deps: Dependencies) -> str:
    """The profile `nodeclass` launches with (see the module docstring), made when it is carpool's to
    make. Raises LaunchTemplateError naming `spec.role` when no profile can be had for its role."""
    name, request = _planned(nodeclass, deps)
    if request is None or deps.instance_profiles is None:
        return name
    ensured: dict[str, datetime] = deps.cache.setdefault(_ENSURED_KEY, {})
    now = deps.clock()
    at = ensured.get(request.name)
    if at is None or not 0 <= (now - at).total_seconds() < PROFILE_TTL_SECONDS:
        try:
            deps.instance_profiles.ensure(request)
        except RoleNotFound as exc:
            raise LaunchTemplateError(str(exc), Cause.ROLE) from exc
        ensured[request.name] = now
    return request.name


def planned_profile(nodeclass: EC2NodeClass, deps: Dependencies) -> str:
    """The name of the profile `nodeclass` launches with, without asking IAM (the EC2NodeClass's
    `status.instanceProfile`). Raises LaunchTemplateError (`Cause.ROLE`) when this deployment cannot make
    one for its role."""
    return _planned(nodeclass, deps)[0]


def _planned(nodeclass: EC2NodeClass, deps: Dependencies) -> tuple[str, profiles.ProfileRequest | None]:
    """The profile's name and, when carpool makes it, what to ensure."""
    spec = nodeclass.spec
    if spec.instance_profile:
        return spec.instance_profile, None
    role = spec.role or ""
    if is_stack_role(role, deps.settings.node_role) and deps.settings.instance_profile:
        return deps.settings.instance_profile, None
    if deps.instance_profiles is None:
        raise LaunchTemplateError(f"spec.role: role {role!r} is not the stack's node role and this deployment "
                                  "cannot create instance profiles", Cause.ROLE)
    s = deps.settings
    request = profiles.request_for(s.cluster_name, s.region, nodeclass.name, role, spec.tags)
    return request.name, request


def is_stack_role(role: str, node_role_arn: str) -> bool:
    """Whether `spec.role` names the role whose profile the stack made (`CARPOOL_NODE_ROLE_ARN`)."""
    return bool(role and node_role_arn) and profiles.role_name(role) == profiles.role_name(node_role_arn)


def current_profiles(nodeclasses: Iterable[EC2NodeClass], deps: Dependencies) -> set[str]:
    """The names of the profiles carpool makes for the node classes of the config as it is now."""
    s = deps.settings
    return {
        profiles.profile_name(s.cluster_name, s.region, nc.name, nc.spec.role)
        for nc in nodeclasses
        if nc.spec.role and not is_stack_role(nc.spec.role, s.node_role)
    }


def collect(deps: Dependencies, nodeclasses: Iterable[EC2NodeClass],
            instances: Callable[[], Iterable[dict[str, object]]], now: datetime) -> list[str]:
    """Delete carpool's profiles that no node class has named and no live instance (`instances`, read
    only when due, DescribeInstances shape) has used for `profiles.GRACE`, checked every `COLLECT_EVERY`; returns the names deleted. Nothing to do without the IAM adapter, nor
    when the config names no role needing a profile: the stack grants IAM access to carpool's profiles
    only when the config it deployed names such a role (`infra/functions.py`), so a deploy that drops the
    last one leaves its profiles behind (README: how to delete them)."""
    current = current_profiles(nodeclasses, deps)
    if deps.instance_profiles is None or not current:
        return []
    last = deps.cache.get(_COLLECTED_KEY)
    if isinstance(last, datetime) and 0 <= (now - last).total_seconds() < COLLECT_EVERY.total_seconds():
        return []
    deps.cache[_COLLECTED_KEY] = now
    s = deps.settings
    existing = deps.instance_profiles.list_profiles(profiles.profile_path(s.cluster_name, s.region))
    in_use = {_profile_of(i) for i in instances()} - {""}
    since = profiles.unnamed_since(existing, current, in_use, now, deps.cache.get(_UNNAMED_KEY, {}))
    deps.cache[_UNNAMED_KEY] = since
    doomed = profiles.profiles_to_delete(existing, since, now)
    for name in doomed:
        deps.instance_profiles.delete(name)
        since.pop(name, None)
        deps.cache.get(_ENSURED_KEY, {}).pop(name, None)
    return doomed


def _profile_of(instance: dict[str, object]) -> str:
    """The profile name of an instance: DescribeInstances gives its ARN (`...:instance-profile/<path><name>`)."""
    profile = instance.get("IamInstanceProfile")
    arn = profile.get("Arn", "") if isinstance(profile, dict) else ""
    return str(arn).rsplit("/", 1)[-1]
