"""The NodePool/EC2NodeClass YAML, read from the SSM parameters the stack writes.

The parameter name comes from `CARPOOL_CONFIG_PARAMETER` (`/carpool/<cluster>/config`). It holds the
YAML itself, or, for a config past one parameter's 8 KB, a pointer to its compressed parts
(`carpool.config_parts`, which says why): the parts are read with GetParameters only when the pointer
changes, and a mix of old and new parts met during a deploy keeps the last good text until the next
read. The value is cached for `max_age` seconds, so a busy Lambda container reads SSM about once a minute, and a config
change reaches every function within a minute without a redeploy. The cache is ours, not Powertools'
(whose expiry reads the wall clock): it keeps time by the dependencies' clock (`follow_clock`), so in a
simulation a minute is a simulated minute. Parsing is the caller's job
(`carpool.app.sources.TextConfigSource` re-parses only when the text changes).
"""

from __future__ import annotations

import logging
from typing import Any

from aws_lambda_powertools.utilities.parameters import SSMProvider
from botocore.exceptions import ClientError

from carpool import config_parts, environment
from carpool.adapters.aws import session
from carpool.clocks import Clock, TtlCache, seconds_of, utc_now

log = logging.getLogger(__name__)

CONFIG_PARAMETER_ENV = "CARPOOL_CONFIG_PARAMETER"
DEFAULT_MAX_AGE_SECONDS = 60
#: SSM's limit on names per GetParameters call
GET_PARAMETERS_MAX = 10


class ConfigNotConfigured(RuntimeError):
    """Neither a parameter name nor `CARPOOL_CONFIG_PARAMETER` was given."""


class SsmConfigText:
    """`read()` -> the config YAML text. Callable, so it can be handed to `TextConfigSource(read=...)`."""

    def __init__(
        self,
        parameter_name: str | None = None,
        max_age: int = DEFAULT_MAX_AGE_SECONDS,
        provider: SSMProvider | None = None,
        clock: Clock = utc_now,
    ) -> None:
        self.parameter_name = parameter_name or environment.get(CONFIG_PARAMETER_ENV, "")
        if not self.parameter_name:
            raise ConfigNotConfigured(
                f"set {CONFIG_PARAMETER_ENV} to the SSM parameter holding the config YAML"
            )
        self.max_age = max_age
        self._provider = provider
        #: the text of the parts last read, by its pointer (parts are read again only when it changes)
        self._assembled: tuple[config_parts.Pointer, str] | None = None
        #: the last text read whole: what a read during a deploy's half-written parts answers
        self._last_good: str | None = None
        #: None: every read goes to SSM (`max_age` 0)
        self._cache = TtlCache(max_age, seconds_of(clock)) if max_age > 0 else None

    def follow_clock(self, clock: Clock) -> None:
        """Expire the cached text by `clock` from now on (the dependencies' clock)."""
        if self._cache is not None:
            self._cache.follow_clock(clock)

    @property
    def provider(self) -> SSMProvider:
        if self._provider is None:
            # Our client, so the endpoint (moto) and retry policy match every other adapter.
            self._provider = SSMProvider(boto3_client=session.client("ssm"))
        return self._provider

    def read(self) -> str:
        try:
            if self._cache is None:
                return self._fetch()
            return self._cache.get_or_load(self.parameter_name, self._fetch)
        except config_parts.ConfigPartsError as exc:
            if self._last_good is None:
                raise
            log.warning("config %s: %s; using the config read before", self.parameter_name, exc)
            return self._last_good  # not cached: the next read tries again

    def _fetch(self) -> str:
        # max_age=0: Powertools keeps nothing, its cache would expire by the wall clock (see above)
        value: Any = self.provider.get(self.parameter_name, max_age=0)
        text = value.decode() if isinstance(value, bytes) else str(value)
        pointer = config_parts.pointer_of(text)
        if pointer is not None:
            text = self._assemble(pointer)
        self._last_good = text
        return text

    def _assemble(self, pointer: config_parts.Pointer) -> str:
        if self._assembled is not None and self._assembled[0] == pointer:
            return self._assembled[1]
        names = [config_parts.part_name(self.parameter_name, i) for i in range(pointer.parts)]
        found: dict[str, str] = {}
        client = self.provider.client
        for start in range(0, len(names), GET_PARAMETERS_MAX):
            try:
                answer = client.get_parameters(Names=names[start : start + GET_PARAMETERS_MAX])
            except ClientError as exc:
                # a deploy adding a part updates the index and the functions' policies independently: the
                # new part may be named before a policy allows it
                code = exc.response.get("Error", {}).get("Code", "")
                raise config_parts.ConfigPartsError(f"config parts unreadable ({code}): {exc}") from exc
            found.update({str(p["Name"]): str(p["Value"]) for p in answer.get("Parameters", [])})
        missing = [n for n in names if n not in found]
        if missing:
            raise config_parts.ConfigPartsError(f"config parts missing (a deploy in progress?): {missing[:3]}")
        text = config_parts.decode(pointer, [found[n] for n in names])
        self._assembled = (pointer, text)
        return text

    __call__ = read

