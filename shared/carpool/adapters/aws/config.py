"""The NodePool/EC2NodeClass YAML, read from the SSM parameter the stack writes.

The parameter name comes from `CARPOOL_CONFIG_PARAMETER` (`/carpool/<cluster>/config`). Powertools'
parameter provider caches the value for `max_age` seconds, so a busy Lambda container reads SSM about once
a minute, and a config change reaches every function within a minute without a redeploy. Parsing is the
caller's job (`carpool.app.sources.TextConfigSource` re-parses only when the text changes).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.parameters import SSMProvider

from carpool import environment
from carpool.adapters.aws import session

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
    ) -> None:
        self.parameter_name = parameter_name or environment.get(CONFIG_PARAMETER_ENV, "")
        if not self.parameter_name:
            raise ConfigNotConfigured(
                f"set {CONFIG_PARAMETER_ENV} to the SSM parameter holding the config YAML"
            )
        self.max_age = max_age
        self._provider = provider

    @property
    def provider(self) -> SSMProvider:
        if self._provider is None:
            # Our client, so the endpoint (moto) and retry policy match every other adapter.
            self._provider = SSMProvider(boto3_client=session.client("ssm"))
        return self._provider

    def read(self) -> str:
        value: Any = self.provider.get(self.parameter_name, max_age=self.max_age)
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
