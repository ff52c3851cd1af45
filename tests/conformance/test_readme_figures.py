"""The conformance line the README quotes is the one `make conformance` prints, less its timing.

The counts are read from the cases' markers, not by running them: `test_conformance.py` runs every case and
fails unless it passes (an `intendedDifference` case checks carpool's documented behaviour, an `xfail` case is
strict), so with it green each case's status is its marker, as `runner.status` says.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from tests.conformance import runner

README = Path(__file__).resolve().parents[2] / "README.md"
#: `runner.main`'s summary, as far as its timing, which the README's copy may keep or drop
SUMMARY = re.compile(r"^conformance: \d+ passed, .* total\b")


def expected_summary() -> str:
    counts = Counter(runner.status(runner.load_case(path), []) for path in runner.case_files())
    total = sum(counts.values())
    return (f"conformance: {counts['passed']} passed, {counts['intended']} intended differences, "
            f"{counts['xfail']} known library bugs (xfail), 0 failed, {total} total")


def quoted_summaries(markdown: str) -> list[str]:
    return [m.group(0) for line in markdown.splitlines() if (m := SUMMARY.match(line.strip()))]


def test_the_readme_quotes_what_make_conformance_prints() -> None:
    quoted = quoted_summaries(README.read_text())
    assert quoted, "README.md quotes no `make conformance` summary line"
    assert quoted == [expected_summary()] * len(quoted)


def test_the_readme_counts_the_intended_differences_it_quotes() -> None:
    """The sentence after the quote: how many intended-difference cases, of how many documented behaviours."""
    intended = sum(1 for p in runner.case_files() if runner.load_case(p).get("intendedDifference"))
    rows = len(runner.difference_rows())
    assert f"The {intended} intended differences are cases of the {rows} behaviours" in README.read_text()
