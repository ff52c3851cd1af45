"""e2e: scenarios from examples/ run through the real handlers, local AWS (moto on 127.0.0.1) and the
simulated cluster. Each scenario runs once per test module; the tests then assert on its outcome."""

from __future__ import annotations

from pathlib import Path

import pytest

from carpool.sim.result import Instance, SimResult
from carpool.sim.runner import simulate
from carpool.sim.scenario import load_scenario

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(name: str) -> SimResult:
    return simulate(load_scenario(EXAMPLES / name))


def registered(result: SimResult) -> list[Instance]:
    """Instances whose node joined the cluster."""
    return [i for i in result.launches if i.node_name]


@pytest.fixture(scope="module")
def scenario_result(request: pytest.FixtureRequest) -> SimResult:
    """The result of the module's `SCENARIO` (one run shared by the module's tests)."""
    return run(request.module.SCENARIO)
