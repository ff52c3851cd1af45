"""The environment variables of the function that is running.

In Lambda a function's configuration is its process environment (`os.environ`, set by the stack), and
that is what `current()` answers there. A simulation runs every function of a cluster, and possibly
several simulations at once, in one process: each simulated function gets the mapping the stack would
give it, installed with `using(...)` for as long as it runs. Everything that reads carpool's
configuration (`carpool.app.settings`, the AWS session, the adapters' defaults) reads it through here,
so two simulations never see each other's tables, endpoints or clusters.

The mapping is held in a `contextvars.ContextVar`: it follows the thread (or task) that installed it, and
a thread started on the function's behalf sees it when started with a copy of the context
(`contextvars.copy_context().run`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from contextvars import ContextVar

_installed: ContextVar[Mapping[str, str] | None] = ContextVar("carpool_environment", default=None)


def current() -> Mapping[str, str]:
    """The running function's environment: the installed mapping, else the process's."""
    env = _installed.get()
    return os.environ if env is None else env


def get(name: str, default: str = "") -> str:
    """One variable of the running function's environment ("" when unset, as a shell reads it)."""
    return current().get(name, default)


def installed() -> bool:
    """Whether a mapping is installed (a simulated function), rather than the process environment."""
    return _installed.get() is not None


@contextlib.contextmanager
def using(env: Mapping[str, str]) -> Iterator[Mapping[str, str]]:
    """Run the block as a function whose environment is `env` (read live: later changes to a mutable
    mapping are seen, as a stack update would set them for the next cold start)."""
    token = _installed.set(env)
    try:
        yield env
    finally:
        _installed.reset(token)
