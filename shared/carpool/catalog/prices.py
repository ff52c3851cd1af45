"""Instance prices: parsing the AWS Pricing API, the static on-demand table, and the spot estimate.

carpool ranks instance types by price, so every offering needs one. The live sources are the Pricing API
(`GetProducts`, on-demand) and `DescribeSpotPriceHistory` (spot); the adapters call them and hand the
results to `builder.from_ec2`. This module holds the pure parts: turning a `GetProducts` PriceList entry
into a number, the public us-east-1 table shipped for offline use and as a fallback, and the spot estimate
used when no spot price is known.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import lru_cache
from importlib import resources
from typing import Any

#: Region whose static table is used for regions the package has no table for.
STATIC_FALLBACK_REGION = "us-east-1"

#: Spot price estimate when no spot price is known: this fraction of the on-demand price.
#: AWS's Spot Instance Advisor reports average savings of roughly 60-90% over on-demand for common
#: families; 0.4 (a 60% saving, the low end) keeps estimated savings from being overstated. A constant
#: factor also keeps the price *ranking* of types identical to on-demand, so an estimate never makes one
#: type look cheaper than another for made-up reasons. Live prices replace it within 12 h of startup.
SPOT_ESTIMATE_FACTOR = 0.4

#: `GetProducts` filters for Linux, shared-tenancy, no-preinstalled-software, on-demand EC2 prices
#: (`regionCode` is added per call). The adapter passes these as `{"Type": "TERM_MATCH", ...}` filters.
ONDEMAND_PRODUCT_FILTERS: Mapping[str, str] = {
    "serviceCode": "AmazonEC2",
    "operatingSystem": "Linux",
    "preInstalledSw": "NA",
    "capacitystatus": "Used",
    "tenancy": "Shared",
    "marketoption": "OnDemand",
}


class PriceListError(ValueError):
    """A GetProducts PriceList entry that is not the JSON document AWS documents."""


def get_products_filters(region: str) -> list[dict[str, str]]:
    """The `Filters` argument of `pricing.get_products` for on-demand Linux prices in `region`."""
    pairs = {**{k: v for k, v in ONDEMAND_PRODUCT_FILTERS.items() if k != "serviceCode"}, "regionCode": region}
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in pairs.items()]


def parse_price_list_item(item: str | Mapping[str, Any]) -> tuple[str, float] | None:
    """(instance type, USD per hour) from one `GetProducts` PriceList entry, or None when it has no price.

    PriceList entries are JSON strings: `product.attributes.instanceType` names the type and
    `terms.OnDemand.<offer>.priceDimensions.<dim>.pricePerUnit.USD` holds the price. Zero prices (which
    AWS publishes for some reserved/placeholder SKUs) are treated as "no price" rather than "free".
    """
    doc = _load(item)
    attributes = doc.get("product", {}).get("attributes", {})
    instance_type = attributes.get("instanceType")
    if not instance_type:
        return None
    price = _first_hourly_usd(doc.get("terms", {}).get("OnDemand", {}))
    return (instance_type, price) if price is not None else None


def parse_price_list(items: Iterable[str | Mapping[str, Any]]) -> dict[str, float]:
    """An on-demand table (type -> USD/h) from all pages of `GetProducts`.

    When several SKUs name the same type (should not happen with the filters above), the lowest price
    wins: it is the one EC2 would charge for the cheapest matching product.
    """
    table: dict[str, float] = {}
    for item in items:
        parsed = parse_price_list_item(item)
        if parsed is None:
            continue
        name, price = parsed
        table[name] = min(price, table.get(name, price))
    return table


def _load(item: str | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(item, Mapping):
        return item
    try:
        doc = json.loads(item)
    except (TypeError, json.JSONDecodeError) as exc:
        raise PriceListError(f"PriceList entry is not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise PriceListError("PriceList entry is not a JSON object")
    return doc


def _first_hourly_usd(on_demand_terms: Mapping[str, Any]) -> float | None:
    for term in on_demand_terms.values():
        for dimension in term.get("priceDimensions", {}).values():
            usd = dimension.get("pricePerUnit", {}).get("USD")
            if usd is None:
                continue
            try:
                price = float(usd)
            except ValueError as exc:
                raise PriceListError(f"pricePerUnit.USD {usd!r} is not a number") from exc
            if price > 0:
                return price
    return None


@lru_cache(maxsize=1)
def _static_table() -> Mapping[str, Mapping[str, float]]:
    text = resources.files("carpool.catalog").joinpath("data/ondemand-prices.json").read_text()
    return json.loads(text)["regions"]


def static_ondemand(region: str) -> dict[str, float]:
    """The shipped on-demand table (type -> USD/h) for `region`.

    For a region the table does not cover, the us-east-1 table is returned: absolute prices differ by
    region (typically 0-30%) but the ranking of types barely does, and ranking is what the fallback is
    for. Returns a fresh dict, so callers may change it.
    """
    table = _static_table()
    return dict(table.get(region) or table[STATIC_FALLBACK_REGION])


def estimate_spot(ondemand_price: float) -> float:
    """The spot price assumed when none is known (see `SPOT_ESTIMATE_FACTOR`)."""
    return round(ondemand_price * SPOT_ESTIMATE_FACTOR, 6)
