"""The disruption function reads every pod once per execution environment, not once a minute: each later
run catches up from the watch (`carpool.app.pod_snapshot`), and still sees every change (the scenario
consolidates: a pod that moved is where the pass thinks it is, or a drain would go wrong)."""

from __future__ import annotations

from typing import Any

import pytest

from carpool.sim.cluster.simulated import SimulatedCluster

from .conftest import run

SCENARIO = "009-flex-shortage-consolidation.yaml"


@pytest.fixture(scope="module")
def reads() -> dict[str, Any]:
    counts = {"lists": 0, "catch_ups": 0}
    listed, caught_up = SimulatedCluster.pod_views_versioned, SimulatedCluster.pod_view_changes
    patch = pytest.MonkeyPatch()

    def counting_list(self: SimulatedCluster) -> Any:
        counts["lists"] += 1
        return listed(self)

    def counting_catch_up(self: SimulatedCluster, since: str) -> Any:
        counts["catch_ups"] += 1
        return caught_up(self, since)

    patch.setattr(SimulatedCluster, "pod_views_versioned", counting_list)
    patch.setattr(SimulatedCluster, "pod_view_changes", counting_catch_up)
    try:
        result = run(SCENARIO)
    finally:
        patch.undo()
    return {**counts, "result": result}


def test_every_pod_is_listed_once_an_environment_and_caught_up_after(reads: dict[str, Any]) -> None:
    result = reads["result"]
    runs = result.invocations["disruption"]
    assert runs >= 15  # the scenario's 18 minutes, a run a minute
    # one disruption environment lives through the scenario (each run within its idle time and lifetime)
    assert reads["lists"] == 1
    assert reads["catch_ups"] >= runs - 1


def test_the_pass_acting_on_caught_up_pods_still_consolidates_safely(reads: dict[str, Any]) -> None:
    result = reads["result"]
    assert [e for e in result.events if e.reason == "DisruptionTerminating"]  # it did consolidate
    assert result.expectations and all(result.expectations.values()), result.expectations
    assert not any(result.dead_letters.values())
