"""A TTL cache in front of an `AmiSource`.

Each provisioning Lambda invocation resolves the node class's AMIs; SSM and DescribeImages are slow and
throttled, and `@latest` parameters change only when AWS publishes a new image. A warm Lambda container
keeps this cache between invocations. The TTL is explicit and the clock injectable so tests and the
simulation decide what "later" means.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

from carpool.amis.model import AmiSource, parameters

T = TypeVar("T")


class TtlCache:
    """A dict whose entries expire `ttl_seconds` after they were stored (by `clock`, in seconds)."""

    def __init__(self, ttl_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._entries: dict[Hashable, tuple[float, Any]] = {}

    def get_or_load(self, key: Hashable, load: Callable[[], T]) -> T:
        now = self._clock()
        hit = self._entries.get(key)
        if hit is not None and now < hit[0]:
            return hit[1]  # type: ignore[no-any-return]
        value = load()
        self._entries[key] = (now + self.ttl_seconds, value)
        return value

    def peek(self, key: Hashable) -> tuple[Any] | None:
        """The live entry of `key` as a 1-tuple (so a stored None is told from a miss), else None."""
        hit = self._entries.get(key)
        return (hit[1],) if hit is not None and self._clock() < hit[0] else None

    def put(self, key: Hashable, value: Any) -> None:
        self._entries[key] = (self._clock() + self.ttl_seconds, value)

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


class CachedAmiSource:
    """An `AmiSource` that answers repeated questions from a `TtlCache`.

    A missing SSM parameter (None) is cached too: aliases probe variants that do not exist (no neuron
    arm64 build), and asking again every invocation would only spend SSM quota.
    Results are deep-copied out so a caller mutating an image dict cannot poison the cache.
    """

    def __init__(self, source: AmiSource, ttl_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._source = source
        self._cache = TtlCache(ttl_seconds, clock)

    def get_parameter(self, path: str) -> str | None:
        return self._cache.get_or_load(("ssm", path), lambda: self._source.get_parameter(path))

    def get_parameters(self, paths: Iterable[str]) -> dict[str, str | None]:
        """`get_parameter` of each path; the source is asked only for those not cached, together
        (`model.parameters`: one GetParameters where the source can)."""
        wanted = list(dict.fromkeys(paths))
        out: dict[str, str | None] = {}
        missing: list[str] = []
        for path in wanted:
            hit = self._cache.peek(("ssm", path))
            if hit is None:
                missing.append(path)
            else:
                out[path] = hit[0]
        if missing:
            for path, value in parameters(self._source, missing).items():
                self._cache.put(("ssm", path), value)
                out[path] = value
        return {path: out.get(path) for path in wanted}

    def describe_images(
        self,
        image_ids: list[str] | None = None,
        filters: list[dict[str, Any]] | None = None,
        owners: list[str] | None = None,
    ) -> list[dict[str, Any]]:
        key = ("ec2", json.dumps([sorted(image_ids or []), filters or [], sorted(owners or [])], sort_keys=True))
        images = self._cache.get_or_load(
            key, lambda: self._source.describe_images(image_ids=image_ids, filters=filters, owners=owners)
        )
        return copy.deepcopy(images)
