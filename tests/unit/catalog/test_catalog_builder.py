"""`builder.from_ec2` on hand-written DescribeInstanceTypes / DescribeInstanceTypeOfferings shapes."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from carpool import labels as L
from carpool.catalog import Catalog, Offering, UnknownInstanceType, builder, from_ec2, prices


def info(name: str = "m5.large", **overrides: Any) -> dict[str, Any]:
    """A DescribeInstanceTypes item trimmed to what matters (as boto3 returns it)."""
    base: dict[str, Any] = {
        "InstanceType": name,
        "BareMetal": False,
        "Hypervisor": "nitro",
        "VCpuInfo": {"DefaultVCpus": 2},
        "MemoryInfo": {"SizeInMiB": 8192},
        "ProcessorInfo": {"SupportedArchitectures": ["x86_64"], "Manufacturer": "Intel"},
        "SupportedUsageClasses": ["on-demand", "spot"],
        "SupportedVirtualizationTypes": ["hvm"],
        "NetworkInfo": {
            "DefaultNetworkCardIndex": 0,
            "Ipv4AddressesPerInterface": 10,
            "MaximumNetworkInterfaces": 3,
            "NetworkCards": [{"NetworkCardIndex": 0, "MaximumNetworkInterfaces": 3, "BaselineBandwidthInGbps": 0.75}],
        },
    }
    base.update(overrides)
    return base


def offering(name: str, zone: str, location_type: str = "availability-zone") -> dict[str, str]:
    return {"InstanceType": name, "Location": zone, "LocationType": location_type}


OFFERINGS = [
    offering("m5.large", "us-east-1a"),
    offering("m5.large", "us-east-1b"),
    offering("m5.large", "us-east-1", "region"),
    offering("m5.large", "use1-az1", "availability-zone-id"),
]


def test_offerings_per_zone_and_capacity_type_with_prices() -> None:
    catalog = from_ec2([info()], OFFERINGS, {("m5.large", "us-east-1a"): 0.031}, {"m5.large": 0.096}, "us-east-1")
    it = catalog["m5.large"]
    assert it.zones() == ["us-east-1a", "us-east-1b"]
    assert it.offering("us-east-1a", "on-demand") == Offering("us-east-1a", "on-demand", 0.096)
    assert it.offering("us-east-1a", "spot") == Offering("us-east-1a", "spot", 0.031)
    assert it.offering("us-east-1b", "spot") == Offering("us-east-1b", "spot", prices.estimate_spot(0.096))
    assert it.offering("us-east-1c", "spot") is None


def test_spot_estimate_is_documented_fraction_of_on_demand() -> None:
    assert prices.estimate_spot(0.096) == pytest.approx(0.096 * prices.SPOT_ESTIMATE_FACTOR)
    assert 0 < prices.SPOT_ESTIMATE_FACTOR < 1


def test_unknown_on_demand_price_makes_offerings_unavailable() -> None:
    catalog = from_ec2([info()], OFFERINGS, {("m5.large", "us-east-1a"): 0.031}, {}, "us-east-1")
    it = catalog["m5.large"]
    assert not it.offering("us-east-1a", "on-demand").available
    assert not it.offering("us-east-1b", "spot").available  # neither zonal spot nor on-demand to estimate from
    assert it.offering("us-east-1a", "spot").available
    assert it.requirements[L.ZONE].order == ("us-east-1a",)
    assert it.requirements[L.CAPACITY_TYPE].order == ("spot",)


def test_usage_classes_limit_capacity_types() -> None:
    on_demand_only = info(SupportedUsageClasses=["on-demand", "capacity-block"])
    it = from_ec2([on_demand_only], OFFERINGS, {}, {"m5.large": 0.096}, "us-east-1")["m5.large"]
    assert it.capacity_types() == ["on-demand"]


@pytest.mark.parametrize(
    "unusable",
    [
        info("mac1.metal", ProcessorInfo={"SupportedArchitectures": ["x86_64_mac"], "Manufacturer": "Intel"}),
        info("i3.fake", ProcessorInfo={"SupportedArchitectures": ["i386"], "Manufacturer": "Intel"}),
        info("t1.micro", SupportedVirtualizationTypes=["paravirtual"]),
    ],
)
def test_types_eks_linux_cannot_use_are_skipped(unusable: dict[str, Any]) -> None:
    assert len(from_ec2([unusable], [], {}, {}, "us-east-1")) == 0


def test_i386_and_x86_64_type_is_amd64() -> None:
    both = info("t2.micro", ProcessorInfo={"SupportedArchitectures": ["i386", "x86_64"], "Manufacturer": "Intel"})
    assert from_ec2([both], [], {}, {}, "us-east-1")["t2.micro"].arch == "amd64"


def test_type_without_zones_is_kept_with_no_offering() -> None:
    it = from_ec2([info()], [], {}, {"m5.large": 0.096}, "us-east-1")["m5.large"]
    assert it.offerings == []
    assert it.requirements[L.ZONE].is_empty()


def test_default_card_enis_ignore_other_cards() -> None:
    multi = info("p5.48xlarge")
    multi["NetworkInfo"] = {
        "DefaultNetworkCardIndex": 0,
        "Ipv4AddressesPerInterface": 50,
        "MaximumNetworkInterfaces": 64,
        "NetworkCards": [{"NetworkCardIndex": i, "MaximumNetworkInterfaces": 2, "BaselineBandwidthInGbps": 100.0} for i in range(32)],
    }
    it = from_ec2([multi], [], {}, {}, "us-east-1")["p5.48xlarge"]
    assert it.max_enis == 2
    assert it.labels[L.INSTANCE_NETWORK_BANDWIDTH] == "3200000"


def test_default_card_enis_without_card_list_uses_instance_total() -> None:
    legacy = info()
    legacy["NetworkInfo"] = {"Ipv4AddressesPerInterface": 10, "MaximumNetworkInterfaces": 3}
    assert builder.default_card_enis(legacy) == 3


def test_gpu_count_sums_all_gpus_but_labels_need_a_single_kind() -> None:
    mixed = info("x.mixed", GpuInfo={"Gpus": [
        {"Count": 2, "Name": "A10G", "Manufacturer": "NVIDIA", "MemoryInfo": {"SizeInMiB": 24576}},
        {"Count": 1, "Name": "T4", "Manufacturer": "NVIDIA", "MemoryInfo": {"SizeInMiB": 16384}},
    ]})
    it = from_ec2([mixed], [], {}, {}, "us-east-1")["x.mixed"]
    assert it.gpu_count == 3
    assert L.INSTANCE_GPU_COUNT not in it.labels


def test_with_offerings_recomputes_requirements() -> None:
    it = from_ec2([info()], OFFERINGS, {}, {"m5.large": 0.096}, "us-east-1")["m5.large"]
    marked = [Offering(o.zone, o.capacity_type, o.price, o.zone != "us-east-1a") for o in it.offerings]
    updated = it.with_offerings(marked)
    assert updated.requirements[L.ZONE].order == ("us-east-1b",)
    assert it.requirements[L.ZONE].order == ("us-east-1a", "us-east-1b")  # original untouched


def test_input_dicts_are_not_mutated() -> None:
    item = info()
    before = copy.deepcopy(item)
    from_ec2([item], OFFERINGS, {}, {"m5.large": 0.096}, "us-east-1")
    assert item == before


def test_unknown_type_error_suggests_close_names() -> None:
    catalog = Catalog.snapshot()
    with pytest.raises(UnknownInstanceType) as err:
        catalog.require("m5.lage")
    assert "m5.lage" in str(err.value)
    assert "m5.large" in err.value.suggestions
