from __future__ import annotations

import pytest

from carpool import labels
from carpool.launch import templates
from carpool.launch.fleet import (
    CAPACITY_ERROR_CODES,
    MAX_INSTANCE_TYPES,
    CapacityError,
    FleetError,
    FleetInstance,
    FleetOverride,
    build_fleet_request,
    fleet_tags,
    parse_fleet_response,
    pick_subnets,
)

ZONES = {"us-east-1a": "subnet-a", "us-east-1b": "subnet-b"}
TAGS = fleet_tags("demo", "default", "default-x7k2p", "default", {"team": "a"})


def overrides(n_types: int, lt: str = "carpool/demo/aaaa") -> list[FleetOverride]:
    """n instance types priced so that type i costs 1 + i/100, listed most expensive first."""
    out = []
    for i in reversed(range(n_types)):
        for zone, subnet in ZONES.items():
            out.append(FleetOverride(lt, f"t{i:03d}.large", subnet, zone, 1 + i / 100 + (0.001 if zone.endswith("b") else 0)))
    return out


def all_overrides(req: dict) -> list[dict]:  # type: ignore[type-arg]
    return [o for c in req["LaunchTemplateConfigs"] for o in c["Overrides"]]


def test_caps_at_the_60_cheapest_types_cheapest_first() -> None:
    req = build_fleet_request("default-x7k2p", "spot", overrides(80), TAGS)
    ovs = all_overrides(req)
    types = list(dict.fromkeys(o["InstanceType"] for o in ovs))
    assert len(types) == MAX_INSTANCE_TYPES == 60
    assert types == [f"t{i:03d}.large" for i in range(60)]  # the cheapest 60, in price order
    assert ovs[0] == {"InstanceType": "t000.large", "SubnetId": "subnet-a", "AvailabilityZone": "us-east-1a"}
    assert len(ovs) == 120  # each kept type in both zones


def test_spot_and_on_demand_shapes() -> None:
    spot = build_fleet_request("c1", "spot", overrides(2), TAGS)
    assert spot["Type"] == "instant"
    assert spot["TargetCapacitySpecification"] == {"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "spot"}
    assert spot["SpotOptions"] == {"AllocationStrategy": "price-capacity-optimized"}
    assert "OnDemandOptions" not in spot
    od = build_fleet_request("c1", "on-demand", overrides(2), TAGS)
    assert od["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"
    assert od["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    assert "SpotOptions" not in od
    with pytest.raises(ValueError, match="capacity type"):
        build_fleet_request("c1", "reserved", overrides(2), TAGS)
    with pytest.raises(ValueError, match="no launchable overrides"):
        build_fleet_request("c1", "spot", [], TAGS)


def test_one_launch_template_config_per_template() -> None:
    ovs = overrides(2, "carpool/demo/std") + [FleetOverride("carpool/demo/nv", "g5.xlarge", "subnet-a", "us-east-1a", 5.0)]
    req = build_fleet_request("c1", "on-demand", ovs, TAGS)
    configs = req["LaunchTemplateConfigs"]
    assert [c["LaunchTemplateSpecification"] for c in configs] == [
        {"LaunchTemplateName": "carpool/demo/std", "Version": "$Latest"},
        {"LaunchTemplateName": "carpool/demo/nv", "Version": "$Latest"},
    ]
    assert [o["InstanceType"] for o in configs[1]["Overrides"]] == ["g5.xlarge"]


def test_one_subnet_per_zone() -> None:
    ovs = [
        FleetOverride("lt", "m5.large", "subnet-a1", "us-east-1a", 0.09),
        FleetOverride("lt", "c5.large", "subnet-a2", "us-east-1a", 0.08),  # cheaper: its subnet wins the zone
        FleetOverride("lt", "c5.large", "subnet-a2", "us-east-1a", 0.08),  # duplicate dropped
        FleetOverride("lt", "m5.large", "subnet-b1", "us-east-1b", 0.09),
    ]
    got = all_overrides(build_fleet_request("c1", "spot", ovs, TAGS))
    assert {(o["AvailabilityZone"], o["SubnetId"]) for o in got} == {("us-east-1a", "subnet-a2"), ("us-east-1b", "subnet-b1")}
    assert len(got) == 3


def test_tags_on_instance_volume_and_fleet_with_ownership() -> None:
    spoof = fleet_tags("demo", "default", "c1", "nc", {"kubernetes.io/cluster/demo": "shared", labels.TAG_NODEPOOL: "x"})
    assert spoof["kubernetes.io/cluster/demo"] == "owned" and spoof[labels.TAG_NODEPOOL] == "default"
    req = build_fleet_request("c1", "spot", overrides(1), TAGS)
    assert [t["ResourceType"] for t in req["TagSpecifications"]] == ["instance", "volume", "fleet"]
    tags = {t["Key"]: t["Value"] for t in req["TagSpecifications"][0]["Tags"]}
    assert tags == {
        "team": "a",
        "kubernetes.io/cluster/demo": "owned",
        labels.TAG_MANAGED_BY: "demo",
        labels.TAG_NODEPOOL: "default",
        labels.TAG_NODECLAIM: "default-x7k2p",
        labels.TAG_NODECLASS: "default",
    }


def test_client_token_is_deterministic_and_request_sensitive() -> None:
    a = build_fleet_request("c1", "spot", overrides(3), TAGS)["ClientToken"]
    assert a == build_fleet_request("c1", "spot", list(reversed(overrides(3))), TAGS)["ClientToken"]
    assert a != build_fleet_request("c1", "spot", overrides(2), TAGS)["ClientToken"]
    assert a != build_fleet_request("c2", "spot", overrides(3), TAGS)["ClientToken"]
    assert len(a) <= 64


def test_pick_subnets_most_free_ips_per_zone() -> None:
    subnets = [
        {"SubnetId": "subnet-1", "AvailabilityZone": "us-east-1a", "AvailableIpAddressCount": 10},
        {"SubnetId": "subnet-2", "AvailabilityZone": "us-east-1a", "AvailableIpAddressCount": 200},
        {"SubnetId": "subnet-4", "AvailabilityZone": "us-east-1b", "AvailableIpAddressCount": 50},
        {"SubnetId": "subnet-3", "AvailabilityZone": "us-east-1b", "AvailableIpAddressCount": 50},  # tie: lower id
        {"SubnetId": "subnet-5", "AvailabilityZone": "us-east-1c", "AvailableIpAddressCount": 0},  # full
        {"SubnetId": "subnet-6", "AvailabilityZone": "us-east-1d", "AvailableIpAddressCount": 99, "State": "pending"},
    ]
    assert pick_subnets(subnets) == {"us-east-1a": "subnet-2", "us-east-1b": "subnet-3"}


def test_parse_fleet_response_classifies_errors() -> None:
    def err(code: str, it: str = "m5.large", zone: str = "us-east-1a") -> dict:  # type: ignore[type-arg]
        return {
            "ErrorCode": code,
            "ErrorMessage": f"{code} message",
            "Lifecycle": "spot",
            "LaunchTemplateAndOverrides": {"Overrides": {"InstanceType": it, "AvailabilityZone": zone}},
        }

    resp = {
        "FleetId": "fleet-1",
        "Instances": [
            {
                "InstanceIds": ["i-0abc"],
                "InstanceType": "c5.large",
                "Lifecycle": "spot",
                "LaunchTemplateAndOverrides": {"Overrides": {"InstanceType": "c5.large", "AvailabilityZone": "us-east-1b"}},
            }
        ],
        "Errors": [err(code) for code in sorted(CAPACITY_ERROR_CODES)]
        + [err("InvalidParameterValue"), err("UnauthorizedOperation")],
    }
    outcome = parse_fleet_response(resp)
    assert outcome.instances == [FleetInstance("i-0abc", "c5.large", "us-east-1b", "spot")]
    assert outcome.capacity_errors == [CapacityError("m5.large", "us-east-1a", c) for c in sorted(CAPACITY_ERROR_CODES)]
    assert outcome.other_errors == [
        FleetError("InvalidParameterValue", "InvalidParameterValue message"),
        FleetError("UnauthorizedOperation", "UnauthorizedOperation message"),
    ]
    assert {
        "InsufficientInstanceCapacity", "MaxSpotInstanceCountExceeded", "VcpuLimitExceeded",
        "UnfulfillableCapacity", "Unsupported", "InsufficientFreeAddressesInSubnet",
    } == CAPACITY_ERROR_CODES


def test_empty_response() -> None:
    assert parse_fleet_response({}) == ([], [], [])


#: What an instant fleet creates; a spot request only for spot capacity (EC2 authorizes each one).
CREATED = {"spot": {"fleet", "instance", "volume", "network-interface", "spot-instances-request"},
           "on-demand": {"fleet", "instance", "volume", "network-interface"}}


@pytest.mark.parametrize("capacity_type", ["spot", "on-demand"])
def test_every_created_resource_is_tagged_by_the_request_or_its_template(capacity_type: str) -> None:
    settings = templates.LaunchSettings(security_group_ids=("sg-1",), instance_profile="demo-node", tags={"team": "a"})
    spec = templates.LaunchTemplateSpec("carpool/demo/aaaa", "ami-1", "", 29, ("t000.large",), (), {}, ("sg-1",),
                                        "demo-node", {**settings.tags, **templates.ownership_tags("demo")},
                                        capacity_type)
    req = build_fleet_request("c1", capacity_type, overrides(1), TAGS)
    template = templates.create_launch_template_request(spec)["LaunchTemplateData"]
    tagged: dict[str, dict[str, str]] = {}
    for ts in [*req["TagSpecifications"], *template["TagSpecifications"]]:
        assert ts["ResourceType"] not in tagged, f"{ts['ResourceType']} tagged twice"
        tagged[ts["ResourceType"]] = {t["Key"]: t["Value"] for t in ts["Tags"]}
    assert set(tagged) == CREATED[capacity_type]
    for rtype, tags in tagged.items():
        assert tags["kubernetes.io/cluster/demo"] == "owned" and tags[labels.TAG_MANAGED_BY] == "demo", rtype
