"""Local EC2's spot prices follow the documented model, and CreateFleet launches the cheapest override."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from carpool.adapters.aws.catalog import Ec2Catalog, latest_spot_prices
from carpool.catalog import prices
from carpool.sim.localaws import spot_prices
from carpool.sim.localaws.server import LocalAws

REGION = "us-east-1"
ZONES = ("us-east-1a", "us-east-1b")


def test_spot_is_a_family_discount_of_on_demand_with_bounded_pool_variance():
    od = prices.static_ondemand(REGION)
    for name in ("m5.large", "c6a.2xlarge", "c6g.medium", "r7i.4xlarge", "c1.xlarge"):
        family = name.split(".")[0]
        assert 0.30 <= spot_prices.discount(family) <= 0.45
        for zone in ("us-east-1a", "us-east-1b", "us-east-1c"):
            price = spot_prices.spot_price(REGION, name, zone)
            assert price is not None
            ratio = price / od[name]
            assert 0.30 * 0.85 - 1e-4 <= ratio <= 0.45 * 1.15 + 1e-4, (name, zone, ratio)
            assert abs(price / (od[name] * spot_prices.discount(family)) - 1) <= 0.15 + 1e-3


def test_prices_are_deterministic_and_differ_between_pools():
    a = [spot_prices.spot_price(REGION, "m5.large", z) for z in ("us-east-1a", "us-east-1b", "us-east-1c")]
    assert a == [spot_prices.spot_price(REGION, "m5.large", z) for z in ("us-east-1a", "us-east-1b", "us-east-1c")]
    assert len(set(a)) == 3
    assert spot_prices.discount("m5") != spot_prices.discount("c6a")


def test_types_without_an_on_demand_price_have_no_spot_price():
    assert spot_prices.spot_price(REGION, "zz9.huge", "us-east-1a") is None
    assert spot_prices.hourly_price(REGION, "zz9.huge", "us-east-1a", spot=True) == 0.0


@pytest.fixture(scope="module")
def aws() -> Iterator[LocalAws]:
    with LocalAws(cluster="spot", region=REGION) as local:
        local.seed_network("spot", ["us-east-1a", "us-east-1b"])
        yield local


def test_describe_spot_price_history_answers_the_model(aws):
    catalog = Ec2Catalog(client=aws.client("ec2"), region=REGION)
    history = catalog.spot_price_history(datetime.now(UTC), ["m5.large", "c6a.2xlarge"])
    assert {h["ProductDescription"] for h in history} <= {"Linux/UNIX", "Linux/UNIX (Amazon VPC)"}
    got = latest_spot_prices(history)
    assert got
    for (name, zone), price in got.items():
        assert price == spot_prices.spot_price(REGION, name, zone)


def _fleet(aws: LocalAws, capacity_type: str, types: list[str]) -> tuple[str, str]:
    ec2 = aws.client("ec2")
    subnets = {s["AvailabilityZone"]: s["SubnetId"] for s in ec2.describe_subnets()["Subnets"] if not s.get("DefaultForAz")}
    image = ec2.register_image(Name=f"img-{capacity_type}", Architecture="x86_64", RootDeviceName="/dev/xvda")["ImageId"]
    name = f"carpool-spot-{capacity_type}"
    ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData={"ImageId": image})
    overrides = [{"InstanceType": t, "SubnetId": subnets[z], "AvailabilityZone": z} for t in types for z in ZONES]
    answer = ec2.create_fleet(
        Type="instant",
        TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": capacity_type},
        LaunchTemplateConfigs=[{"LaunchTemplateSpecification": {"LaunchTemplateName": name, "Version": "$Latest"},
                                "Overrides": overrides}],
        **({"SpotOptions": {"AllocationStrategy": "price-capacity-optimized"}} if capacity_type == "spot"
           else {"OnDemandOptions": {"AllocationStrategy": "lowest-price"}}))
    iid = answer["Instances"][0]["InstanceIds"][0]
    inst = ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]
    tags = {t["Key"]: t["Value"] for t in inst.get("Tags") or []}
    assert tags["aws:ec2launchtemplate:id"] and tags["aws:ec2:fleet-id"]
    return inst["InstanceType"], inst["Placement"]["AvailabilityZone"]


def test_spot_fleet_launches_the_cheapest_spot_pool_not_the_first_override(aws):
    types = ["m5.2xlarge", "c5.large", "m5.large"]  # the first override is by far the dearest
    pools = {(t, z): spot_prices.spot_price(REGION, t, z) for t in types for z in ZONES}
    assert _fleet(aws, "spot", types) == min(pools, key=lambda k: pools[k] or 1e9)


def test_on_demand_fleet_launches_the_cheapest_type(aws):
    od = prices.static_ondemand(REGION)
    types = ["m5.2xlarge", "c5.large", "m5.large"]
    launched, _zone = _fleet(aws, "on-demand", types)
    assert launched == min(types, key=od.__getitem__)
