"""Where the use cases get their slowly-changing inputs: the NodePool/EC2NodeClass config and the
instance-type catalog. Both are cached per process (a Lambda container), since they change rarely and
reading them is the expensive part of a cold invocation.

The catalog works the way an in-cluster Karpenter controller keeps its own warm, except that carpool's
processes come and go: building it from EC2 takes a dozen paginated calls and seconds, which no cold start
of a request path may pay. So one scheduled function (the disruption function, one at a time) refreshes it
every `REFRESH_EVERY` (Karpenter refreshes instance types and prices every 12 h) and keeps it, built and
compressed, in the state store; every other process reads it in one call on its cold start and checks
cheaply for a newer one every `RECHECK_EVERY`. While no live catalog is stored, or the stored one is
older than `MAX_AGE` (the refresh has been failing for a whole period), or it cannot be decoded, they use
the snapshot shipped with the package and say so in the log and the `CatalogFallbacks` metric.
"""

from __future__ import annotations

import contextvars
import hashlib
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from carpool import observability
from carpool.api.cluster_config import ClusterConfig, ObjectVerdict
from carpool.api.config import load_config
from carpool.api.loader import Manifests, NamedText
from carpool.catalog import Catalog, CatalogDecodeError, SnapshotNotFound

log = logging.getLogger(__name__)

#: How often the live catalog is rebuilt from EC2 (Karpenter: instance types and prices every 12 h).
REFRESH_EVERY = timedelta(hours=12)
#: A stored catalog older than this is stale: the refresh missed a whole period, so its prices and
#: offerings are no longer what carpool claims to use; readers fall back to the snapshot.
MAX_AGE = 2 * REFRESH_EVERY
#: How often a warm process looks for a newer stored catalog (one small read).
RECHECK_EVERY = timedelta(minutes=10)


class ConfigSource(Protocol):
    """The NodePools and EC2NodeClasses the functions use: the cluster's (`ClusterConfigSource`, deployed
    and simulated), or a file's (`TextConfigSource`: the bench, tests)."""

    def load(self) -> Manifests:
        """The valid objects only."""
        ...

    def current(self) -> ClusterConfig:
        """The valid objects and a verdict on every object (`carpool.api.cluster_config`)."""
        ...


class CatalogSource(Protocol):
    def get(self, now: datetime) -> Catalog:
        """The catalog to schedule against at `now`."""
        ...

    def refresh(self, now: datetime) -> bool:
        """Rebuild the shared catalog from its live source when it is due; True when it did."""
        ...


@dataclass(frozen=True)
class StoredCatalog:
    """A catalog as the store keeps it: when it was built, and its encoded form (`Catalog.encode`)."""

    refreshed_at: datetime
    data: bytes


class CatalogStore(Protocol):
    """Where the live catalog is kept between processes (the state table in production)."""

    def read(self, region: str) -> StoredCatalog | None: ...

    def refreshed_at(self, region: str) -> datetime | None:
        """When the stored catalog was built, without reading it (None: nothing stored)."""
        ...

    def write(self, region: str, stored: StoredCatalog) -> None: ...


#: `StoredCatalogSource._ahead` when no read was made ahead
_NOT_READ: Any = object()
#: what a read made ahead hands to `get`: the stored catalog and, when it was decoded there too, the
#: decoded catalog or why it could not be decoded
_Ahead = tuple[StoredCatalog | None, Catalog | CatalogDecodeError | None]


class CatalogUnavailable(RuntimeError):
    """Neither a live catalog nor a shipped snapshot exists for the region (the request is retried)."""


class TextConfigSource:
    """Parses the NodePool/EC2NodeClass YAML returned by `read` (a file's text), re-parsing only when the
    text changes; judged whole by `carpool.api.config.load_config`, as `carpool validate` judges a file (one
    bad document refuses the file: there is nobody to serve the rest to)."""

    def __init__(self, read: Callable[[], str], name: str = "config") -> None:
        self._read = read
        #: what the config's documents are labelled by in an error (the parameter's name when deployed)
        self._name = name
        self._digest = ""
        self._manifests: Manifests | None = None

    def load(self) -> Manifests:
        text = self._read()
        digest = hashlib.sha256(text.encode()).hexdigest()
        if self._manifests is None or digest != self._digest:
            self._manifests = load_config([NamedText(self._name, text)], name=self._name)
            self._digest = digest
        return self._manifests

    def current(self) -> ClusterConfig:
        """`load`'s objects, each with a verdict that finds nothing (a bad file raises instead)."""
        manifests = self.load()
        verdicts: dict[tuple[str, str], ObjectVerdict] = {(c.kind, c.name): ObjectVerdict(c.kind, c.name, "", 0, "") for c in manifests.nodeclasses}
        for pool in manifests.nodepools:
            verdicts[(pool.kind, pool.name)] = ObjectVerdict(pool.kind, pool.name, "", 0, "",
                                                             nodeclass=pool.node_class_name)
        return ClusterConfig(manifests, verdicts)


class StaticCatalogSource:
    """The shipped offline snapshot (used by `plan` and the tests); there is nothing to refresh."""

    def __init__(self, region: str) -> None:
        self._region = region

    def get(self, now: datetime) -> Catalog:
        return Catalog.snapshot(self._region)

    def refresh(self, now: datetime) -> bool:
        return False


class StoredCatalogSource:
    """The live catalog from `store`, decoded once per process; the shipped snapshot while none usable is
    stored (see the module docstring). `fetch(now)` builds a catalog from the live source (EC2); only
    `refresh` calls it, never `get`."""

    def __init__(
        self,
        store: CatalogStore,
        region: str,
        fetch: Callable[[datetime], Catalog] | None = None,
        *,
        refresh_every: timedelta = REFRESH_EVERY,
        max_age: timedelta = MAX_AGE,
        recheck_every: timedelta = RECHECK_EVERY,
    ) -> None:
        self._store = store
        self._region = region
        self._fetch = fetch
        self._refresh_every = refresh_every
        self._max_age = max_age
        self._recheck_every = recheck_every
        self._catalog: Catalog | None = None
        #: when the catalog in hand was built (None: it is the snapshot)
        self._built: datetime | None = None
        self._checked: datetime | None = None
        #: the cold start's store read, made ahead by `read_ahead` (its answer, or what it raised), or
        #: `start_reading`'s thread at work
        self._ahead: _Ahead | Exception | _ReadAndDecode = _NOT_READ

    # -- reading --------------------------------------------------------------------------------------
    def get(self, now: datetime) -> Catalog:
        if self._catalog is None:
            self._load(now)  # cold start: the whole item in one read
        elif self._checked is None or now - self._checked >= self._recheck_every:
            self._recheck(now)
        assert self._catalog is not None
        return self._catalog

    def read_ahead(self) -> None:
        """Make the store read the cold start's `get` needs now, and leave the decoding to `get`.

        Meant for a worker thread, beside the invocation's other reads (`carpool.together`): the read is
        a network wait, but decoding is some fifty milliseconds of Python that, on a worker, would hold
        the interpreter lock against every other reader's thread each time it wakes (and they wake on
        every socket operation). `get` decodes it on its caller's thread once those reads are done. Does
        nothing once a catalog is in hand (a warm process checks for a newer one in `get`, one small read),
        or while `start_reading` is at work."""
        if self._catalog is not None or self._ahead is not _NOT_READ:
            return
        try:
            self._ahead = (self._store.read(self._region), None)
        except Exception as exc:  # raised by `get`, where it would have been raised
            self._ahead = exc

    def start_reading(self) -> None:
        """Read and decode the cold start's catalog on a thread of its own, from now on.

        A cold invocation's first steps (parsing its batch, reading the config, confirming the pods) do
        not need the catalog, and much of their time is spent waiting on the network: the read and the
        decoding (some fifty milliseconds of Python) fill those waits instead of following them. `get` takes
        what the thread found (waiting for it if need be) and judges it as it judges a read of its own
        (age, region). Does nothing once a catalog is in hand or a read was made ahead."""
        if self._catalog is not None or self._ahead is not _NOT_READ:
            return
        self._ahead = _ReadAndDecode(self._store, self._region)

    def finish_reading(self) -> None:
        """Wait for `start_reading`'s thread, if one is at work (an invocation that never asked for the
        catalog ends with no read of it still running; `get` will take its answer)."""
        if isinstance(self._ahead, _ReadAndDecode):
            self._ahead.wait()

    def _read(self) -> _Ahead:
        ahead, self._ahead = self._ahead, _NOT_READ
        if ahead is _NOT_READ:
            return self._store.read(self._region), None
        if isinstance(ahead, _ReadAndDecode):
            ahead = ahead.wait()
        if isinstance(ahead, Exception):
            raise ahead
        return ahead  # type: ignore[no-any-return]

    def _recheck(self, now: datetime) -> None:
        """Warm: read only the stored catalog's build time, and the catalog itself only when it is newer."""
        self._checked = now
        stamp = self._store.refreshed_at(self._region)
        if stamp is None or self._stale(stamp, now):
            if self._built is not None:  # the live one in hand went stale too
                self._fall_back(now, "no fresh live catalog is stored any more")
            return
        if stamp != self._built:
            self._load(now)

    def _load(self, now: datetime) -> None:
        """Read the store: the live catalog when one usable is there, else the snapshot."""
        self._checked = now
        stored, decoded = self._read()
        if stored is None:
            return self._fall_back(now, "no live catalog is stored yet")
        if self._stale(stored.refreshed_at, now):
            return self._fall_back(now, f"the stored catalog was built at {stored.refreshed_at.isoformat()}, "
                                        f"more than {self._max_age} ago")
        try:
            catalog = _decoded(stored, decoded)
        except CatalogDecodeError as exc:
            return self._fall_back(now, f"the stored catalog cannot be read ({exc})")
        if catalog.region != self._region:
            return self._fall_back(now, f"the stored catalog is of region {catalog.region}")
        self._catalog, self._built = catalog, stored.refreshed_at

    def _fall_back(self, now: datetime, why: str) -> None:
        if self._catalog is not None and self._built is None:
            return  # already on the snapshot: said so when switching to it
        try:
            snapshot = Catalog.snapshot(self._region)
        except SnapshotNotFound as exc:
            raise CatalogUnavailable(f"{why}, and {exc}; the disruption function builds it within a minute") from exc
        log.warning("using the shipped instance-type catalog: %s", why)
        observability.emit("CatalogFallbacks")
        self._catalog, self._built = snapshot, None

    def _stale(self, built: datetime | None, now: datetime) -> bool:
        return built is None or now - built > self._max_age

    # -- refreshing -----------------------------------------------------------------------------------
    def refresh(self, now: datetime) -> bool:
        """Rebuild the stored catalog from `fetch` when the newest one is `refresh_every` old (or absent).

        A warm process that built or read a fresh one makes no call at all; otherwise one small read tells
        whether another process refreshed meanwhile."""
        if self._fetch is None:
            return False
        if self._built is not None and now - self._built < self._refresh_every:
            return False
        stamp = self._store.refreshed_at(self._region)
        if stamp is not None and now - stamp < self._refresh_every:
            return False
        catalog = self._fetch(now)
        self._store.write(self._region, StoredCatalog(now, catalog.encode(f"EC2 {catalog.region} at {now.isoformat()}")))
        self._catalog, self._built, self._checked = catalog, now, now
        log.info("instance-type catalog refreshed: %d types", len(catalog))
        return True


def _decoded(stored: StoredCatalog, decoded: Catalog | CatalogDecodeError | None) -> Catalog:
    """`stored` decoded: what a read made ahead decoded already, else decoded here."""
    if isinstance(decoded, CatalogDecodeError):
        raise decoded
    return decoded if decoded is not None else Catalog.decode(stored.data)


class _ReadAndDecode:
    """`StoredCatalogSource.start_reading`'s thread: the store read and the decoding of what it found.

    It runs in a copy of the starter's `contextvars` context (the running function's environment) and
    under its X-Ray entity (`observability.in_this_trace`), so its GetItem is recorded inside the
    invocation as the invocation's other reads are."""

    def __init__(self, store: CatalogStore, region: str) -> None:
        self._store = store
        self._region = region
        self._answer: _Ahead | Exception = RuntimeError("the catalog read ahead ended without an answer")
        context = contextvars.copy_context()
        run = observability.in_this_trace(lambda: context.run(self._run))
        self._thread = threading.Thread(target=run, name="catalog-read-ahead", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            stored = self._store.read(self._region)
        except Exception as exc:  # raised by `get`, where it would have been raised
            self._answer = exc
            return
        decoded: Catalog | CatalogDecodeError | None = None
        if stored is not None:
            try:
                decoded = Catalog.decode(stored.data)
            except CatalogDecodeError as exc:  # `get` falls back and says why
                decoded = exc
        self._answer = (stored, decoded)

    def wait(self) -> _Ahead | Exception:
        self._thread.join()
        return self._answer


@contextmanager
def catalog_read_ahead(source: CatalogSource) -> Iterator[None]:
    """Within the block, the stored catalog is read and decoded beside the invocation's work
    (`StoredCatalogSource.start_reading`); it does not outlive the block. Other sources: nothing to do."""
    start, finish = getattr(source, "start_reading", None), getattr(source, "finish_reading", None)
    if start is None or finish is None:
        yield
        return
    start()
    try:
        yield
    finally:
        finish()


class MemoryCatalogStore:
    """A `CatalogStore` in process memory (tests, and runs without a state table)."""

    def __init__(self) -> None:
        self.items: dict[str, StoredCatalog] = {}

    def read(self, region: str) -> StoredCatalog | None:
        return self.items.get(region)

    def refreshed_at(self, region: str) -> datetime | None:
        found = self.items.get(region)
        return found.refreshed_at if found else None

    def write(self, region: str, stored: StoredCatalog) -> None:
        self.items[region] = stored
