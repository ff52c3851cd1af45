"""CreateFleet requests for NodeClaims, and what the response means.

One claim = one instance: `Type=instant`, total capacity 1 per claim. Claims whose requests are identical
(same capacity type, overrides, launch templates and tags but for the claim's name) are launched by one
request for as many instances, as Karpenter's CreateFleet batcher does; the response's instances are
then handed out one per claim (`distribute`), and a claim left without one fails on its own. EC2 picks among the overrides (instance
type x zone) with the allocation strategy: spot `price-capacity-optimized` (cheap *and* deep pools,
fewer interruptions), on-demand `lowest-price`. The overrides are capped at the 60 cheapest instance
types (Karpenter's limit; larger requests are slow and rejected past the API's override cap), and each
zone gets exactly one subnet (EC2 rejects the same type+zone in two subnets of one request).

Every instance carries its claim from the moment it exists, so a crash or a lost answer never leaves
one that cannot be traced back: a claim alone is named by the request's `karpenter.sh/nodeclaim` tag; the
instances of a batched request (one set of tags for all) carry `FLEET_CLAIMS_TAG`, the claims of the
request, and each instance's claim is the one `distribute` pairs it with, which anyone holding the
instances of the request (the orphan sweep, `claims_of_instances`) computes again the same way. A batch
is at most as many claims as that tag's value can name (`batches`).

Tags: the request tags the fleet, the instance and its volumes (`FLEET_TAGGED_RESOURCES`, what an instant
fleet's own tag specifications accept); the launch template tags the network interface and the spot
request (`carpool.launch.templates.instance_tag_specifications`). Together they put the ownership tags on
every resource the launch creates, which the IAM policy requires one resource at a time.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, NamedTuple

from carpool import labels as wk
from carpool.launch.templates import ownership_tags, tag_list

MAX_INSTANCE_TYPES: Final = 60
SPOT_STRATEGY: Final = "price-capacity-optimized"
ON_DEMAND_STRATEGY: Final = "lowest-price"
#: Resource types the CreateFleet request itself tags (Karpenter's CreateFleet input tags the same three).
FLEET_TAGGED_RESOURCES: Final = ("instance", "volume", "fleet")

#: Tag naming the claims of a batched CreateFleet (their names less the `<nodepool>-` prefix they share),
#: space-separated and sorted: every instance of the request carries it (see the module).
FLEET_CLAIMS_TAG: Final = "carpool.dev/fleet-claims"
#: EC2's longest tag value
MAX_TAG_VALUE: Final = 256

#: Errors that mean "no capacity for this offering right now" (reference.md section 6): the offering is
#: marked unavailable for a few minutes and the claim retried elsewhere, instead of failing the claim.
CAPACITY_ERROR_CODES: Final = frozenset(
    {
        "InsufficientInstanceCapacity",
        "MaxSpotInstanceCountExceeded",
        "VcpuLimitExceeded",
        "UnfulfillableCapacity",
        "Unsupported",
        "InsufficientFreeAddressesInSubnet",
    }
)


class FleetOverride(NamedTuple):
    launch_template_name: str
    instance_type: str
    subnet_id: str
    zone: str
    price: float


class FleetInstance(NamedTuple):
    instance_id: str
    instance_type: str
    zone: str
    capacity_type: str | None


class CapacityError(NamedTuple):
    instance_type: str | None
    zone: str | None
    error_code: str


class FleetError(NamedTuple):
    code: str
    message: str


class FleetOutcome(NamedTuple):
    instances: list[FleetInstance]
    capacity_errors: list[CapacityError]
    other_errors: list[FleetError]


# -- subnets ----------------------------------------------------------------------------------------
def pick_subnets(subnets: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Zone -> the subnet with the most free IPs (DescribeSubnets shape), ties to the lowest id.

    Subnets with no free address (or not `available`) are skipped: launching into them can only fail
    with InsufficientFreeAddressesInSubnet, so a zone with only such subnets is left out.
    """
    best: dict[str, tuple[int, str]] = {}
    for s in subnets:
        free = int(s.get("AvailableIpAddressCount", 0))
        if free <= 0 or s.get("State", "available") != "available":
            continue
        zone, sid = str(s["AvailabilityZone"]), str(s["SubnetId"])
        current = best.get(zone)
        if current is None or (-free, sid) < (-current[0], current[1]):
            best[zone] = (free, sid)
    return {zone: sid for zone, (_, sid) in sorted(best.items())}


# -- request ----------------------------------------------------------------------------------------
def fleet_tags(
    cluster: str, nodepool: str, nodeclaim: str, nodeclass: str, user_tags: Mapping[str, str] | None = None
) -> dict[str, str]:
    """User tags plus ownership tags; ownership wins, so a node class cannot spoof another cluster's."""
    return {
        **(user_tags or {}),
        **ownership_tags(cluster),
        wk.TAG_NODEPOOL: nodepool,
        wk.TAG_NODECLAIM: nodeclaim,
        wk.TAG_NODECLASS: nodeclass,
    }


def cheapest_overrides(overrides: Iterable[FleetOverride], limit: int = MAX_INSTANCE_TYPES) -> list[FleetOverride]:
    """Cheapest first, only the `limit` cheapest instance types (by their cheapest zone), one subnet per
    zone (the subnet of the cheapest override seen for that zone), no duplicate (template, type, zone)."""
    ordered = sorted(overrides, key=lambda o: (o.price, o.instance_type, o.zone, o.launch_template_name))
    kept_types: list[str] = []
    zone_subnet: dict[str, str] = {}
    seen: set[tuple[str, str, str]] = set()
    out = []
    for o in ordered:
        if o.instance_type not in kept_types:
            if len(kept_types) >= limit:
                continue
            kept_types.append(o.instance_type)
        subnet = zone_subnet.setdefault(o.zone, o.subnet_id)
        key = (o.launch_template_name, o.instance_type, o.zone)
        if key in seen:
            continue
        seen.add(key)
        out.append(o._replace(subnet_id=subnet))
    return out


def build_fleet_request(
    claim_name: str, capacity_type: str, overrides: Iterable[FleetOverride], tags: Mapping[str, str],
    capacity: int = 1, context: str | None = None,
) -> dict[str, Any]:
    """boto3 `ec2.create_fleet(**request)` kwargs for `capacity` instances of `capacity_type`
    (`claim_name` names the request: the claim, or the claims of a batch joined). `context` is the
    node class's `spec.context`, passed as CreateFleet's `Context` as Karpenter passes it."""
    if capacity < 1:
        raise ValueError(f"claim {claim_name}: capacity {capacity}, expected at least 1")
    if capacity_type not in (wk.CAPACITY_SPOT, wk.CAPACITY_ON_DEMAND):
        raise ValueError(f"capacity type {capacity_type!r}: expected spot or on-demand")
    chosen = cheapest_overrides(overrides)
    if not chosen:
        raise ValueError(f"claim {claim_name}: no launchable overrides (no instance type, zone and subnet left)")
    request: dict[str, Any] = {
        "Type": "instant",
        "LaunchTemplateConfigs": _launch_template_configs(chosen),
        "TargetCapacitySpecification": {"TotalTargetCapacity": capacity, "DefaultTargetCapacityType": capacity_type},
        "TagSpecifications": [{"ResourceType": rt, "Tags": tag_list(tags)} for rt in FLEET_TAGGED_RESOURCES],
        "ClientToken": client_token(claim_name, capacity_type, chosen),
    }
    if context:
        request["Context"] = context
    if capacity_type == wk.CAPACITY_SPOT:
        request["SpotOptions"] = {"AllocationStrategy": SPOT_STRATEGY}
    else:
        request["OnDemandOptions"] = {"AllocationStrategy": ON_DEMAND_STRATEGY}
    return request


def _launch_template_configs(chosen: list[FleetOverride]) -> list[dict[str, Any]]:
    """One config per template, in order of each template's cheapest override."""
    by_template: dict[str, list[dict[str, str]]] = {}
    for o in chosen:
        by_template.setdefault(o.launch_template_name, []).append(
            {"InstanceType": o.instance_type, "SubnetId": o.subnet_id, "AvailabilityZone": o.zone}
        )
    return [
        {"LaunchTemplateSpecification": {"LaunchTemplateName": name, "Version": "$Latest"}, "Overrides": items}
        for name, items in by_template.items()
    ]


def client_token(claim_name: str, capacity_type: str, chosen: list[FleetOverride]) -> str:
    """Idempotency token: a retried invocation with the same request launches nothing new, while a retry
    with different overrides (after capacity errors) gets a new token. 64 characters max."""
    doc = json.dumps([claim_name, capacity_type, [list(o) for o in chosen]], sort_keys=True)
    return hashlib.sha256(doc.encode()).hexdigest()[:64]


# -- response ---------------------------------------------------------------------------------------
def parse_fleet_response(resp: Mapping[str, Any]) -> FleetOutcome:
    """Split a CreateFleet response into launched instances, capacity errors (mark offerings
    unavailable) and other errors (configuration problems worth surfacing)."""
    instances = [
        FleetInstance(iid, str(item.get("InstanceType", "")), _zone(item), item.get("Lifecycle"))
        for item in resp.get("Instances", [])
        for iid in item.get("InstanceIds", [])
    ]
    capacity, other = [], []
    for err in resp.get("Errors", []):
        code = str(err.get("ErrorCode", ""))
        if code in CAPACITY_ERROR_CODES:
            ov = _overrides(err)
            capacity.append(CapacityError(ov.get("InstanceType"), ov.get("AvailabilityZone"), code))
        else:
            other.append(FleetError(code, str(err.get("ErrorMessage", ""))))
    return FleetOutcome(instances, capacity, other)


def distribute(outcome: FleetOutcome, claims: Sequence[str]) -> tuple[dict[str, FleetInstance], list[FleetInstance]]:
    """Hand the instances of one batched CreateFleet out, one per claim: both in sorted order (instance
    id, claim name), so whoever pairs them again (a crash repair) pairs them the same way. Returns the
    pairs and the instances beyond one per claim (EC2 never launches more than asked; if it did, those
    belong to no claim)."""
    ordered = sorted(outcome.instances, key=lambda i: i.instance_id)
    names = sorted(claims)
    return dict(zip(names, ordered, strict=False)), ordered[len(names):]


def fleet_claims_value(nodepool: str, claims: Sequence[str]) -> str:
    """`FLEET_CLAIMS_TAG`'s value for a request launching `claims` of `nodepool`."""
    prefix = f"{nodepool}-"
    return " ".join(c.removeprefix(prefix) for c in sorted(claims))


def fleet_claims(nodepool: str, value: str) -> list[str]:
    """The claims a `FLEET_CLAIMS_TAG` value names, sorted (`fleet_claims_value` undone)."""
    prefix = f"{nodepool}-"
    return sorted(f"{prefix}{part}" for part in value.split())


def batches(nodepool: str, claims: Sequence[str]) -> list[list[str]]:
    """`claims` (in their order) cut into runs whose `FLEET_CLAIMS_TAG` value fits in one tag."""
    out: list[list[str]] = []
    for claim in claims:
        if out and len(fleet_claims_value(nodepool, [*out[-1], claim])) <= MAX_TAG_VALUE:
            out[-1].append(claim)
        else:
            out.append([claim])
    return out


def claims_of_instances(instances: Iterable[tuple[str, Mapping[str, str]]]) -> dict[str, str]:
    """Instance id -> the claim it was launched for, from the tags alone: its `karpenter.sh/nodeclaim`
    tag, else its batched request's `FLEET_CLAIMS_TAG` paired as `distribute` paired it (the instances of
    one request sorted by id against its claims sorted by name, less those a claim tag already pairs)."""
    out: dict[str, str] = {}
    requests: dict[tuple[str, str], list[str]] = {}
    for instance_id, tags in instances:
        if tags.get(wk.TAG_NODECLAIM):
            out[instance_id] = tags[wk.TAG_NODECLAIM]
        elif tags.get(FLEET_CLAIMS_TAG):
            requests.setdefault((tags.get(wk.TAG_NODEPOOL, ""), tags[FLEET_CLAIMS_TAG]), []).append(instance_id)
    taken = set(out.values())
    for (nodepool, value), ids in requests.items():
        names = [c for c in fleet_claims(nodepool, value) if c not in taken]
        out.update(zip(sorted(ids), names, strict=False))
    return out


def _overrides(item: Mapping[str, Any]) -> Mapping[str, Any]:
    return item.get("LaunchTemplateAndOverrides", {}).get("Overrides", {}) or {}


def _zone(item: Mapping[str, Any]) -> str:
    return str(_overrides(item).get("AvailabilityZone", ""))
