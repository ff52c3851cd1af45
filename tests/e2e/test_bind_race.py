"""Issue 30 item 6: emptiness racing the kube-scheduler. A node judged empty from the disruption run's
snapshot gets a pod bound to it before the cordon (the scenario's `races` entry: a bare pod, nothing
recreates it). The run reads the node's pods again after the cordon, finds the pod, abandons the
decision (taint and cordon removed) and keeps the node: the pod is never killed. Through the real
handlers, local AWS and the simulated cluster's own kube-scheduler."""

from __future__ import annotations

import pytest

from carpool import labels as L
from carpool.api.k8s import Pod
from carpool.sim.run.result import SimResult
from carpool.sim.run.runner import SimRunner
from carpool.sim.run.scenario import load_scenario

from .conftest import EXAMPLES

SCENARIO = "016-bind-race.yaml"
RACER = "default/report"


@pytest.fixture(scope="module")
def run() -> tuple[SimResult, SimRunner]:
    runner = SimRunner(load_scenario(EXAMPLES / SCENARIO))
    return runner.run(), runner


def _batch_node(result: SimResult) -> str:
    (instance,) = [i for i in result.launches if i.node_pool == "batch"]
    assert instance.node_name is not None
    return instance.node_name


def test_the_race_happened_before_the_cordon_of_the_empty_node(run: tuple[SimResult, SimRunner]) -> None:
    result, _ = run
    node = _batch_node(result)
    (race,) = [d for d in result.decisions if d.source == "kube-scheduler" and "between its read" in d.message]
    assert "1 bound" in race.message and node in race.message


def test_the_racing_pod_is_never_killed_and_runs_on_its_node(run: tuple[SimResult, SimRunner]) -> None:
    result, runner = run
    node = _batch_node(result)
    deleted = [c.obj.key for c in runner.cluster.watch({"pods": "0"})
               if c.type == "DELETED" and isinstance(c.obj, Pod) and c.obj.key == RACER]
    assert deleted == []
    racer = next(p for p in runner.cluster.list_pods() if p.key == RACER)
    assert racer.spec.node_name == node and racer.status.phase == "Running"


def test_the_node_is_kept_schedulable_and_its_instance_running(run: tuple[SimResult, SimRunner]) -> None:
    result, runner = run
    node = _batch_node(result)
    (instance,) = [i for i in result.launches if i.node_pool == "batch"]
    assert instance.terminated_at is None
    assert ("delete-node", node) not in {(verb, subject) for _at, verb, subject in runner.cluster.actions}
    kept = next(n for n in runner.cluster.list_nodes() if n.name == node)
    assert not kept.spec.unschedulable and not any(t.key == L.DISRUPTED_TAINT for t in kept.taints())
    assert [d for d in result.decisions if "not disrupting" in d.message and RACER in d.message]
