"""The EC2 reads behind the live instance catalog, returned as boto3 shapes for
`carpool.catalog.builder.from_ec2` (which stays pure and testable without AWS).

Every call is paginated: DescribeInstanceTypes alone is ~900 types in 9+ pages in us-east-1, and the
spot price history thousands of items, so a live build takes seconds: only the scheduled refresh
(`carpool.app.sources.StoredCatalogSource.refresh`) makes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from carpool.adapters.aws import session
from carpool.adapters.aws.pricing import OnDemandPrices
from carpool.catalog import Catalog, builder

#: Spot prices of Linux instances in a VPC (the only kind carpool launches).
LINUX_SPOT = ["Linux/UNIX", "Linux/UNIX (Amazon VPC)"]


class Ec2Catalog:
    """DescribeInstanceTypes / DescribeInstanceTypeOfferings / DescribeSpotPriceHistory."""

    def __init__(self, client: Any | None = None, region: str | None = None) -> None:
        self.region = region or session.region_name()
        self.client = client if client is not None else session.client("ec2", region=self.region)

    def instance_types(
        self, filters: Sequence[Mapping[str, Any]] = (), names: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """Every `InstanceTypes` item, or only those `names` / matching `filters` (e.g. by
        `processor-info.supported-architecture`)."""
        kwargs: dict[str, Any] = {"Filters": list(filters)} if filters else {}
        if names:
            kwargs["InstanceTypes"] = list(names)
        pages = self.client.get_paginator("describe_instance_types").paginate(**kwargs)
        return [t for page in pages for t in page.get("InstanceTypes", [])]

    def type_offerings(self) -> list[dict[str, Any]]:
        """Which types exist in which availability zone (`LocationType=availability-zone`)."""
        pages = self.client.get_paginator("describe_instance_type_offerings").paginate(
            LocationType="availability-zone"
        )
        return [o for page in pages for o in page.get("InstanceTypeOfferings", [])]

    def spot_price_history(self, now: datetime, instance_types: Sequence[str] = ()) -> list[dict[str, Any]]:
        """Spot prices in effect at `now`: with `StartTime=now` EC2 returns, per type and zone, the price
        valid at that instant (plus any later changes), which is all carpool needs."""
        kwargs: dict[str, Any] = {"StartTime": now, "ProductDescriptions": LINUX_SPOT}
        if instance_types:
            kwargs["InstanceTypes"] = list(instance_types)
        pages = self.client.get_paginator("describe_spot_price_history").paginate(**kwargs)
        return [p for page in pages for p in page.get("SpotPriceHistory", [])]


def latest_spot_prices(history: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], float]:
    """(instance type, zone) -> the most recent spot price in `history` (USD per hour)."""
    best: dict[tuple[str, str], tuple[Any, float]] = {}
    for item in history:
        key = (str(item["InstanceType"]), str(item["AvailabilityZone"]))
        stamp = item.get("Timestamp")
        price = float(item["SpotPrice"])
        held = best.get(key)
        if held is None or (stamp is not None and (held[0] is None or stamp > held[0])):
            best[key] = (stamp, price)
    return {k: price for k, (_, price) in best.items()}


def fetch_catalog_inputs(
    now: datetime,
    ec2: Ec2Catalog | None = None,
    pricing: OnDemandPrices | None = None,
    names: Sequence[str] = (),
) -> dict[str, Any]:
    """The keyword arguments of `carpool.catalog.builder.from_ec2`, read live (about a dozen calls);
    `names` restricts the catalog to those instance types (all when empty)."""
    ec2 = ec2 or Ec2Catalog()
    pricing = pricing or OnDemandPrices(region=ec2.region)
    wanted = set(names)
    offerings = ec2.type_offerings()
    return {
        "instance_types": ec2.instance_types(names=names),
        "type_offerings": [o for o in offerings if not wanted or o["InstanceType"] in wanted],
        "spot_prices": latest_spot_prices(ec2.spot_price_history(now, names)),
        "ondemand_prices": pricing.prices(),
        "region": ec2.region,
    }


def live_catalog(now: datetime, region: str | None = None) -> Catalog:
    """The catalog built from EC2's and the Pricing API's answers at `now`."""
    return builder.from_ec2(**fetch_catalog_inputs(now, Ec2Catalog(region=region)))
