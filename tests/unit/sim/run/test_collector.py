"""The simulation collects garbage less often while it runs, and puts the collector back afterwards."""

from __future__ import annotations

import gc

from carpool.sim.run import collector


def test_a_run_tunes_the_collector_and_restores_it() -> None:
    before = gc.get_threshold()
    frozen_before = gc.get_freeze_count()
    with collector.quiet_collector():
        assert gc.get_threshold() == collector.THRESHOLDS
        assert gc.get_freeze_count() > frozen_before  # what existed before the run is left alone
        garbage: list[object] = []
        garbage.append(garbage)  # a reference cycle made during the run...
        del garbage
        assert gc.collect() >= 1  # ...is still collectable
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_overlapping_runs_restore_the_collector_when_the_last_one_ends() -> None:
    before = gc.get_threshold()
    first, second = collector.quiet_collector(), collector.quiet_collector()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert gc.get_threshold() == collector.THRESHOLDS  # the second run is still going
    second.__exit__(None, None, None)
    assert gc.get_threshold() == before


def test_the_collector_is_restored_when_a_run_fails() -> None:
    before = gc.get_threshold()
    try:
        with collector.quiet_collector():
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
