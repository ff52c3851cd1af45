"""SSM Parameter Store reads for AMI aliases (`/aws/service/...` image ids) with a short per-process cache.

A provisioning round resolves the same handful of alias parameters every time; they change when AWS
publishes a new AMI (days apart), so caching them for a few minutes saves a call per parameter per
invocation without delaying an AMI update noticeably. A missing parameter is an answer, not an error
(the variant is not published for that version/arch), so it is cached too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from carpool.adapters.aws import session

DEFAULT_MAX_AGE_SECONDS = 300.0


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
        self._cache: dict[str, tuple[float, str | None]] = {}

    def get_parameter(self, path: str) -> str | None:
        now = self._clock()
        hit = self._cache.get(path)
        if hit is not None and now - hit[0] < self._max_age:
            return hit[1]
        value = self._fetch(path)
        self._cache[path] = (now, value)
        return value

    def _fetch(self, path: str) -> str | None:
        try:
            return str(self.client.get_parameter(Name=path)["Parameter"]["Value"])
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") == "ParameterNotFound":
                return None
            raise

    def clear(self) -> None:
        self._cache.clear()
