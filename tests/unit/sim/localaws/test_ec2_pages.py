"""Local EC2 pages DescribeInstanceTypes, DescribeInstanceTypeOfferings and DescribeSpotPriceHistory as EC2
does (`MaxResults` bounds, `NextToken`), and a page served from memory is the page moto renders."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto.ec2.models.instance_types import INSTANCE_TYPE_OFFERINGS, INSTANCE_TYPES

from carpool.adapters.aws.catalog import Ec2Catalog
from carpool.sim.localaws import ec2_pages, spot_prices
from carpool.sim.localaws.server import FAKE_CREDENTIALS, LocalAws

REGION = "us-east-1"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def aws() -> Iterator[LocalAws]:
    with LocalAws(cluster="pages", region=REGION) as local:
        yield local


@pytest.fixture(scope="module")
def ec2(aws: LocalAws) -> Any:
    return aws.client("ec2")


@pytest.fixture(scope="module")
def unchecked(aws: LocalAws) -> Any:
    """A client that sends what it is given: botocore checks `MaxResults` minimums itself, EC2 checks them too."""
    import boto3

    return boto3.client("ec2", region_name=REGION, endpoint_url=aws.endpoint,
                        aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                        aws_session_token=FAKE_CREDENTIALS["AWS_SESSION_TOKEN"],
                        config=Config(parameter_validation=False))


def _error(call: Any, **kwargs: Any) -> tuple[str, str]:
    with pytest.raises(ClientError) as info:
        call(**kwargs)
    return info.value.response["Error"]["Code"], info.value.response["Error"]["Message"]


def test_instance_types_come_in_pages_of_at_most_100_and_all_arrive_through_next_token(ec2: Any) -> None:
    first = ec2.describe_instance_types()
    assert len(first["InstanceTypes"]) == 100 and first["NextToken"]
    sizes, names, token = [], [], None
    while True:
        answer = ec2.describe_instance_types(MaxResults=100, **({"NextToken": token} if token else {}))
        sizes.append(len(answer["InstanceTypes"]))
        names += [t["InstanceType"] for t in answer["InstanceTypes"]]
        token = answer.get("NextToken")
        if not token:
            break
    assert len(names) == len(set(names)) == len(INSTANCE_TYPES) == 1395
    assert set(names) == set(INSTANCE_TYPES)
    assert sizes == [100] * 13 + [95]


def test_the_catalog_reader_follows_the_pages(ec2: Any) -> None:
    catalog = Ec2Catalog(client=ec2, region=REGION)
    assert len(catalog.instance_types()) == len(INSTANCE_TYPES)
    assert len(catalog.type_offerings()) == len(INSTANCE_TYPE_OFFERINGS["availability-zone"][REGION])
    assert sorted(t["InstanceType"] for t in catalog.instance_types(names=["m5.large", "c6g.xlarge"])) == [
        "c6g.xlarge", "m5.large"]


def test_a_small_page_size_pages_the_same_items(ec2: Any) -> None:
    filters = [{"Name": "instance-type", "Values": ["m5.*"]}]
    whole = [t["InstanceType"] for t in ec2.describe_instance_types(Filters=filters)["InstanceTypes"]]
    pages = ec2.get_paginator("describe_instance_types").paginate(Filters=filters, PaginationConfig={"PageSize": 5})
    paged = [[t["InstanceType"] for t in p["InstanceTypes"]] for p in pages]
    assert len(whole) > 5 and [n for p in paged for n in p] == whole
    assert all(len(p) == 5 for p in paged[:-1]) and 0 < len(paged[-1]) <= 5


def test_offerings_come_in_pages_of_at_most_1000(ec2: Any) -> None:
    answer = ec2.describe_instance_type_offerings(LocationType="availability-zone")
    assert len(answer["InstanceTypeOfferings"]) == 1000 and answer["NextToken"]


@pytest.mark.parametrize(("operation", "low", "high"), [
    ("describe_instance_types", 5, 100),
    ("describe_instance_type_offerings", 5, 1000),
    ("describe_spot_price_history", 1, 1000),
])
def test_a_max_results_outside_ec2s_bounds_is_refused(unchecked: Any, operation: str, low: int, high: int) -> None:
    call = getattr(unchecked, operation)
    for bad in (low - 1, high + 1):
        code, message = _error(call, MaxResults=bad)
        assert code == "InvalidParameterValue"
        assert f"( {bad} )" in message and f"between {low} and {high}" in message
    for good in (low, high):
        assert call(MaxResults=good)["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_a_token_only_continues_the_request_it_was_issued_for(ec2: Any) -> None:
    token = ec2.describe_instance_types(MaxResults=5)["NextToken"]
    assert ec2.describe_instance_types(MaxResults=5, NextToken=token)["InstanceTypes"]
    other = [{"Name": "processor-info.supported-architecture", "Values": ["arm64"]}]
    assert _error(ec2.describe_instance_types, MaxResults=5, NextToken=token, Filters=other)[0] == "InvalidNextToken"
    assert _error(ec2.describe_instance_types, NextToken="not-a-token")[0] == "InvalidNextToken"


def test_spot_prices_come_in_pages_of_at_most_1000_and_all_arrive(ec2: Any) -> None:
    first = ec2.describe_spot_price_history(StartTime=NOW, ProductDescriptions=["Linux/UNIX"])
    assert len(first["SpotPriceHistory"]) == 1000 and first["NextToken"]
    history = Ec2Catalog(client=ec2, region=REGION).spot_price_history(NOW)
    offerings = INSTANCE_TYPE_OFFERINGS["availability-zone"][REGION]
    priced = [o for o in offerings if spot_prices.spot_price(REGION, o["InstanceType"], o["Location"]) is not None]
    assert len(history) == len(priced) > 1000
    assert {(h["InstanceType"], h["AvailabilityZone"]) for h in history} == {
        (o["InstanceType"], o["Location"]) for o in priced}


class _Bodies:
    """The raw bodies of the answers a client receives."""

    def __init__(self, client: Any) -> None:
        self.bodies: list[bytes] = []
        client.meta.events.register("after-call.ec2", self._keep)

    def _keep(self, http_response: Any, **_: Any) -> None:
        self.bodies.append(http_response.content)


def test_a_page_served_from_memory_is_the_page_moto_renders(aws: LocalAws, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CARPOOL_SIM_CACHE", "off")  # rendered by moto, not read from pages kept on disk
    client = aws.client("ec2")
    bodies = _Bodies(client)
    ask = [("describe_instance_types", {"MaxResults": 100}),
           ("describe_instance_type_offerings", {"LocationType": "availability-zone", "MaxResults": 1000}),
           ("describe_spot_price_history", {"StartTime": NOW, "ProductDescriptions": ["Linux/UNIX"]})]
    ec2_pages._RENDERED.clear()
    misses = ec2_pages._RENDERED.misses
    fresh = [getattr(client, op)(**kw) for op, kw in ask]
    assert ec2_pages._RENDERED.misses == misses + len(ask), "each rendered by moto"
    hits = ec2_pages._RENDERED.hits
    again = [getattr(client, op)(**kw) for op, kw in ask]
    assert ec2_pages._RENDERED.hits == hits + len(ask), "each served from memory"
    assert bodies.bodies[:3] == bodies.bodies[3:]
    strip = [{k: v for k, v in a.items() if k != "ResponseMetadata"} for a in (*fresh, *again)]
    assert strip[:3] == strip[3:]


def test_changed_prices_are_answered_not_a_kept_page(ec2: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def ask() -> dict[tuple[str, str], str]:
        answer = ec2.describe_spot_price_history(StartTime=NOW, InstanceTypes=["m5.large"], MaxResults=5)
        return {(h["InstanceType"], h["AvailabilityZone"]): h["SpotPrice"] for h in answer["SpotPriceHistory"]}

    modelled = ask()
    model = spot_prices.spot_price
    monkeypatch.setattr(spot_prices, "spot_price", lambda region, name, zone: 2 * (model(region, name, zone) or 0))
    doubled = ask()
    assert doubled.keys() == modelled.keys() and modelled
    assert all(float(doubled[k]) == pytest.approx(2 * float(modelled[k])) for k in modelled)
    monkeypatch.undo()
    assert ask() == modelled


def test_an_answer_holding_more_than_json_values_is_rendered_every_time() -> None:
    class Context:
        serializer_class = object
        response = object()

    assert ec2_pages._render_key(Context(), {"Items": [{"When": datetime.now(UTC)}]}) is None


def test_rendered_pages_stay_within_their_budget() -> None:
    kept = ec2_pages._Rendered(budget=10)
    for i in range(5):
        kept.put(("k", i), (200, {}, "abcd"), 4)
    assert len(kept) == 2
    assert kept.get(("k", 4)) == (200, {}, "abcd") and kept.get(("k", 0)) is None
    kept.put(("big",), (200, {}, "x" * 11), 11)
    assert kept.get(("big",)) is None
