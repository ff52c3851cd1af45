"""Where the use cases get their slowly-changing inputs: the NodePool/EC2NodeClass config and the
instance-type catalog. Both are cached per process (a Lambda container), since they change rarely and
reading them is the expensive part of a cold invocation."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Protocol

from carpool.api.loader import Manifests, load
from carpool.catalog import Catalog

log = logging.getLogger(__name__)


class ConfigSource(Protocol):
    def load(self) -> Manifests: ...


class CatalogSource(Protocol):
    def get(self, now: datetime) -> Catalog: ...


class TextConfigSource:
    """Parses the NodePool/EC2NodeClass YAML returned by `read` (an SSM parameter, a file), re-parsing only
    when the text changes."""

    def __init__(self, read: Callable[[], str]) -> None:
        self._read = read
        self._digest = ""
        self._manifests: Manifests | None = None

    def load(self) -> Manifests:
        text = self._read()
        digest = hashlib.sha256(text.encode()).hexdigest()
        if self._manifests is None or digest != self._digest:
            self._manifests = load([text])
            self._digest = digest
        return self._manifests


class StaticCatalogSource:
    """The shipped offline snapshot (used by `plan` and when EC2 cannot be read)."""

    def __init__(self, region: str) -> None:
        self._region = region

    def get(self, now: datetime) -> Catalog:
        return Catalog.snapshot(self._region)


class Ec2CatalogSource:
    """Live catalog from DescribeInstanceTypes/Offerings + prices, refreshed every `ttl` (spot prices move
    slowly; Karpenter refreshes every 12 h). `fetch` returns the keyword arguments of
    `carpool.catalog.builder.from_ec2`."""

    def __init__(self, fetch: Callable[[], dict[str, Any]], ttl: timedelta = timedelta(hours=12)) -> None:
        self._fetch = fetch
        self._ttl = ttl
        self._catalog: Catalog | None = None
        self._at: datetime | None = None

    def get(self, now: datetime) -> Catalog:
        if self._catalog is None or self._at is None or now - self._at > self._ttl:
            from carpool.catalog import builder

            self._catalog = builder.from_ec2(**self._fetch())
            self._at = now
        return self._catalog
