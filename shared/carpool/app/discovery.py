"""Subnets and security groups an EC2NodeClass selects, looked up with DescribeSubnets /
DescribeSecurityGroups and cached per process for a few minutes (they change rarely; every launch needs
them)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from carpool.api.nodeclass import EC2NodeClass
from carpool.app.wiring import Dependencies

TTL = timedelta(minutes=5)


def _filters(term: Any, id_filter: str) -> list[dict[str, Any]]:
    if getattr(term, "id", None):
        return [{"Name": id_filter, "Values": [term.id]}]
    out = []
    if getattr(term, "name", None):
        out.append({"Name": "group-name", "Values": [term.name]})
    for key, value in (getattr(term, "tags", None) or {}).items():
        out.append({"Name": "tag-key", "Values": [key]} if value == "*" else {"Name": f"tag:{key}", "Values": [value]})
    return out


def _cached(deps: Dependencies, key: str, now: datetime, load: Any) -> Any:
    """`load()`, kept `TTL` by `now` (the dependencies' clock); a read stamped after `now` was timed on
    another clock (the simulation swaps it) and is made again."""
    hit = deps.cache.get(key)
    if hit and timedelta(0) <= now - hit[0] < TTL:
        return hit[1]
    value = load()
    deps.cache[key] = (now, value)
    return value


def subnets(nodeclass: EC2NodeClass, deps: Dependencies) -> list[dict[str, Any]]:
    """Every subnet any of the node class's terms selects (terms are ORed, as in Karpenter)."""
    def load() -> list[dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for term in nodeclass.spec.subnet_selector_terms:
            for s in deps.compute.describe_subnets(_filters(term, "subnet-id")):
                found[s["SubnetId"]] = s
        return list(found.values())

    return _cached(deps, f"subnets/{nodeclass.name}", deps.clock(), load)


def security_groups(nodeclass: EC2NodeClass, deps: Dependencies) -> list[str]:
    """The ids of every security group any of the node class's terms selects, sorted."""
    return [g["GroupId"] for g in security_group_shapes(nodeclass, deps)]


def security_group_shapes(nodeclass: EC2NodeClass, deps: Dependencies) -> list[dict[str, Any]]:
    """Every security group any of the node class's terms selects (DescribeSecurityGroups shapes, by id):
    the launch needs their ids, the EC2NodeClass's `status.securityGroups` their names too."""
    def load() -> list[dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for term in nodeclass.spec.security_group_selector_terms:
            for g in deps.compute.describe_security_groups(_filters(term, "group-id")):
                found[g["GroupId"]] = g
        return [found[k] for k in sorted(found)]

    return _cached(deps, f"sgs/{nodeclass.name}", deps.clock(), load)
