"""boto3 clients for every carpool adapter: created lazily, cached per process, one retry policy.

Why a module of its own:
- A Lambda container lives for many invocations; creating a client costs tens of milliseconds (it loads
  the service model), so clients are made on first use and then reused.
- `AWS_ENDPOINT_URL` points every client at the local moto server in tests and in the simulation. boto3
  honours the variable by itself, but reading it here makes the switch explicit, and keying the cache on it
  means a process that changes endpoint (a test session starting its server) never gets a stale client.
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
from collections.abc import Hashable
from typing import Any

import boto3
from botocore.config import Config

#: Attempts per call (the first included) for every client unless a caller asks otherwise.
DEFAULT_MAX_ATTEMPTS = 3
#: botocore's retry mode (see the module docstring for why not "adaptive")
RETRY_MODE = "standard"
CONNECT_TIMEOUT_SECONDS = 5
READ_TIMEOUT_SECONDS = 30

_lock = threading.Lock()
_clients: dict[Hashable, Any] = {}
_session: boto3.session.Session | None = None


def endpoint_url() -> str | None:
    """The endpoint every client uses: `AWS_ENDPOINT_URL` when set (local moto), else AWS's own."""
    return os.environ.get("AWS_ENDPOINT_URL") or None


def region_name() -> str:
    """The region from the Lambda runtime (`AWS_REGION`) or the usual SDK variable."""
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


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
    """One boto3 session per process (credentials are resolved once and refreshed by botocore)."""
    global _session
    with _lock:
        if _session is None:
            _session = boto3.session.Session()
        return _session


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
    key = (service, region, endpoint, max_attempts, connect_timeout, read_timeout)
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


def reset() -> None:
    """Forget every client and the session (tests that switch endpoint or credentials)."""
    global _session
    with _lock:
        _clients.clear()
        _session = None
