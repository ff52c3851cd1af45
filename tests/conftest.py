"""Test-session order: files that play whole simulations run first.

`make test` is one pytest process whose two xdist workers take a test file at a time, in collection
order (`--dist loadfile --no-loadscope-reorder`). A simulation file takes from half a minute to a few
minutes, most others a few seconds: handed out first, the long ones overlap each other and the short ones fill the gaps, instead of
one worker finishing a long file alone at the end. Only the order changes, never what runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
#: Longest first: the 10,000-pod burst, the IAM check (two scenarios), the isolation runs (six), the
#: runtime reliability seeds, then every other e2e file (one scenario each).
FIRST = ("e2e/test_burst_10k.py", "infra/test_iam_requests.py", "e2e/test_isolation.py",
         "integration/test_runtime_reliability.py", "e2e/")


def _rank(item: pytest.Item) -> int:
    try:
        where = item.path.resolve().relative_to(TESTS).as_posix()
    except ValueError:
        return len(FIRST)
    return next((i for i, prefix in enumerate(FIRST) if where.startswith(prefix)), len(FIRST))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_rank)  # stable: files keep their order within a rank, tests within a file
