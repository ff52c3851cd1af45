"""Time to capacity on `make demo`'s scenario (examples/flex-first.yaml): every pod that waited is counted,
the launch steps count the pods that went to a node launched while they waited, each step takes time and
the steps add up; the provisioner's deployed `PodPendingToLaunchSeconds` agrees with the simulation's
pending -> CreateFleet."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from carpool import observability
from carpool.sim.run.result import Durations, SimResult
from carpool.sim.run.runner import SimRunner
from carpool.sim.run.scenario import load_scenario

from .conftest import EXAMPLES

SCENARIO = "flex-first.yaml"


@dataclass
class Run:
    result: SimResult
    runner: SimRunner
    #: the provisioner's PodPendingToLaunchSeconds recorded during the run (all pools, summed)
    deployed_pending_to_launch: float


def _deployed() -> float:
    return observability.total("PodPendingToLaunchSeconds", cluster="demo")


@pytest.fixture(scope="module")
def run() -> Run:
    before = _deployed()
    runner = SimRunner(load_scenario(EXAMPLES / SCENARIO))
    result = runner.run()
    return Run(result, runner, _deployed() - before)


def _through_new_nodes(runner: SimRunner) -> dict[str, float]:
    """Pod key -> its wait until CreateFleet, for each pod bound to a node whose instance carpool launched
    after the pod was marked Unschedulable (the kubelets see an instance once CreateFleet answered)."""
    node_launched = {node: runner.kubelets.launched[iid][0] for iid, node in runner.kubelets.registered.items()}
    out = {}
    for key, pod in runner.cluster.stamps.pods.items():
        launched = node_launched.get(pod.node or "")
        if pod.bound is not None and launched is not None and launched >= pod.pending:
            out[key] = launched - pod.pending
    return out


def test_every_pod_that_waited_is_counted_and_those_through_new_nodes_in_every_launch_step(run: Run) -> None:
    ttc = run.result.time_to_capacity
    expected = _through_new_nodes(run.runner)
    # 40 pods; one of the scale-up's fits in the room the first nodes left and never waits
    assert ttc.pods == 39 and run.result.pods.scheduled == 40
    assert ttc.through_new_nodes == len(expected) == 39
    launch_steps = [d for label, d in ttc.steps() if label != "pending -> bound"]
    assert [d.count for d in launch_steps] == [ttc.through_new_nodes] * len(launch_steps)
    assert ttc.pending_to_bound.count == ttc.pods


def test_each_step_takes_time_and_the_steps_add_up(run: Run) -> None:
    ttc = run.result.time_to_capacity
    truth = run.runner.scenario.truth
    for label, d in ttc.steps():
        assert 0 < d.p50 <= d.p99 <= d.max, (label, d)
    assert ttc.create_fleet_to_node.p50 >= truth.boot_seconds  # the instance boots before its kubelet joins
    assert ttc.node_to_ready == Durations(count=39, p50=truth.registration_seconds, p99=truth.registration_seconds,
                                          max=truth.registration_seconds)
    in_order = [ttc.pending_to_create_fleet, ttc.create_fleet_to_node, ttc.node_to_registered, ttc.registered_to_bound]
    # every pod's wait is the sum of its steps: no step is longer than the whole, the whole no longer than
    # the sum of the longest steps
    assert max(d.max for d in in_order) < ttc.pending_to_bound.max <= sum(d.max for d in in_order) + 1e-6
    # carpool's share is what is left of the wait once EC2's boot and the kubelet's registration are out
    assert 0 < ttc.carpool_overhead.max < ttc.pending_to_bound.max - truth.boot_seconds
    assert ttc.carpool_overhead.p50 <= ttc.pending_to_bound.p50 - ttc.create_fleet_to_node.p50 - ttc.node_to_ready.p50 + 1e-6


def test_the_json_and_the_summaries_carry_it(run: Run) -> None:
    from carpool.sim.run import report, summary

    doc = run.result.to_json_dict()["timeToCapacity"]
    assert doc["throughNewNodes"] == 39 and doc["pendingToCreateFleet"]["count"] == 39
    assert "Time to capacity" in report.render(run.result)
    assert summary.time_to_capacity_table(run.result).row_count == 7


def test_the_provisioners_metric_agrees_with_the_simulations_pending_to_create_fleet(run: Run) -> None:
    """Each launched pod's `PodPendingToLaunchSeconds` is its simulated pending -> CreateFleet, give or take
    the whole seconds a condition's `lastTransitionTime` keeps."""
    simulated = _through_new_nodes(run.runner)
    assert run.deployed_pending_to_launch == pytest.approx(sum(simulated.values()), abs=len(simulated))
