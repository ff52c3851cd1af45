"""The stored live catalog and its fallback (`carpool.app.sources.StoredCatalogSource`): fresh, stale, absent
and corrupt stored catalogs; the refresh only when due; never a live fetch from `get`."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from carpool.app import catalog_refresh
from carpool.app.sources import (
    MAX_AGE,
    RECHECK_EVERY,
    REFRESH_EVERY,
    CatalogUnavailable,
    MemoryCatalogStore,
    StaticCatalogSource,
    StoredCatalog,
    StoredCatalogSource,
)
from carpool.app.wiring import Dependencies
from carpool.catalog import Catalog

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
REGION = "us-east-1"


def live_catalog(price: float = 0.0123) -> Catalog:
    """A small 'live' catalog, told apart from the snapshot by its size and its m5.large spot price."""
    snapshot = Catalog.snapshot(REGION)
    types = {n: snapshot[n] for n in ("m5.large", "c6g.medium", "t3.micro")}
    m5 = types["m5.large"]
    types["m5.large"] = m5.with_offerings(
        dataclasses.replace(o, price=price) if o.capacity_type == "spot" else o for o in m5.offerings
    )
    return Catalog(REGION, types)


class CountingStore(MemoryCatalogStore):
    def __init__(self) -> None:
        super().__init__()
        self.reads = self.stamps = self.writes = 0

    def read(self, region: str) -> StoredCatalog | None:
        self.reads += 1
        return super().read(region)

    def refreshed_at(self, region: str) -> datetime | None:
        self.stamps += 1
        return super().refreshed_at(region)

    def write(self, region: str, stored: StoredCatalog) -> None:
        self.writes += 1
        super().write(region, stored)


def stored(store: MemoryCatalogStore, at: datetime, catalog: Catalog | None = None) -> None:
    store.items[REGION] = StoredCatalog(at, (catalog or live_catalog()).encode("test"))


def no_fetch(now: datetime) -> Catalog:
    raise AssertionError("get() must never build the catalog from the live source")


def is_live(catalog: Catalog) -> bool:
    return len(catalog) == 3


# -- reading ------------------------------------------------------------------------------------------------
def test_a_fresh_stored_catalog_is_read_once_on_a_cold_start() -> None:
    store = CountingStore()
    stored(store, T0 - timedelta(hours=3))
    source = StoredCatalogSource(store, REGION, no_fetch)
    catalog = source.get(T0)
    assert is_live(catalog) and catalog["m5.large"].offering("us-east-1a", "spot").price == 0.0123
    assert (store.reads, store.stamps) == (1, 0)
    assert source.get(T0 + RECHECK_EVERY / 2) is catalog
    assert (store.reads, store.stamps) == (1, 0)


def test_without_a_stored_catalog_the_snapshot_is_used() -> None:
    source = StoredCatalogSource(MemoryCatalogStore(), REGION, no_fetch)
    assert source.get(T0) is Catalog.snapshot(REGION)


def test_a_stale_stored_catalog_falls_back_to_the_snapshot() -> None:
    store = MemoryCatalogStore()
    stored(store, T0 - MAX_AGE - timedelta(minutes=1))
    assert StoredCatalogSource(store, REGION, no_fetch).get(T0) is Catalog.snapshot(REGION)
    stored(store, T0 - MAX_AGE + timedelta(minutes=1))
    assert is_live(StoredCatalogSource(store, REGION, no_fetch).get(T0))


@pytest.mark.parametrize("data", [b"", b"\x1f\x8b garbage", b"{}"], ids=["empty", "bad-gzip", "not-gzip"])
def test_a_corrupt_stored_catalog_falls_back_to_the_snapshot(data: bytes) -> None:
    store = MemoryCatalogStore()
    store.items[REGION] = StoredCatalog(T0, data)
    assert StoredCatalogSource(store, REGION, no_fetch).get(T0) is Catalog.snapshot(REGION)


def test_a_catalog_stored_for_another_region_is_not_used() -> None:
    store = MemoryCatalogStore()
    store.items[REGION] = StoredCatalog(T0, Catalog("eu-west-1", dict(live_catalog())).encode("test"))
    assert StoredCatalogSource(store, REGION, no_fetch).get(T0) is Catalog.snapshot(REGION)


def test_without_a_stored_catalog_or_a_snapshot_the_request_fails_to_be_retried() -> None:
    with pytest.raises(CatalogUnavailable, match="eu-west-9"):
        StoredCatalogSource(MemoryCatalogStore(), "eu-west-9", no_fetch).get(T0)


def test_a_warm_process_picks_up_a_newer_catalog_with_one_small_read_per_check() -> None:
    store = CountingStore()
    stored(store, T0 - timedelta(hours=1))
    source = StoredCatalogSource(store, REGION, no_fetch)
    first = source.get(T0)
    assert source.get(T0 + RECHECK_EVERY) is first  # checked: nothing newer, not read again
    assert (store.reads, store.stamps) == (1, 1)
    stored(store, T0 + RECHECK_EVERY, live_catalog(price=0.0456))
    newer = source.get(T0 + 2 * RECHECK_EVERY)
    assert newer["m5.large"].offering("us-east-1a", "spot").price == 0.0456
    assert (store.reads, store.stamps) == (2, 2)


def test_a_warm_process_on_the_snapshot_switches_to_the_live_catalog_once_stored() -> None:
    store = MemoryCatalogStore()
    source = StoredCatalogSource(store, REGION, no_fetch)
    assert source.get(T0) is Catalog.snapshot(REGION)
    stored(store, T0 + timedelta(minutes=1))
    assert source.get(T0 + timedelta(minutes=2)) is Catalog.snapshot(REGION)  # not checked yet
    assert is_live(source.get(T0 + RECHECK_EVERY))


def test_a_live_catalog_in_hand_that_goes_stale_is_given_up_for_the_snapshot() -> None:
    store = MemoryCatalogStore()
    stored(store, T0)
    source = StoredCatalogSource(store, REGION, no_fetch)
    assert is_live(source.get(T0))
    assert is_live(source.get(T0 + MAX_AGE))
    assert source.get(T0 + MAX_AGE + RECHECK_EVERY) is Catalog.snapshot(REGION)


# -- refreshing ---------------------------------------------------------------------------------------------
class Fetcher:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[datetime] = []
        self.fail = fail

    def __call__(self, now: datetime) -> Catalog:
        self.calls.append(now)
        if self.fail:
            raise RuntimeError("EC2 said no")
        return live_catalog(price=0.0789)


def test_refresh_builds_and_stores_when_nothing_is_stored_and_readers_get_it() -> None:
    store, fetch = CountingStore(), Fetcher()
    assert StoredCatalogSource(store, REGION, fetch).refresh(T0) is True
    assert fetch.calls == [T0] and store.items[REGION].refreshed_at == T0
    reader = StoredCatalogSource(store, REGION, no_fetch).get(T0 + timedelta(minutes=1))
    assert reader["m5.large"].offering("us-east-1b", "spot").price == 0.0789


def test_refresh_is_skipped_while_the_stored_one_is_fresh_even_in_a_new_process() -> None:
    store, fetch = CountingStore(), Fetcher()
    stored(store, T0)
    assert StoredCatalogSource(store, REGION, fetch).refresh(T0 + REFRESH_EVERY - timedelta(minutes=1)) is False
    assert fetch.calls == [] and store.writes == 0 and store.stamps == 1


def test_a_warm_refresher_checks_nothing_until_its_catalog_is_due() -> None:
    store, fetch = CountingStore(), Fetcher()
    source = StoredCatalogSource(store, REGION, fetch)
    assert source.refresh(T0)
    stamps = store.stamps
    for minute in range(1, 60):
        assert source.refresh(T0 + timedelta(minutes=minute)) is False
    assert store.stamps == stamps and len(fetch.calls) == 1
    assert source.refresh(T0 + REFRESH_EVERY) is True
    assert len(fetch.calls) == 2 and store.items[REGION].refreshed_at == T0 + REFRESH_EVERY


def test_the_static_source_has_nothing_to_refresh() -> None:
    assert StaticCatalogSource(REGION).refresh(T0) is False


def _deps(source: StoredCatalogSource) -> Dependencies:
    return Dependencies(settings=None, cluster=None, compute=None, ledger=None, offerings=None,  # type: ignore[arg-type]
                        capacity=None, publisher=None, ami_source=None, config=None,  # type: ignore[arg-type]
                        catalog=source, clock=lambda: T0)


def test_a_failed_refresh_is_logged_and_leaves_the_stored_catalog_in_use(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryCatalogStore()
    stored(store, T0 - REFRESH_EVERY - timedelta(hours=1))
    source = StoredCatalogSource(store, REGION, Fetcher(fail=True))
    assert catalog_refresh.run(_deps(source)) is False
    assert "refresh failed" in caplog.text
    assert store.items[REGION].refreshed_at == T0 - REFRESH_EVERY - timedelta(hours=1)
    assert is_live(source.get(T0))


def test_the_refresh_use_case_stores_a_due_catalog() -> None:
    store = MemoryCatalogStore()
    assert catalog_refresh.run(_deps(StoredCatalogSource(store, REGION, Fetcher()))) is True
    assert store.items[REGION].refreshed_at == T0


# -- reading ahead ---------------------------------------------------------------------------------------------
def test_a_read_ahead_is_the_cold_starts_only_read_and_get_decodes_it() -> None:
    store = CountingStore()
    stored(store, T0)
    source = StoredCatalogSource(store, REGION)
    source.read_ahead()
    assert store.reads == 1
    stored(store, T0 + timedelta(minutes=1), live_catalog(price=0.5))  # a refresh after the read: not seen yet
    catalog = source.get(T0 + timedelta(minutes=2))
    assert store.reads == 1 and len(catalog) == 3
    assert catalog["m5.large"].offering("us-east-1a", "spot").price == 0.0123  # type: ignore[union-attr]
    source.read_ahead()  # warm: nothing to read ahead
    assert source.get(T0 + timedelta(minutes=3)) is catalog and store.reads == 1


def test_what_a_read_ahead_raised_is_raised_by_get_and_then_read_again() -> None:
    class Failing(CountingStore):
        def read(self, region: str) -> StoredCatalog | None:
            super().read(region)
            if self.reads == 1:
                raise ConnectionError("throttled")
            return MemoryCatalogStore.read(self, region)

    store = Failing()
    stored(store, T0)
    source = StoredCatalogSource(store, REGION)
    source.read_ahead()  # a worker thread must not raise: `get` does, where the read belongs
    with pytest.raises(ConnectionError, match="throttled"):
        source.get(T0)
    assert len(source.get(T0)) == 3 and store.reads == 2


def test_a_stale_catalog_read_ahead_still_falls_back_to_the_snapshot() -> None:
    store = CountingStore()
    stored(store, T0)
    source = StoredCatalogSource(store, REGION)
    source.read_ahead()
    assert len(source.get(T0 + MAX_AGE + timedelta(seconds=1))) > 100 and store.reads == 1
