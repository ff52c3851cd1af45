"""Karpenter's scheduling and provider test cases (YAML under cases/), each through `carpool plan`'s path.

A case marked `xfail` is a known carpool bug (strict: once fixed, the marker must go); a case marked
`intendedDifference` checks carpool's documented behaviour and must name a row of docs/conformance.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conformance import runner

FILES = runner.case_files()
ROWS = runner.difference_rows()


def _param(path: Path) -> object:
    case = runner.load_case(path)
    marks = [pytest.mark.xfail(strict=True, reason=str(case["xfail"]))] if case.get("xfail") else []
    return pytest.param(case, id=runner.case_id(path), marks=marks)


@pytest.mark.parametrize("case", [_param(p) for p in FILES])
def test_case(case: dict) -> None:
    row = case.get("intendedDifference")
    assert row is None or row in ROWS, f"intendedDifference {row!r} is no row of docs/conformance.md"
    failures = runner.check_case(case)
    assert not failures, "\n".join(failures)


def test_every_case_names_its_go_test() -> None:
    for path in FILES:
        case = runner.load_case(path)
        assert case["source"].endswith((".go",)), f"{path}: source must be the Go test file"
        assert " > " in case["test"], f"{path}: test must be the full Ginkgo path (Describe > ... > It)"
