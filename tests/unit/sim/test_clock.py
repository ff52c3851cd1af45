from datetime import UTC, datetime, timedelta

import pytest

from carpool.sim.clock import EPOCH, SimClock


def test_starts_at_fixed_epoch_so_runs_are_reproducible():
    assert SimClock().now() == EPOCH == SimClock().now()
    assert EPOCH.tzinfo is not None


def test_advance_moves_now_and_elapsed():
    clock = SimClock()
    clock.advance(90)
    clock.advance(0.5)
    assert clock.now() == EPOCH + timedelta(seconds=90.5)
    assert clock.elapsed == 90.5
    assert clock() == clock.now()  # callable: usable as Dependencies.clock


def test_at_is_relative_to_start():
    clock = SimClock(datetime(2030, 1, 1, tzinfo=UTC))
    assert clock.at(60) == datetime(2030, 1, 1, 0, 1, tzinfo=UTC)


def test_refuses_to_go_back_or_naive_start():
    with pytest.raises(ValueError, match="negative"):
        SimClock().advance(-1)
    with pytest.raises(ValueError, match="timezone"):
        SimClock(datetime(2030, 1, 1))
