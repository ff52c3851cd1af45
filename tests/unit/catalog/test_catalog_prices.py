"""Pricing API parsing and the static on-demand table."""

from __future__ import annotations

import json

import pytest

from carpool.catalog import prices


def price_list_item(instance_type: str = "m5.large", usd: str = "0.0960000000") -> str:
    """A GetProducts PriceList entry as the Pricing API returns it (a JSON string)."""
    return json.dumps({
        "product": {
            "productFamily": "Compute Instance",
            "attributes": {
                "instanceType": instance_type, "operatingSystem": "Linux", "tenancy": "Shared",
                "preInstalledSw": "NA", "capacitystatus": "Used", "regionCode": "us-east-1",
            },
            "sku": "JRTCKXETXF6YS6EN",
        },
        "serviceCode": "AmazonEC2",
        "terms": {"OnDemand": {"JRTCKXETXF6YS6EN.JRTCKXETXF": {
            "priceDimensions": {"JRTCKXETXF6YS6EN.JRTCKXETXF.6YS6EN2CT7": {
                "unit": "Hrs", "pricePerUnit": {"USD": usd},
                "description": f"$0.096 per On Demand Linux {instance_type} Instance Hour",
            }},
            "sku": "JRTCKXETXF6YS6EN", "effectiveDate": "2026-07-01T00:00:00Z",
        }}},
        "version": "20260701000000", "publicationDate": "2026-07-01T00:00:00Z",
    })


def test_parse_price_list_item() -> None:
    assert prices.parse_price_list_item(price_list_item()) == ("m5.large", 0.096)


def test_parse_accepts_an_already_decoded_dict() -> None:
    assert prices.parse_price_list_item(json.loads(price_list_item("c5.large", "0.085"))) == ("c5.large", 0.085)


def test_zero_price_is_no_price() -> None:
    assert prices.parse_price_list_item(price_list_item(usd="0.0000000000")) is None


def test_entry_without_instance_type_is_skipped() -> None:
    assert prices.parse_price_list_item(json.dumps({"product": {"attributes": {}}, "terms": {}})) is None


def test_invalid_json_names_the_problem() -> None:
    with pytest.raises(prices.PriceListError, match="not JSON"):
        prices.parse_price_list_item("{not json")


def test_non_numeric_price_is_an_error() -> None:
    with pytest.raises(prices.PriceListError, match="USD"):
        prices.parse_price_list_item(price_list_item(usd="n/a"))


def test_parse_price_list_builds_a_table_keeping_the_lowest() -> None:
    table = prices.parse_price_list([
        price_list_item("m5.large", "0.096"), price_list_item("m5.large", "0.1"), price_list_item("c5.large", "0.085"),
    ])
    assert table == {"m5.large": 0.096, "c5.large": 0.085}


def test_get_products_filters() -> None:
    filters = {f["Field"]: f["Value"] for f in prices.get_products_filters("eu-west-1")}
    assert filters == {
        "operatingSystem": "Linux", "preInstalledSw": "NA", "capacitystatus": "Used", "tenancy": "Shared",
        "marketoption": "OnDemand", "regionCode": "eu-west-1",
    }


def test_static_table() -> None:
    table = prices.static_ondemand("us-east-1")
    assert table["m5.large"] == 0.096
    assert len(table) > 1000


def test_static_table_returns_a_copy() -> None:
    prices.static_ondemand("us-east-1")["m5.large"] = 99.0
    assert prices.static_ondemand("us-east-1")["m5.large"] == 0.096


def test_static_table_falls_back_to_us_east_1_for_other_regions() -> None:
    assert prices.static_ondemand("eu-west-1")["m5.large"] == 0.096
