"""The live catalog in the state table, through the production wiring against local AWS: the refresh builds it
from EC2 once and stores it; a cold start reads it with one GetItem and no EC2 call; absent, corrupt or
oversized items fall back to the shipped snapshot."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from carpool.adapters.aws import session
from carpool.adapters.aws import wiring as aws_wiring
from carpool.adapters.aws.catalog import Ec2Catalog, latest_spot_prices
from carpool.adapters.aws.catalog_store import (
    MAX_DATA_BYTES,
    CatalogTooLarge,
    DynamoCatalogStore,
    catalog_key,
)
from carpool.app import catalog_refresh
from carpool.app.settings import Settings
from carpool.app.sources import REFRESH_EVERY, StoredCatalog
from carpool.app.wiring import Dependencies
from carpool.catalog import Catalog
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.sim.localaws.server import LocalAws, StateTables

NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
def requests() -> Iterator[Counter[str]]:
    """Every AWS request made through carpool's session from here on, by `service.Operation`."""
    seen: Counter[str] = Counter()

    def count(model: Any, **_: Any) -> None:
        seen[f"{model.service_model.endpoint_prefix}.{model.name}"] += 1

    session.reset()
    session.session().events.register("before-call", count, unique_id="test-catalog-store")
    yield seen
    session.session().events.unregister("before-call", unique_id="test-catalog-store")
    session.reset()


def cold_start(local_aws: LocalAws, clock: datetime = NOW) -> Dependencies:
    """A function's production dependencies as its cold start builds them (new process: new caches)."""
    settings = dataclasses.replace(Settings.from_env(), cluster_name=local_aws.cluster, region=local_aws.region)
    cluster = SimulatedCluster(lambda: clock)
    deps = aws_wiring.build_from_env(settings, cluster=cluster, karpenter=cluster)
    return dataclasses.replace(deps, clock=lambda: clock)


def test_store_round_trip_and_absence(state_tables: StateTables) -> None:
    store = DynamoCatalogStore(state_tables.table)
    assert store.read("us-east-1") is None and store.refreshed_at("us-east-1") is None
    data = Catalog.snapshot().encode("test")
    store.write("us-east-1", StoredCatalog(NOW, data))
    assert store.read("us-east-1") == StoredCatalog(NOW, data)
    assert store.refreshed_at("us-east-1") == NOW
    assert store.read("eu-west-1") is None


def test_an_oversized_catalog_is_refused_before_dynamodb(state_tables: StateTables) -> None:
    store = DynamoCatalogStore(state_tables.table)
    with pytest.raises(CatalogTooLarge, match="DynamoDB item"):
        store.write("us-east-1", StoredCatalog(NOW, b"x" * (MAX_DATA_BYTES + 1)))
    assert store.read("us-east-1") is None


def test_refresh_stores_the_live_catalog_and_a_cold_start_reads_it_in_one_call(
    local_aws: LocalAws, state_tables: StateTables, requests: Counter[str]
) -> None:
    refresher = cold_start(local_aws)
    assert catalog_refresh.run(refresher) is True
    assert requests["ec2.DescribeInstanceTypes"] >= 1 and requests["dynamodb.PutItem"] == 1

    requests.clear()
    reader = cold_start(local_aws, NOW + timedelta(minutes=5))
    catalog = reader.catalog.get(reader.clock())
    assert dict(requests) == {"dynamodb.GetItem": 1}, "a cold start reads the stored catalog, nothing else"
    assert catalog is not Catalog.snapshot(local_aws.region)

    # offerings per zone and spot prices are EC2's (local EC2 answers a modelled price per zone)
    ec2 = Ec2Catalog(local_aws.client("ec2"), region=local_aws.region)
    live = latest_spot_prices(ec2.spot_price_history(NOW, ["m5.large"]))
    for (name, zone), price in live.items():
        offering = catalog[name].offering(zone, "spot")
        assert offering is not None and offering.price == pytest.approx(price)
    assert {z for n, z in live} == set(catalog["m5.large"].zones(available_only=False))

    requests.clear()
    assert catalog_refresh.run(cold_start(local_aws, NOW + REFRESH_EVERY / 2)) is False
    assert requests["ec2.DescribeInstanceTypes"] == 0 and requests["dynamodb.PutItem"] == 0


def test_a_corrupt_item_falls_back_to_the_snapshot(local_aws: LocalAws, state_tables: StateTables) -> None:
    local_aws.client("dynamodb").put_item(TableName=state_tables.table, Item={
        **catalog_key(local_aws.region), "refreshedAt": {"N": str(NOW.timestamp())}, "data": {"B": b"\x1f\x8bbroken"}})
    deps = cold_start(local_aws)
    assert deps.catalog.get(NOW) is Catalog.snapshot(local_aws.region)


def test_without_a_stored_catalog_a_cold_start_uses_the_snapshot_without_calling_ec2(
    local_aws: LocalAws, state_tables: StateTables, requests: Counter[str]
) -> None:
    deps = cold_start(local_aws)
    assert deps.catalog.get(NOW) is Catalog.snapshot(local_aws.region)
    assert dict(requests) == {"dynamodb.GetItem": 1}
