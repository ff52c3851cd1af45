"""Spot prices for local EC2: a documented model, deterministic per (instance type, zone).

moto answers DescribeSpotPriceHistory with 0.00001 for every offering, which makes every spot offering
equally cheap: whatever ranks first by name wins, and spot choices in a simulation mean nothing. Real
spot prices are a discount on the on-demand price that differs by family (AWS's Spot Instance Advisor
shows typical savings of 55-70 % for current families) and by pool (the same type costs a little more
in one zone than in another). The model:

    spot(type, zone) = on-demand(type) x discount(family) x (1 + variance(type, zone))

- on-demand: the shipped public price table (`carpool.catalog.prices.static_ondemand`), the same one
  carpool falls back to when the Pricing API is unreachable, as it is locally;
- discount(family): between 0.30 and 0.45 of on-demand, fixed per family by a hash of its name;
- variance(type, zone): within +-15 %, fixed per pool by a hash of type and zone.

Hashes (SHA-256, not Python's salted `hash`) keep every run and every process on the same prices, so a
scenario's spot choice is reproducible and can be compared with `carpool plan` given the same prices.
Types without an on-demand price have no spot price (EC2 would not sell them here either).
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

#: Spot price as a share of on-demand, lowest and highest family discount.
DISCOUNT_MIN = 0.30
DISCOUNT_MAX = 0.45
#: Largest per-pool deviation from the family's price (15 % either way).
POOL_VARIANCE = 0.15
#: Decimal places of the prices EC2 publishes.
DIGITS = 5


@lru_cache(maxsize=65536)
def _unit(*parts: str) -> float:
    """A number in [0, 1) fixed by `parts`, the same in every process (kept once computed: every
    DescribeSpotPriceHistory page and CreateFleet prices hundreds of pools)."""
    digest = hashlib.sha256("/".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def discount(family: str) -> float:
    """The family's spot price as a share of its on-demand price (0.30-0.45)."""
    return DISCOUNT_MIN + (DISCOUNT_MAX - DISCOUNT_MIN) * _unit("family", family)


def variance(instance_type: str, zone: str) -> float:
    """The pool's deviation from its family's spot price, in [-0.15, +0.15)."""
    return POOL_VARIANCE * (2 * _unit("pool", instance_type, zone) - 1)


@lru_cache(maxsize=8)
def _ondemand(region: str) -> dict[str, float]:
    from carpool.catalog import prices

    return prices.static_ondemand(region)


def ondemand_price(region: str, instance_type: str) -> float | None:
    """The list on-demand price (USD per hour), or None when the table has none."""
    return _ondemand(region).get(instance_type)


@lru_cache(maxsize=65536)
def spot_price(region: str, instance_type: str, zone: str) -> float | None:
    """USD per hour of a spot instance of `instance_type` in `zone`, or None without an on-demand price
    (kept once computed: a function of its arguments, asked for every pool of every price page)."""
    od = ondemand_price(region, instance_type)
    if od is None:
        return None
    family = instance_type.partition(".")[0]
    return round(od * discount(family) * (1 + variance(instance_type, zone)), DIGITS)


def hourly_price(region: str, instance_type: str, zone: str, spot: bool) -> float:
    """What an instance costs per hour in the simulation (0.0 when the type has no price)."""
    price = spot_price(region, instance_type, zone) if spot else ondemand_price(region, instance_type)
    return price or 0.0
