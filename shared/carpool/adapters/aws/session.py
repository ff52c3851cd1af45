"""boto3 clients for every carpool adapter: created lazily, cached per environment, one retry policy.

Why a module of its own:
- A Lambda container lives for many invocations; creating a client costs tens of milliseconds (it loads
  the service model), so clients are made on first use and then reused.
- `AWS_ENDPOINT_URL` points every client at the local moto server in tests and in the simulation. boto3
  honours the variable by itself, but reading it here makes the switch explicit, and keying the cache on it
  means a process that changes endpoint (a test session starting its server) never gets a stale client.
- The environment is the running function's (`carpool.environment`): `os.environ` in Lambda, the mapping
  the stack would set in a simulation. Sessions and clients are cached per environment (endpoint,
  region, credentials), so two simulations running in one process each talk to their own local AWS
  with their own credentials, and hooks one puts on its session never see the other's requests.
- Clients of EC2, SSM and DynamoDB are built from carpool's cut-down copies of their service models
  (`service_models`: the operations carpool calls, no documentation), which botocore parses in a few
  milliseconds where EC2's full model alone takes a large share of a cold start. Their timestamps are
  parsed by the standard library (`timestamps`), not dateutil: the catalog's spot prices carry thousands.
- One retry layer, botocore's own "standard" mode, with few attempts: throttling and transient errors
  (RequestLimitExceeded, ProvisionedThroughputExceeded, 5xx, timeouts) are retried with jittered
  exponential backoff, at most 1 s + 2 s of sleep per call with 3 attempts. carpool's adapters do not
  wrap these calls in retry loops of their own (which would multiply: 5 of carpool's around 5 of
  botocore's took 100 s for one throttled CreateFleet), so a provisioner can bound what one claim costs
  and answer before its Lambda timeout; what still fails is retried by SQS redelivery and the watcher's
  next resync. "adaptive" mode is not used: its client-side rate limiter sleeps before sending, for
  as long as it decides, which no deadline can account for.

boto3 clients are thread-safe once built; building them is not, hence the lock.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, overload

import boto3
import botocore.loaders
import botocore.session
from botocore.config import Config
from botocore.exceptions import DataNotFoundError

from carpool import environment
from carpool.adapters.aws import timestamps
from carpool.adapters.aws.service_models import DATA_PATH

#: Attempts per call (the first included) for every client unless a caller asks otherwise.
DEFAULT_MAX_ATTEMPTS = 3
#: botocore's retry mode (see the module docstring for why not "adaptive")
RETRY_MODE = "standard"
CONNECT_TIMEOUT_SECONDS = 5
READ_TIMEOUT_SECONDS = 30

#: The variables that make two environments need different sessions (and so different clients).
_IDENTITY = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE")

_lock = threading.Lock()
#: (environment identity, service, region, endpoint, retry and timeout settings) -> client
_clients: dict[tuple[Hashable, ...], Any] = {}
#: environment identity -> session
_sessions: dict[tuple[str | None, ...], boto3.session.Session] = {}


def endpoint_url() -> str | None:
    """The endpoint every client uses: `AWS_ENDPOINT_URL` when set (local moto), else AWS's own."""
    return environment.get("AWS_ENDPOINT_URL") or None


def region_name() -> str:
    """The region from the Lambda runtime (`AWS_REGION`) or the usual SDK variable."""
    return environment.get("AWS_REGION") or environment.get("AWS_DEFAULT_REGION") or "us-east-1"


def _identity(env: Mapping[str, str]) -> tuple[str | None, ...]:
    return tuple(env.get(name) or None for name in _IDENTITY)


def config(
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    connect_timeout: float = CONNECT_TIMEOUT_SECONDS,
    read_timeout: float = READ_TIMEOUT_SECONDS,
) -> Config:
    """The botocore configuration shared by all clients (bounded standard retries and timeouts)."""
    return Config(
        # `total_max_attempts` counts the first attempt; botocore's `max_attempts` would count retries only
        retries={"mode": RETRY_MODE, "total_max_attempts": max_attempts},
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        user_agent_extra="carpool",
    )


def session() -> boto3.session.Session:
    """One boto3 session per environment, i.e. per process in Lambda (credentials are resolved once and
    refreshed by botocore)."""
    key = _identity(environment.current())
    with _lock:
        found = _sessions.get(key)
        if found is None:
            found = _sessions[key] = _new_session()
        return found


def _new_session() -> boto3.session.Session:
    """From the process environment (botocore's own credential chain), or from an installed mapping: its
    credentials, and only its profile (a developer's `AWS_PROFILE` is not the simulated function's)."""
    core = _core_session()
    if not environment.installed():
        return boto3.session.Session(botocore_session=core)
    env = environment.current()
    # an override, so that None means no profile rather than falling back to os.environ's
    core.get_component("config_store").set_config_variable("profile", env.get("AWS_PROFILE") or None)
    return boto3.session.Session(
        aws_access_key_id=env.get("AWS_ACCESS_KEY_ID"),
        aws_secret_access_key=env.get("AWS_SECRET_ACCESS_KEY"),
        aws_session_token=env.get("AWS_SESSION_TOKEN"),
        botocore_session=core,
    )


def _core_session() -> botocore.session.Session:
    """A botocore session whose loader finds carpool's cut-down service models (`service_models`) before
    botocore's own: it reads the first `<service>/<version>/service-2.json` on its search path."""
    core = botocore.session.Session()
    loader = core.get_component("data_loader")
    loader.search_paths.insert(0, str(DATA_PATH))
    _answer_per_service(loader)
    timestamps.install(core)
    return core


def _answer_per_service(loader: botocore.loaders.Loader) -> None:
    """Have `loader` tell whether a service exists from that service's own directories.

    Before loading a model, botocore checks the service against `list_available_services(type)`, which
    lists every directory of every search path and each one's versions (over 900 `listdir` calls for the
    400-odd services botocore ships), once per data type: the first client of a cold start paid that
    twice (service models, endpoint rule sets). The answer is the same: a service is available for a
    type when one of its versions has that type's file, which is what `list_api_versions` checks."""
    listing = loader.list_available_services  # botocore's own, for whoever wants the whole list

    def list_available_services(type_name: str) -> _AvailableServices:
        return _AvailableServices(loader, type_name, listing)

    loader.list_available_services = list_available_services  # type: ignore[method-assign]


class _AvailableServices(Sequence[str]):
    """botocore's sorted list of the services that have `type_name` data, made only if iterated; `in`
    looks at the one service asked about."""

    def __init__(self, loader: botocore.loaders.Loader, type_name: str, listing: Callable[[str], list[str]]) -> None:
        self._loader = loader
        self._type_name = type_name
        self._listing = listing

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str) or not name or os.sep in name or name.startswith("."):
            return name in self._listing(self._type_name)
        try:
            return bool(self._loader.list_api_versions(name, self._type_name))
        except DataNotFoundError:
            return False

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self._listing(self._type_name)[index]

    def __len__(self) -> int:
        return len(self._listing(self._type_name))


def client(
    service: str,
    *,
    region: str | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    connect_timeout: float = CONNECT_TIMEOUT_SECONDS,
    read_timeout: float = READ_TIMEOUT_SECONDS,
    use_endpoint: bool = True,
) -> Any:
    """A cached boto3 client for `service`.

    `use_endpoint=False` ignores `AWS_ENDPOINT_URL` (for a service moto does not have, such as EKS in a
    real deployment behind a local override); it is rarely what you want.
    """
    region = region or region_name()
    endpoint = endpoint_url() if use_endpoint else None
    key = (_identity(environment.current()), service, region, endpoint, max_attempts, connect_timeout, read_timeout)
    cached = _clients.get(key)
    if cached is not None:
        return cached
    sess = session()
    with _lock:
        cached = _clients.get(key)
        if cached is None:
            cached = sess.client(
                service,  # type: ignore[call-overload]
                region_name=region,
                endpoint_url=endpoint,
                config=config(max_attempts, connect_timeout, read_timeout),
            )
            _clients[key] = cached
        return cached


def clients() -> list[Any]:
    """The clients built so far for the running function's environment (to hook them like its session)."""
    identity = _identity(environment.current())
    with _lock:
        return [c for key, c in _clients.items() if key[0] == identity]


def reset(env: Mapping[str, str] | None = None) -> None:
    """Forget the sessions and clients of `env`'s identity (a local AWS that stopped), or with None every
    one of them (tests that switch endpoint or credentials)."""
    with _lock:
        if env is None:
            _clients.clear()
            _sessions.clear()
            return
        identity = _identity(env)
        _sessions.pop(identity, None)
        for key in [k for k in _clients if k[0] == identity]:
            del _clients[key]
