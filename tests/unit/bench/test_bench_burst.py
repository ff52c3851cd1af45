"""The burst row is the median of fresh runs, lists each, and counts the run that scheduled fewest pods."""

from __future__ import annotations

from typing import Any

import pytest
from bench import burst


def _result(wall: float, scheduled: int = 10_000) -> dict[str, Any]:
    return {"wallSeconds": wall, "pods": {"scheduled": scheduled, "total": 10_000},
            "instances": [{}] * 20, "invocations": {"provisioner": 10}}


def test_row_is_the_median_run_and_a_short_run_is_not_hidden(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    runs = iter([_result(31.0), _result(24.0, scheduled=9_990), _result(26.5)])
    monkeypatch.setattr(burst, "run_once", lambda: next(runs))
    (row,) = burst.rows(runs=3)
    assert row["wallSeconds"] == 26.5
    assert row["runsWallSeconds"] == [31.0, 24.0, 26.5]
    assert row["scheduled"] == 9_990
    burst.print_rows([row])
    line = capsys.readouterr().out.strip()
    assert "MISSED" in line and "(median of 3: 31.0, 24.0, 26.5 s)" in line
