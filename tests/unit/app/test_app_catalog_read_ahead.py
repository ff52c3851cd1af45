"""The provisioner's cold start reads and decodes the stored catalog on a thread of its own
(`StoredCatalogSource.start_reading`, `sources.catalog_read_ahead`): `get` then answers exactly what it
answers without it (the live catalog, or the snapshot with the same reasons), from one store read."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from carpool.app import sources
from carpool.app.sources import (
    MAX_AGE,
    MemoryCatalogStore,
    StaticCatalogSource,
    StoredCatalog,
    StoredCatalogSource,
)
from carpool.catalog import Catalog

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
REGION = "us-east-1"


def live() -> Catalog:
    snapshot = Catalog.snapshot(REGION)
    return Catalog(REGION, {n: snapshot[n] for n in ("m5.large", "c6g.medium", "t3.micro")})


class GatedStore(MemoryCatalogStore):
    """Counts reads, records the thread each ran on, and holds each read until `release`."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []
        self.gate = threading.Event()

    def release(self) -> None:
        self.gate.set()

    def read(self, region: str) -> StoredCatalog | None:
        self.reads.append(threading.current_thread().name)
        assert self.gate.wait(10), "the test never released the read"
        return super().read(region)


class FailingStore(MemoryCatalogStore):
    def read(self, region: str) -> StoredCatalog | None:
        raise ConnectionError("throttled")


def test_the_catalog_is_read_and_decoded_off_the_callers_thread_once() -> None:
    store = GatedStore()
    store.items[REGION] = StoredCatalog(T0 - timedelta(hours=1), live().encode("test"))
    source = StoredCatalogSource(store, REGION)
    source.start_reading()
    source.read_ahead()  # the invocation's own read ahead: nothing more to read
    source.start_reading()  # started once
    store.release()
    catalog = source.get(T0)
    assert len(catalog) == 3 and catalog["m5.large"] == live()["m5.large"]
    assert store.reads == ["catalog-read-ahead"]
    assert source.get(T0) is catalog


def test_a_catalog_read_ahead_is_judged_as_a_read_of_get_is() -> None:
    store = GatedStore()
    store.release()
    store.items[REGION] = StoredCatalog(T0 - MAX_AGE - timedelta(minutes=1), live().encode("test"))
    source = StoredCatalogSource(store, REGION)
    source.start_reading()
    assert source.get(T0) is Catalog.snapshot(REGION)  # too old: the snapshot, as without reading ahead


def test_an_undecodable_catalog_read_ahead_falls_back_to_the_snapshot() -> None:
    store = GatedStore()
    store.release()
    store.items[REGION] = StoredCatalog(T0, b"not a catalog")
    source = StoredCatalogSource(store, REGION)
    source.start_reading()
    assert source.get(T0) is Catalog.snapshot(REGION)


def test_a_failed_read_ahead_is_raised_by_get_and_the_next_get_reads_again() -> None:
    source = StoredCatalogSource(FailingStore(), REGION)
    source.start_reading()
    with pytest.raises(ConnectionError, match="throttled"):
        source.get(T0)
    with pytest.raises(ConnectionError, match="throttled"):  # read again, on the caller's thread this time
        source.get(T0)


def test_the_block_does_not_outlive_its_read_and_a_warm_process_reads_nothing_ahead() -> None:
    store = GatedStore()
    store.items[REGION] = StoredCatalog(T0, live().encode("test"))
    source = StoredCatalogSource(store, REGION)
    release = threading.Timer(0.2, store.release)
    release.start()
    with sources.catalog_read_ahead(source):
        pass  # an invocation that never asked for the catalog
    assert store.gate.is_set()  # the block waited for its read
    assert store.reads == ["catalog-read-ahead"]
    catalog = source.get(T0)  # the next invocation takes what was read
    assert len(catalog) == 3 and store.reads == ["catalog-read-ahead"]
    with sources.catalog_read_ahead(source):
        assert source.get(T0) is catalog
    assert store.reads == ["catalog-read-ahead"]


def test_sources_without_a_stored_catalog_are_left_alone() -> None:
    source = StaticCatalogSource(REGION)
    with sources.catalog_read_ahead(source):
        assert source.get(T0) is Catalog.snapshot(REGION)
