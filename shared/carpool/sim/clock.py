"""Simulated time.

Every decision in carpool takes its time from an injected clock, so the simulation can run an hour of
cluster life in seconds. The clock starts at a fixed instant so two runs of one scenario produce the
same timeline, the same claim names and the same report.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

#: A fixed, arbitrary start: reproducible runs need a reproducible "now".
EPOCH = datetime(2025, 1, 6, 9, 0, 0, tzinfo=UTC)
#: The clock keeps microseconds (`timedelta`): a moment within this of another is that moment.
RESOLUTION = 1e-6


def reached(now: float, due: float) -> bool:
    """Whether simulated time `now` has reached `due`, to the clock's resolution (a sum of floats such as
    `registered_at + registration_seconds` may land a hair past the microsecond the clock can show)."""
    return now + RESOLUTION >= due


class SimClock:
    """A clock that only moves when told to. Callable, so it can be passed where `Callable[[], datetime]`
    is expected (`Dependencies.clock`)."""

    def __init__(self, start: datetime = EPOCH) -> None:
        if start.tzinfo is None:
            raise ValueError("SimClock needs a timezone-aware start time")
        self._start = start
        self._now = start

    def now(self) -> datetime:
        return self._now

    def __call__(self) -> datetime:
        return self._now

    @property
    def start(self) -> datetime:
        return self._start

    @property
    def elapsed(self) -> float:
        """Seconds since the start of the simulation (what scenarios' `at:` refer to)."""
        return (self._now - self._start).total_seconds()

    def advance(self, seconds: float) -> datetime:
        """Move time forward; going backwards would break TTLs and ordering, so it is refused."""
        if seconds < 0:
            raise ValueError(f"cannot advance the clock by a negative amount ({seconds}s)")
        self._now += timedelta(seconds=seconds)
        return self._now

    def at(self, seconds: float) -> datetime:
        """The absolute time `seconds` after the start."""
        return self._start + timedelta(seconds=seconds)
