"""The clock every per-process cache keeps time by.

A cache that expires by time (the config's list, AMI parameters and images, launch templates, subnets)
must expire by the same clock the decisions are made on (`Dependencies.clock`): in Lambda that is the
wall clock, in a simulation the simulated one, which runs an hour in seconds. A cache that read the wall
clock itself would, in a simulation, hold a config or an AMI for the whole run and hide every change the
scenario makes.

Adapters built before the clock is known (the production wiring builds them, the simulation swaps the
clock afterwards with `dataclasses.replace`) implement `FollowsClock`; `Dependencies` hands its clock to
each of its parts that does, whenever a `Dependencies` is made.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar, runtime_checkable

#: What `Dependencies.clock` is: the current time, timezone-aware.
Clock = Callable[[], datetime]

T = TypeVar("T")


def utc_now() -> datetime:
    """The wall clock: what `Dependencies.clock` is in Lambda."""
    return datetime.now(UTC)


@runtime_checkable
class FollowsClock(Protocol):
    """A part whose caches expire by time, told which clock to keep it by."""

    def follow_clock(self, clock: Clock) -> None:
        """Keep time by `clock` from now on."""
        ...


def follow(part: object, clock: Clock) -> None:
    """Hand `clock` to `part` if it keeps time (see `FollowsClock`); anything else is left alone."""
    if isinstance(part, FollowsClock):
        part.follow_clock(clock)


def seconds_of(clock: Clock) -> Callable[[], float]:
    """`clock` in POSIX seconds, for the caches that count seconds."""
    return lambda: clock().timestamp()


class TtlCache:
    """A dict whose entries expire `ttl_seconds` after they were stored (by `clock`, in seconds): an entry
    stored at t is served while the clock reads less than t + ttl, and reloaded from then on."""

    def __init__(self, ttl_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._following: Clock | None = None
        self._entries: dict[Hashable, tuple[float, Any]] = {}

    def follow_clock(self, clock: Clock) -> None:
        """Keep time by `clock` from now on. On another clock than before, what was stored is dropped: its
        expiry was counted on the old clock, whose seconds mean nothing on the new one (a simulated clock
        starts in the past)."""
        if clock is self._following:
            return
        self._following, self._clock = clock, seconds_of(clock)
        self._entries.clear()

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
