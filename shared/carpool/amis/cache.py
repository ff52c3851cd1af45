"""A TTL cache in front of an `AmiSource`.

Each provisioning Lambda invocation resolves the node class's AMIs; SSM and DescribeImages are slow and
throttled, and `@latest` parameters change only when AWS publishes a new image. A warm Lambda container
keeps this cache between invocations. The TTL is explicit and the clock injected (`follow_clock`: the
dependencies' clock) so tests and the simulation decide what "later" means.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Iterable
from typing import Any

from carpool.amis.model import AmiSource, parameters
from carpool.clocks import Clock, TtlCache, follow

__all__ = ["CachedAmiSource", "TtlCache"]


class CachedAmiSource:
    """An `AmiSource` that answers repeated questions from a `TtlCache`.

    A missing SSM parameter (None) is cached too: aliases probe variants that do not exist (no neuron
    arm64 build), and asking again every invocation would only spend SSM quota.
    Results are deep-copied out so a caller mutating an image dict cannot poison the cache.
    """

    def __init__(self, source: AmiSource, ttl_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._source = source
        self._cache = TtlCache(ttl_seconds, clock)

    def follow_clock(self, clock: Clock) -> None:
        """Expire by `clock` from now on, and so does the source's own cache if it keeps one
        (`carpool.clocks`: the dependencies' clock, simulated in a simulation)."""
        self._cache.follow_clock(clock)
        follow(self._source, clock)

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
