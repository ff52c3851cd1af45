"""On-demand prices from the AWS Pricing API, falling back to the shipped static table.

Prices only rank instance types, so a stale or approximate price is far better than none: any failure
(no network path to the Pricing endpoint, missing IAM permission, throttling, an unexpected document, or
a local moto endpoint that has no Pricing API) degrades to `carpool.catalog.prices.static_ondemand`
instead of failing a provisioning round. Live prices are laid over the static table, so a type the API
did not price still has a number.
"""

from __future__ import annotations

import logging
from typing import Any

from carpool import environment
from carpool.adapters.aws import session

log = logging.getLogger(__name__)

#: The Pricing API is served from a few regions only; us-east-1 answers for every region's prices.
PRICING_REGION = "us-east-1"


class PricingUnavailable(RuntimeError):
    """No Pricing API to ask (a local endpoint override such as moto has none)."""


class OnDemandPrices:
    """`prices()` -> instance type -> USD per hour for Linux, shared tenancy, on-demand, in `region`."""

    def __init__(self, region: str | None = None, client: Any | None = None) -> None:
        self.region = region or session.region_name()
        self._client = client
        #: where the last answer came from: "pricing-api" or "static" (logged and shown by the CLI)
        self.source = ""

    def _pricing_client(self) -> Any:
        if self._client is None:
            if session.endpoint_url() and not environment.get("AWS_ENDPOINT_URL_PRICING"):
                # AWS_ENDPOINT_URL sends every client to a local AWS, which has no Pricing API: asking
                # it only produces server errors and retries before the same fallback.
                raise PricingUnavailable(f"no Pricing API at {session.endpoint_url()}")
            # Few attempts and short timeouts: the fallback is cheap, waiting is not.
            self._client = session.client(
                "pricing", region=PRICING_REGION, max_attempts=2, connect_timeout=2, read_timeout=10
            )
        return self._client

    def prices(self) -> dict[str, float]:
        from carpool.catalog import prices as price_rules  # lazily: the pure module is owned elsewhere

        table = price_rules.static_ondemand(self.region)
        try:
            live = self._from_api(price_rules)
        except PricingUnavailable as e:
            log.info("using the static on-demand price table: %s", e)
            live = {}
        except Exception as e:  # noqa: BLE001 - any failure means "use the table", by design
            log.warning("Pricing API unavailable for %s, using the static table: %s", self.region, e)
            live = {}
        self.source = "pricing-api" if live else "static"
        table.update(live)
        return table

    def _from_api(self, price_rules: Any) -> dict[str, float]:
        paginator = self._pricing_client().get_paginator("get_products")
        pages = paginator.paginate(
            ServiceCode="AmazonEC2",
            Filters=price_rules.get_products_filters(self.region),
            FormatVersion="aws_v1",
        )
        items = [item for page in pages for item in page.get("PriceList", [])]
        return dict(price_rules.parse_price_list(items))
