"""From planned claims to running instances: pick the capacity type, build the launch templates
(grouped by AMI, max pods and user data), send one CreateFleet per group of claims with identical
requests, and classify what came back for each claim.

Everything that decides is in `carpool.launch` (pure); this module only gathers its inputs (subnets,
security groups, the AMI and size of each instance type) and calls EC2 through the `Compute` port.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from carpool import labels, together
from carpool.amis import ResolvedAmi
from carpool.api.nodeclass import EC2NodeClass
from carpool.api.nodepool import NodePool
from carpool.app import discovery, profiles
from carpool.app.wiring import Dependencies
from carpool.catalog import InstanceType
from carpool.launch import failures, fleet, templates
from carpool.launch.failures import Cause
from carpool.launch.templates import LaunchTemplateError, LaunchTemplateSpec
from carpool.launch.userdata.bootstrap import NodeBootstrap
from carpool.ports import LAUNCH_TEMPLATE_MISSING_CODES, LaunchTemplateMissing
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
    #: the launch templates and overrides of each distinct request this pool made (`plan_fleet`): a batch
    #: of claims asks for the same few, and building them is most of planning a claim's launch
    requests: dict[tuple[Any, ...], tuple[dict[str, str], tuple[fleet.FleetOverride, ...], tuple[LaunchTemplateSpec, ...]]] = (
        field(default_factory=dict, repr=False, compare=False))


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
    #: the node class's part EC2 refused (`error` says how), None for any other error
    cause: Cause | None = None


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
    serves every type with the same AMI and max pods. `--node-labels` carries only the labels a kubelet
    may set on its own Node (`labels.kubelet_may_set`): one other `kubernetes.io`/`k8s.io` label and the
    kubelet refuses to start. The registrar sets the others through the API server, in the write that
    lifts `karpenter.sh/unregistered` (`carpool.lifecycle.registration_patch`), as Karpenter does."""
    s = deps.settings
    facts = s.cluster_facts()  # ClusterFactsUnresolved: no node boots with a guessed version, CIDR or CA
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
    dns = list(kubelet.cluster_dns) if kubelet and kubelet.cluster_dns else [facts.dns]
    return NodeBootstrap(
        cluster_name=s.cluster_name,
        endpoint=facts.endpoint,
        ca_bundle=facts.ca,
        cluster_cidr=facts.service_cidr,
        cluster_dns=dns[0] if dns else None,
        more_cluster_dns=tuple(dns[1:]),
        max_pods=size.max_pods,
        kube_reserved=size.kube_reserved,
        system_reserved=size.system_reserved,
        eviction_hard=dict(kubelet.eviction_hard) if kubelet and kubelet.eviction_hard else {},
        labels={k: v for k, v in node_labels.items() if labels.kubelet_may_set(k)},
        taints=tuple(claim.taints),
        startup_taints=tuple(claim.startup_taints),
        user_data=ctx.nodeclass.spec.user_data,
        **_kubelet_fields(kubelet),
        raid0=ctx.nodeclass.spec.instance_store_policy == "RAID0",
    )


def _kubelet_fields(kubelet: Any) -> dict[str, Any]:
    """The `spec.kubelet` fields sizing does not decide, as the user data takes them."""
    if kubelet is None:
        return {}
    return {
        "pods_per_core": kubelet.pods_per_core,
        "eviction_soft": dict(kubelet.eviction_soft or {}),
        "eviction_soft_grace_period": dict(kubelet.eviction_soft_grace_period or {}),
        "eviction_max_pod_grace_period": kubelet.eviction_max_pod_grace_period,
        "image_gc_high_threshold_percent": kubelet.image_gc_high_threshold_percent,
        "image_gc_low_threshold_percent": kubelet.image_gc_low_threshold_percent,
        "cpu_cfs_quota": kubelet.cpu_cfs_quota,
    }


@dataclass(frozen=True)
class FleetPlan:
    """What one claim asks of CreateFleet, its own name aside: claims whose plans share a `key` are
    launched by one request (`launch_group`)."""

    capacity_type: str
    overrides: tuple[fleet.FleetOverride, ...]
    #: instance type -> the launch template it launches from
    templates: Mapping[str, str]
    tags: Mapping[str, str]
    key: str
    #: the launch templates the request names, created (or found to exist) by `ensure_templates`
    specs: tuple[LaunchTemplateSpec, ...] = ()
    #: the node class's `spec.context` (CreateFleet `Context`)
    context: str | None = None


def plan_fleet(
    claim: PlannedClaim, ctx: PoolContext, deps: Dependencies, unavailable: set[tuple[str, str, str]], now: datetime,
) -> FleetPlan | LaunchAttempt:
    """The claim's CreateFleet request (its launch templates still to be ensured: `ensure_templates`), or
    the attempt that needs no call: every offering of the claim went unavailable after it was planned
    (`stale`)."""
    subnet_by_zone = fleet.pick_subnets(discovery.subnets(ctx.nodeclass, deps))
    ct = choose_capacity_type(claim, ctx, unavailable, set(subnet_by_zone))
    if ct is None:
        return LaunchAttempt(error="no available offering in a zone with a subnet for any instance type of the claim",
                             stale=True)
    offers = list(_offerings(claim, ctx, ct, unavailable, set(subnet_by_zone)))
    lt_of, overrides, specs = _request(claim, ctx, deps, ct, offers, subnet_by_zone)
    tags = fleet.fleet_tags(deps.settings.cluster_name, ctx.nodepool.name, "", ctx.nodeclass.name,
                            ctx.nodeclass.spec.tags)
    tags.pop(labels.TAG_NODECLAIM)
    tags[CREATED_AT_TAG] = now.isoformat()
    context = ctx.nodeclass.spec.context
    doc = json.dumps([ct, [list(o) for o in overrides], sorted(tags.items()), context], sort_keys=True)
    return FleetPlan(ct, overrides, lt_of, tags, hashlib.sha256(doc.encode()).hexdigest(), specs, context)


_Request = tuple[dict[str, str], tuple[fleet.FleetOverride, ...], tuple[LaunchTemplateSpec, ...]]


def _request(claim: PlannedClaim, ctx: PoolContext, deps: Dependencies, ct: str, offers: list[tuple[str, str, float]],
             subnet_by_zone: Mapping[str, str]) -> _Request:
    """The launch template of each instance type, the overrides and the templates of a claim's request.
    They follow from its offerings, its node labels and taints, and the capacity type alone, so claims
    that share those share one computation (`PoolContext.requests`)."""
    key = (ct, tuple(offers), tuple(sorted(claim.labels.items())), claim.taints, claim.startup_taints,
           tuple(sorted(subnet_by_zone.items())))
    found = ctx.requests.get(key)
    if found is not None:
        return found
    type_names = list(dict.fromkeys(o[0] for o in sorted(offers, key=lambda o: o[2])))[: deps.settings.max_fleet_types]
    specs = _templates(claim, ctx, deps, ct, type_names)
    lt_of = {t: spec.name for spec in specs for t in spec.instance_types}
    overrides = tuple(fleet.cheapest_overrides(
        fleet.FleetOverride(lt_of[t], t, subnet_by_zone[z], z, price) for t, z, price in offers if t in lt_of
    ))
    ctx.requests[key] = (lt_of, overrides, tuple(specs))
    return ctx.requests[key]


def launch_group(names: Sequence[str], plan: FleetPlan, ctx: PoolContext, deps: Dependencies) -> dict[str, LaunchAttempt]:
    """One CreateFleet for every claim of `names` (their plans are identical), one instance each.

    A claim alone is tagged with its name by the request itself. A batch's instances carry the claims of
    the request (`fleet.FLEET_CLAIMS_TAG`, one set of tags for all), and each claim records its instance
    from the sorted pairing (`fleet.distribute`), which the orphan sweep computes again from the tags
    when the answer never arrived or was never written (`fleet.claims_of_instances`); each instance gets
    its claim's own name once its node registers (`carpool.app.register`, as Karpenter's tagging
    controller does). The claims EC2 had no instance for get the response's errors: capacity errors fail
    them over like a single launch's, alone."""
    names = sorted(names)
    tags = dict(plan.tags)
    if len(names) == 1:
        tags[labels.TAG_NODECLAIM] = names[0]
    else:
        tags[fleet.FLEET_CLAIMS_TAG] = fleet.fleet_claims_value(ctx.nodepool.name, names)
    request = fleet.build_fleet_request("|".join(names), plan.capacity_type, plan.overrides, tags, len(names),
                                        plan.context)
    outcome = fleet.parse_fleet_response(_create_fleet(request, plan, deps))
    given, extra = fleet.distribute(outcome, names)
    if extra:
        log.error("CreateFleet launched %d instances more than the %d asked for; terminating them", len(extra),
                  len(names))
        deps.compute.terminate_instances([i.instance_id for i in extra])
    out = {}
    for name in names:
        inst = given.get(name)
        shares = fleet.FleetOutcome([inst] if inst else [], outcome.capacity_errors, outcome.other_errors)
        attempt = _attempt(shares, plan.capacity_type, ctx)
        if inst is not None:
            attempt.launch_template = plan.templates.get(inst.instance_type)
        elif not attempt.capacity_errors and not outcome.other_errors:
            attempt.error = f"CreateFleet launched {len(given)} of the {len(names)} instances asked for, without errors"
        out[name] = attempt
    return out


def _create_fleet(request: Mapping[str, Any], plan: FleetPlan, deps: Dependencies) -> dict[str, Any]:
    """CreateFleet; a launch template missing since it was ensured (deleted by garbage collection while
    this process still had it cached) is created again and the request sent once more."""
    try:
        response = deps.compute.create_fleet(request)
    except LaunchTemplateMissing:
        response = {"Errors": [{"ErrorCode": next(iter(LAUNCH_TEMPLATE_MISSING_CODES))}]}
    if not any(e.get("ErrorCode") in LAUNCH_TEMPLATE_MISSING_CODES for e in response.get("Errors") or []):
        return response
    log.warning("a launch template of the request is gone; creating it again")
    _ensure_again(deps, set(plan.templates.values()))
    return dict(deps.compute.create_fleet(request))


#: how long this process trusts that a launch template it created or found still exists (garbage
#: collection deletes only templates no live claim uses, after a grace period; a miss is repaired);
#: counted on the dependencies' clock
TEMPLATE_TTL_SECONDS = 300.0
_TEMPLATES_KEY = "launch-templates"


def _templates(claim: PlannedClaim, ctx: PoolContext, deps: Dependencies, ct: str, type_names: list[str]) -> list[templates.LaunchTemplateSpec]:
    """The claim's launch templates (grouped by AMI, max pods and user data), with the node class's own
    instance profile (`carpool.app.profiles`)."""
    groups = discovery.security_groups(ctx.nodeclass, deps)
    if not groups:  # EC2 would put the node in the VPC's default group: Karpenter's SecurityGroupsReady=False
        raise LaunchTemplateError("spec.securityGroupSelectorTerms: no security group matches", Cause.SECURITY_GROUP)
    settings = templates.launch_settings(
        ctx.nodeclass, ctx.ami_family, groups, instance_profile=profiles.instance_profile(ctx.nodeclass, deps),
    )
    return templates.plan_launch_templates(
        deps.settings.cluster_name, ctx.ami_family, ctx.amis,
        lambda t: bootstrap(claim, ctx, t, ct, deps), settings, type_names,
    )


#: CreateLaunchTemplate requests in flight at once (below botocore's default pool of 10 connections)
TEMPLATE_WORKERS = 8


def ensure_templates(plans: Iterable[FleetPlan], deps: Dependencies) -> dict[str, Exception]:
    """Create (or find to exist) every launch template the plans name, each once per process and
    `TEMPLATE_TTL_SECONDS`, as Karpenter caches them: a batch of claims shares a few templates. Those not
    known yet are created at once, up to `TEMPLATE_WORKERS` together (each in a copy of this context),
    as Karpenter's concurrent launches create theirs. Returns the templates that could not be created,
    by name, with why: only the claims that launch from them fail."""
    ensured: dict[str, tuple[datetime, templates.LaunchTemplateSpec]] = deps.cache.setdefault(_TEMPLATES_KEY, {})
    now = deps.clock()
    todo = {spec.name: spec for plan in plans for spec in plan.specs
            if spec.name not in ensured or not _still_trusted(ensured[spec.name][0], now)}
    if not todo:
        return {}

    def ensure(spec: templates.LaunchTemplateSpec) -> Exception | None:
        try:
            deps.compute.ensure_launch_template(templates.create_launch_template_request(spec))
        except Exception as exc:
            return exc
        return None

    specs = list(todo.values())
    # each in a copy of this context and under this invocation's X-Ray subsegment (`carpool.together`)
    answers = together.run([partial(ensure, spec) for spec in specs], TEMPLATE_WORKERS)
    failed: dict[str, Exception] = {}
    for spec, error in zip(specs, answers, strict=True):
        if error is None:
            ensured[spec.name] = (now, spec)
        else:
            failed[spec.name] = error
    return failed


def _still_trusted(ensured_at: datetime, now: datetime) -> bool:
    """Whether a template ensured at `ensured_at` is still taken to exist at `now`: for
    `TEMPLATE_TTL_SECONDS`, and never when it was stamped after `now` (on another clock: the simulation
    swaps it)."""
    return 0 <= (now - ensured_at).total_seconds() < TEMPLATE_TTL_SECONDS


def _ensure_again(deps: Dependencies, names: set[str]) -> None:
    ensured: dict[str, tuple[datetime, templates.LaunchTemplateSpec]] = deps.cache.get(_TEMPLATES_KEY, {})
    for name in sorted(names & set(ensured)):
        spec = ensured[name][1]
        deps.compute.ensure_launch_template(templates.create_launch_template_request(spec))
        ensured[name] = (deps.clock(), spec)


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
        attempt.cause = next((c for e in outcome.other_errors if (c := failures.of_ec2_error(e.code, e.message))), None)
    elif not attempt.capacity_errors:
        attempt.error = "CreateFleet returned neither instances nor errors"
    return attempt
