"""Time to capacity on the deployed clock (issue 28's targets): pods turn pending at odd moments, nodes
boot at their own pace, and every function runs only as its deployed trigger would run it.

On a carpool that polls the cluster once a minute (the watcher's resync alone) a pod waits for the next
run: pending -> CreateFleet then spreads over a whole minute, and every target below fails."""

import pytest

from carpool.sim.result import SimResult

#: Found by this scenario, not fixed yet: at 459.9 s one of ten identical pending pods is planned onto an
#: existing node whose room another pod took meanwhile; it stays nominated to that node until the
#: nomination's 2-minute hold after registration ends, so it waits ~200 s for its second CreateFleet
#: (p99 of 72 pods is that one pod). Karpenter re-plans such a pod in its next batch.
KNOWN_GAP = "a pod whose planned room was taken waits out its nomination's 2-minute hold"

SCENARIO = "012-time-to-capacity.yaml"


def test_every_pod_is_served(scenario_result: SimResult) -> None:
    r = scenario_result
    assert r.pods.pending == 0, r.pods
    ttc = r.time_to_capacity
    assert ttc is not None and ttc.through_new_nodes >= 60


def test_pending_to_create_fleet(scenario_result: SimResult) -> None:
    steps = scenario_result.time_to_capacity.pending_to_create_fleet
    assert steps.p50 <= 3.0, steps


@pytest.mark.xfail(strict=True, reason=KNOWN_GAP)
def test_pending_to_create_fleet_p99(scenario_result: SimResult) -> None:
    steps = scenario_result.time_to_capacity.pending_to_create_fleet
    assert steps.p99 <= 12.0, steps


def test_node_to_unregistered_taint_lifted(scenario_result: SimResult) -> None:
    steps = scenario_result.time_to_capacity.node_to_registered
    assert steps.p99 <= 5.0, steps


@pytest.mark.xfail(strict=True, reason=KNOWN_GAP)
def test_carpool_overhead_on_a_pod(scenario_result: SimResult) -> None:
    steps = scenario_result.time_to_capacity.carpool_overhead
    assert steps.p99 <= 20.0, steps


def test_functions_ran_only_on_their_deployed_triggers(scenario_result: SimResult) -> None:
    """13 minutes: the watcher and the disruption function once a minute from the start, never more (the
    run the schedule starts at 780 s has not reached its handler when the scenario ends)."""
    r = scenario_result
    assert r.invocations["watcher"] == 13 and r.invocations["disruption"] == 13
    # the provisioner is invoked per micro-batch, not per pod: eight workload steps, a handful each
    assert r.invocations["provisioner"] <= 3 * 9
