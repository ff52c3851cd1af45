"""From a planned claim to a running instance: pick the capacity type, build the launch templates
(grouped by AMI, max pods and user data), send one CreateFleet, and classify what came back.

Everything that decides is in `carpool.launch` (pure); this module only gathers its inputs (subnets,
security groups, the AMI and size of each instance type) and calls EC2 through the `Compute` port.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from carpool import labels
from carpool.amis import ResolvedAmi
from carpool.api.nodeclass import EC2NodeClass
from carpool.api.nodepool import NodePool
from carpool.app import discovery
from carpool.app.wiring import Dependencies
from carpool.catalog import InstanceType
from carpool.launch import fleet, templates
from carpool.launch.userdata.bootstrap import NodeBootstrap
from carpool.scheduling.result import PlannedClaim
from carpool.sizing import NodeSize

log = logging.getLogger(__name__)
CREATED_AT_TAG = "carpool.dev/created-at"
#: claim label naming the launch template its instance came from (launch-template garbage collection)
LAUNCH_TEMPLATE_LABEL = "carpool.dev/launch-template"


@dataclass
class PoolContext:
    """What launching needs about one NodePool: its node class, the AMI and the size of every instance
    type it may launch (the same values the scheduler packed with, so max pods agree everywhere)."""

    nodepool: NodePool
    nodeclass: EC2NodeClass
    ami_family: str
    amis: dict[str, ResolvedAmi]
    sizes: dict[str, NodeSize]
    types: dict[str, InstanceType]


@dataclass
class LaunchAttempt:
    """Result of one CreateFleet: the instance, or the offerings that had no capacity, or an error."""

    instance: fleet.FleetInstance | None = None
    capacity_type: str = ""
    capacity_errors: list[tuple[str, str, str]] = field(default_factory=list)
    error: str | None = None
    image_id: str | None = None
    launch_template: str | None = None
    #: every option's offerings went unavailable after the plan was made (an earlier claim's capacity
    #: errors in the same round): schedule the pods again rather than fail them
    stale: bool = False


def choose_capacity_type(
    claim: PlannedClaim, ctx: PoolContext, unavailable: set[tuple[str, str, str]], zones: set[str]
) -> str | None:
    """Spot when the claim allows it and any option has an available spot offering in a zone with a
    subnet, else on-demand."""
    for ct in (labels.CAPACITY_SPOT, labels.CAPACITY_ON_DEMAND):
        if any(_offerings(claim, ctx, ct, unavailable, zones)):  # _offerings honours the claim's requirements
            return ct
    return None


def _offerings(
    claim: PlannedClaim, ctx: PoolContext, ct: str, unavailable: set[tuple[str, str, str]], zones: set[str]
) -> Iterable[tuple[str, str, float]]:
    zone_req = claim.requirements.get(labels.ZONE)
    ct_req = claim.requirements.get(labels.CAPACITY_TYPE)
    if ct_req is not None and not ct_req.has(ct):
        return
    for choice in claim.instance_types:
        it = ctx.types.get(choice.name)
        if it is None or choice.name not in ctx.amis:
            continue
        for o in it.offerings:
            if o.capacity_type != ct or not o.available or (it.name, o.zone, ct) in unavailable:
                continue
            if o.zone not in zones:
                continue
            if zone_req is not None and not zone_req.has(o.zone):
                continue
            yield (it.name, o.zone, o.price)


def bootstrap(claim: PlannedClaim, ctx: PoolContext, type_name: str, capacity_type: str, deps: Dependencies) -> NodeBootstrap:
    """The node's join configuration. Labels are the claim's (not the type's), so one launch template
    serves every type with the same AMI and max pods."""
    s = deps.settings
    size = ctx.sizes[type_name]
    kubelet = ctx.nodeclass.spec.kubelet
    node_labels = {
        **claim.labels,
        labels.NODEPOOL: ctx.nodepool.name,
        labels.CAPACITY_TYPE: capacity_type,
        labels.OWNED_BY: s.cluster_name,
        labels.EC2NODECLASS: ctx.nodeclass.name,
        labels.IMAGE_ID: ctx.amis[type_name].id,
    }
    for key in (labels.ZONE, labels.INSTANCE_TYPE, labels.REGION, labels.HOSTNAME):
        node_labels.pop(key, None)  # kubelet sets these itself, per instance
    return NodeBootstrap(
        cluster_name=s.cluster_name,
        endpoint=s.cluster_endpoint or f"https://{s.cluster_name}.eks.local",
        ca_bundle=s.cluster_ca or "",
        cluster_cidr=s.cluster_cidr,
        cluster_dns=s.cluster_dns,
        max_pods=size.max_pods,
        kube_reserved=size.kube_reserved,
        system_reserved=size.system_reserved,
        eviction_hard=dict(kubelet.eviction_hard) if kubelet and kubelet.eviction_hard else {},
        labels=node_labels,
        taints=tuple(claim.taints),
        startup_taints=tuple(claim.startup_taints),
        user_data=ctx.nodeclass.spec.user_data,
    )


def launch(
    claim: PlannedClaim, ctx: PoolContext, deps: Dependencies, unavailable: set[tuple[str, str, str]], now: datetime,
    claim_name: str,
) -> LaunchAttempt:
    """One CreateFleet for `claim`, tagged with the ledger's `claim_name` (how orphans are traced back)."""
    subnet_by_zone = fleet.pick_subnets(discovery.subnets(ctx.nodeclass, deps))
    ct = choose_capacity_type(claim, ctx, unavailable, set(subnet_by_zone))
    if ct is None:
        return LaunchAttempt(error="no available offering in a zone with a subnet for any instance type of the claim",
                             stale=True)
    offers = list(_offerings(claim, ctx, ct, unavailable, set(subnet_by_zone)))
    type_names = list(dict.fromkeys(o[0] for o in sorted(offers, key=lambda o: o[2])))[: deps.settings.max_fleet_types]
    specs = _templates(claim, ctx, deps, ct, type_names)
    lt_of = {t: spec.name for spec in specs for t in spec.instance_types}
    overrides = [
        fleet.FleetOverride(lt_of[t], t, subnet_by_zone[z], z, price) for t, z, price in offers if t in lt_of
    ]
    tags = fleet.fleet_tags(deps.settings.cluster_name, ctx.nodepool.name, claim_name, ctx.nodeclass.name,
                            ctx.nodeclass.spec.tags)
    tags[CREATED_AT_TAG] = now.isoformat()
    request = fleet.build_fleet_request(claim_name, ct, overrides, tags)
    outcome = fleet.parse_fleet_response(deps.compute.create_fleet(request))
    attempt = _attempt(outcome, ct, ctx)
    if attempt.instance is not None:
        attempt.launch_template = lt_of.get(attempt.instance.instance_type)
    return attempt


def _templates(claim: PlannedClaim, ctx: PoolContext, deps: Dependencies, ct: str, type_names: list[str]) -> list[templates.LaunchTemplateSpec]:
    settings = templates.launch_settings(
        ctx.nodeclass, ctx.ami_family, discovery.security_groups(ctx.nodeclass, deps),
        instance_profile=deps.settings.instance_profile or None,
    )
    specs = templates.plan_launch_templates(
        deps.settings.cluster_name, ctx.ami_family, ctx.amis,
        lambda t: bootstrap(claim, ctx, t, ct, deps), settings, type_names,
    )
    for spec in specs:
        deps.compute.ensure_launch_template(templates.create_launch_template_request(spec))
    return specs


def _attempt(outcome: fleet.FleetOutcome, ct: str, ctx: PoolContext) -> LaunchAttempt:
    attempt = LaunchAttempt(capacity_type=ct)
    attempt.capacity_errors = [
        (e.instance_type or "", e.zone or "", ct) for e in outcome.capacity_errors if e.instance_type
    ]
    if outcome.instances:
        inst = outcome.instances[0]
        attempt.instance = inst
        attempt.image_id = ctx.amis[inst.instance_type].id if inst.instance_type in ctx.amis else None
    elif outcome.other_errors:
        attempt.error = "; ".join(f"{e.code}: {e.message}" for e in outcome.other_errors)
    elif not attempt.capacity_errors:
        attempt.error = "CreateFleet returned neither instances nor errors"
    return attempt
