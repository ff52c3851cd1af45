"""SSM Parameter Store reads for AMI aliases (`/aws/service/...` image ids) with a short per-process cache.

A provisioning round resolves the same handful of alias parameters every time; they change when AWS
publishes a new AMI (days apart), so caching them for a few minutes saves a call per parameter per
invocation without delaying an AMI update noticeably. A missing parameter is an answer, not an error
(the variant is not published for that version/arch), so it is cached too.

An alias names several parameters at once (one per architecture and variant), so `get_parameters` reads
those the cache lacks with GetParameters, up to `GET_PARAMETERS_MAX` names a call (SSM's limit), instead
of one GetParameter each: a cold start pays one round trip for them, not five. GetParameters lists the
names that do not exist under `InvalidParameters` rather than failing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from botocore.exceptions import ClientError

from carpool.adapters.aws import session
from carpool.clocks import Clock, seconds_of

DEFAULT_MAX_AGE_SECONDS = 300.0
#: SSM's limit on names per GetParameters call.
GET_PARAMETERS_MAX = 10


class SsmParameters:
    """`get_parameter(path) -> str | None` (ParameterNotFound -> None), cached for `max_age` seconds."""

    def __init__(
        self,
        client: Any | None = None,
        max_age: float = DEFAULT_MAX_AGE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client if client is not None else session.client("ssm")
        self._max_age = max_age
        self._clock = clock
        self._following: Clock | None = None
        self._cache: dict[str, tuple[float, str | None]] = {}

    def follow_clock(self, clock: Clock) -> None:
        """Expire by `clock` (the dependencies' clock) from now on; on another clock than before, what was
        read is dropped, its times being another clock's."""
        if clock is not self._following:
            self._following, self._clock = clock, seconds_of(clock)
            self._cache.clear()

    def get_parameter(self, path: str) -> str | None:
        now = self._clock()
        hit = self._cache.get(path)
        if hit is not None and now - hit[0] < self._max_age:
            return hit[1]
        value = self._fetch(path)
        self._cache[path] = (now, value)
        return value

    def get_parameters(self, paths: Iterable[str]) -> dict[str, str | None]:
        """`get_parameter` of each path (None: it does not exist), the uncached ones read together."""
        now = self._clock()
        out: dict[str, str | None] = {}
        missing: list[str] = []
        for path in dict.fromkeys(paths):
            hit = self._cache.get(path)
            if hit is not None and now - hit[0] < self._max_age:
                out[path] = hit[1]
            else:
                missing.append(path)
        for start in range(0, len(missing), GET_PARAMETERS_MAX):
            chunk = missing[start : start + GET_PARAMETERS_MAX]
            found = self._fetch_many(chunk)
            for path in chunk:
                out[path] = found.get(path)
                self._cache[path] = (now, out[path])
        return out

    def _fetch_many(self, paths: list[str]) -> dict[str, str]:
        answer = self.client.get_parameters(Names=paths)
        return {str(p["Name"]): str(p["Value"]) for p in answer.get("Parameters", [])}

    def _fetch(self, path: str) -> str | None:
        try:
            return str(self.client.get_parameter(Name=path)["Parameter"]["Value"])
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") == "ParameterNotFound":
                return None
            raise

    def clear(self) -> None:
        self._cache.clear()
