"""Instance profiles for `EC2NodeClass.spec.role`: their names, path and tags, and which to delete.

EC2 launches with an instance profile, not a role. As Karpenter does (`pkg/providers/instanceprofile`,
`pkg/controllers/nodeclass/instanceprofile.go`), a node class naming a `role` gets a profile made for it,
tagged so that carpool's IAM policy lets it manage that profile and nothing else, and deleted by garbage
collection once no node class names it and no instance uses it. Two deliberate differences:

- the name is derived, not random: `<cluster>_<hash of region, node class, role>`. Karpenter keeps the
  random name it drew in the node class's status; every carpool function must find the same profile
  without reading the status first (which carpool writes, `status.instanceProfile`, once a minute). A changed role yields a new name, so instances still running with
  the old profile keep it until they are gone, as in Karpenter;
- the path is `/carpool/<region>/<cluster>/` (Karpenter: `/karpenter/<region>/<cluster>/<uid>/`), which
  scopes both the IAM grants and the garbage collector's listing to this cluster's profiles.

The role the stack itself creates (or is given with `-c nodeRoleArn`) already has a profile made by the
stack (`infra/cluster.py`); a node class naming that role launches with it, and nothing is created.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from carpool import labels as wk

#: IAM instance profile names: at most 128 characters of [\w+=,.@-]
MAX_NAME_LENGTH: Final = 128
#: a profile is deleted only once nothing has named or used it for this long, and no sooner after it was
#: made: a function still holding an older config may be about to launch with it
GRACE: Final = timedelta(minutes=30)


@dataclass(frozen=True)
class ProfileRequest:
    """The profile a node class's `role` needs: what to create (or find) and what it must hold."""

    name: str
    path: str
    role: str
    tags: Mapping[str, str]


@dataclass(frozen=True)
class ExistingProfile:
    """An instance profile as IAM lists it (ListInstanceProfiles shape, reduced)."""

    name: str
    roles: tuple[str, ...]
    created: datetime


def profile_path(cluster: str, region: str) -> str:
    """`/carpool/<region>/<cluster>/`: every profile carpool makes for this cluster lives under it."""
    return f"/carpool/{region}/{cluster}/"


def role_name(role: str) -> str:
    """The bare role name: `spec.role` may carry a path (`team/node-role`), AddRoleToInstanceProfile
    takes the name alone (Karpenter strips the path the same way)."""
    return role.rsplit("/", 1)[-1]


def profile_name(cluster: str, region: str, nodeclass: str, role: str) -> str:
    """`<cluster>_<16 hex>`: stable for a (region, node class, role), new when the role changes."""
    digest = hashlib.sha256(f"{region}\0{nodeclass}\0{role}".encode()).hexdigest()[:16]
    return f"{cluster}_{digest}"[-MAX_NAME_LENGTH:]


def profile_tags(cluster: str, region: str, nodeclass: str, user_tags: Mapping[str, str] | None) -> dict[str, str]:
    """Karpenter's profile tags (the node class's own tags under the cluster, node class and region ones)
    plus carpool's ownership tag: the IAM policy asks for these on create and on every later change."""
    return {
        **(user_tags or {}),
        wk.TAG_CLUSTER_OWNED.format(cluster=cluster): "owned",
        wk.TAG_MANAGED_BY: cluster,
        "eks:eks-cluster-name": cluster,
        wk.TAG_NODECLASS: nodeclass,
        wk.REGION: region,
    }


def request_for(cluster: str, region: str, nodeclass: str, role: str,
                user_tags: Mapping[str, str] | None = None) -> ProfileRequest:
    return ProfileRequest(
        name=profile_name(cluster, region, nodeclass, role),
        path=profile_path(cluster, region),
        role=role_name(role),
        tags=profile_tags(cluster, region, nodeclass, user_tags),
    )


def unnamed_since(
    existing: Iterable[ExistingProfile], current: Iterable[str], in_use: Iterable[str], now: datetime,
    previous: Mapping[str, datetime],
) -> dict[str, datetime]:
    """Since when each profile under carpool's path has been neither named by a node class (`current`)
    nor used by a live instance (`in_use`, profile names): as `previous` says, or from `now` when first
    seen so. A profile named or used again drops out."""
    keep = set(current) | set(in_use)
    return {p.name: previous.get(p.name, now) for p in existing if p.name not in keep}


def profiles_to_delete(
    existing: Iterable[ExistingProfile], since: Mapping[str, datetime], now: datetime, grace: timedelta = GRACE,
) -> list[str]:
    """Profiles unnamed and unused (`since`) for `grace`, and created more than `grace` ago, sorted: a
    function may still hold a config that names the profile, and launch with it, for a while after the
    change (Karpenter protects such profiles with a cache of its own for the same reason)."""
    return sorted(
        p.name for p in existing if p.name in since and since[p.name] + grace <= now and p.created + grace <= now
    )
