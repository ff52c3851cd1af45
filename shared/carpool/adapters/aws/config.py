"""The NodePool/EC2NodeClass YAML, read from the SSM parameter the stack writes.

The parameter name comes from `CARPOOL_CONFIG_PARAMETER` (`/carpool/<cluster>/config`). The value is
cached for `max_age` seconds, so a busy Lambda container reads SSM about once a minute, and a config
change reaches every function within a minute without a redeploy. The cache is ours, not Powertools'
(whose expiry reads the wall clock): it keeps time by the dependencies' clock (`follow_clock`), so in a
simulation a minute is a simulated minute. Parsing is the caller's job
(`carpool.app.sources.TextConfigSource` re-parses only when the text changes).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.parameters import SSMProvider

from carpool import environment
from carpool.adapters.aws import session
from carpool.clocks import Clock, TtlCache, seconds_of, utc_now

CONFIG_PARAMETER_ENV = "CARPOOL_CONFIG_PARAMETER"
DEFAULT_MAX_AGE_SECONDS = 60


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
        if self._cache is None:
            return self._fetch()
        return self._cache.get_or_load(self.parameter_name, self._fetch)

    def _fetch(self) -> str:
        # max_age=0: Powertools keeps nothing, its cache would expire by the wall clock (see above)
        value: Any = self.provider.get(self.parameter_name, max_age=0)
        return value.decode() if isinstance(value, bytes) else str(value)

    __call__ = read


_readers: dict[str, SsmConfigText] = {}


def read_config_text(parameter_name: str | None = None, max_age: int = DEFAULT_MAX_AGE_SECONDS) -> str:
    """The config YAML from SSM, through one cached reader per parameter name for the whole process."""
    name = parameter_name or environment.get(CONFIG_PARAMETER_ENV, "")
    reader = _readers.get(name)
    if reader is None:
        reader = _readers[name] = SsmConfigText(name or None, max_age)
    return reader.read()
