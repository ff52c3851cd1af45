"""Simulations in one process: one after the other, and two at once on threads, each gives what it gives
alone in a fresh interpreter (`carpool simulate --json`, how a user runs one).

A run keeps its state to itself (its local AWS account and server, its functions' environment,
dependencies and output): if anything leaked between runs (a shared moto backend, a process-wide
environment variable, the other run's handlers' log lines or metrics), the pods bound, the launches or
the number of decisions would differ from the lone run's. Both scenarios are played for a cluster of the
same name, so they name the same tables, queues, bus and config parameter: only separate accounts keep
them apart.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from carpool.sim.run.result import SimResult
from carpool.sim.run.runner import simulate
from carpool.sim.run.scenario import for_cluster, load_scenario

from .conftest import EXAMPLES

#: Two small scenarios that launch different capacity (so a run answering the other's result would show).
SCENARIOS = ("004-prefix-delegation.yaml", "002-weight-vs-split.yaml")
#: What each scenario is cut down to, played the same way by every run compared. Weight-vs-split binds
#: its pods at 40 s: 60 s still holds a disruption pass (every 60 s) after that, so every handler
#: (watcher, provisioner, registrar, disruption) runs with state to leak, and 2 + 6 replicas instead of
#: 6 + 20 still launch from three pools: the instances, not the proportions, matter here. Prefix
#: delegation is played as written (one instance: its length costs little).
SHORTER: dict[str, dict[str, Any]] = {
    "004-prefix-delegation.yaml": {},
    "002-weight-vs-split.yaml": {"duration": 60, "replicas": {"priority": 2, "split": 6}},
}
REPO = Path(__file__).resolve().parents[2]
#: The cluster both scenarios are played for.
CLUSTER = "isolation"


def _shorter(doc: dict[str, Any], duration: int | None = None, replicas: dict[str, int] | None = None) -> dict[str, Any]:
    """`doc` played for `duration` seconds (if given), with `replicas` for the Deployments it names."""
    if duration is not None:
        doc["duration"] = duration
    for step in doc["workload"]:
        applied = step["apply"] if isinstance(step["apply"], list) else [step["apply"]]
        for obj in applied:
            if obj["metadata"]["name"] in (replicas or {}):
                obj["spec"]["replicas"] = (replicas or {})[obj["metadata"]["name"]]
    return doc


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The scenarios of examples/, cut down (`SHORTER`), for the cluster `CLUSTER` (self-contained: inline manifests)."""
    out = tmp_path_factory.mktemp("isolation")
    paths = {}
    for name in SCENARIOS:
        doc = yaml.safe_load((EXAMPLES / name).read_text())
        doc = _shorter(for_cluster(doc, CLUSTER), **SHORTER[name])
        paths[name] = out / name
        paths[name].write_text(yaml.safe_dump(doc, sort_keys=False))
    return paths


def run(path: Path) -> SimResult:
    return simulate(load_scenario(path))


def outline(result: SimResult) -> dict[str, Any]:
    """What must not depend on what else runs in the process: the summary, the launches (without the
    random instance ids), the pods bound per workload and how many decisions were logged. (Wall time and
    carpool's own cost, which bills the handlers' wall time, do depend on it.)"""
    return {
        "pods": result.pods.model_dump(),
        "workloads": {k: v.model_dump() for k, v in result.workloads.items()},
        "nodes": result.types_by_pool(),
        "hourly_cost": result.hourly_cost,
        "invocations": result.invocations,
        "dead_letters": result.dead_letters,
        "expectations": result.expectations,
        "launch_failures": len(result.launch_failures),
        "launches": sorted(
            [i.instance_type, i.zone, i.capacity_type, i.node_pool, i.launched_at, i.terminated_at, i.node_name is not None]
            for i in result.launches),
        "decisions": len(result.decisions),
    }


def _alone(paths: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """Each scenario in an interpreter of its own (started together: the machine's two cores)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "shared"), str(REPO)])}
    procs = {name: subprocess.Popen(
        [sys.executable, "-c", "from carpool.cli import main; main()", "simulate", str(path), "--json"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for name, path in paths.items()}
    out = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=900)
        assert proc.returncode == 0, f"{name} alone failed:\n{stderr[-3000:]}"
        out[name] = outline(SimResult.model_validate(json.loads(stdout)))
    return out


@pytest.fixture(scope="module")
def alone(scenarios: dict[str, Path]) -> dict[str, dict[str, Any]]:
    return _alone(scenarios)


@pytest.fixture(scope="module")
def one_after_the_other(
    scenarios: dict[str, Path],
) -> tuple[dict[str, dict[str, Any]], dict[str, str], dict[str, str]]:
    """Both runs in this process, in turn; with the process environment before and after."""
    before = dict(os.environ)
    outlines = {name: outline(run(scenarios[name])) for name in SCENARIOS}
    return outlines, before, dict(os.environ)


@pytest.fixture(scope="module")
def at_once(scenarios: dict[str, Path]) -> tuple[dict[str, dict[str, Any]], dict[str, tuple[float, float]]]:
    """Both runs in this process at the same time, each on a thread of its own; with when each ran."""
    outlines: dict[str, dict[str, Any]] = {}
    spans: dict[str, tuple[float, float]] = {}
    errors: list[BaseException] = []

    def play(name: str) -> None:
        started = time.monotonic()
        try:
            outlines[name] = outline(run(scenarios[name]))
        except BaseException as exc:  # reported by the fixture, not lost with the thread
            errors.append(exc)
        spans[name] = (started, time.monotonic())

    threads = [threading.Thread(target=play, args=(name,), name=f"sim-{name}") for name in SCENARIOS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return outlines, spans


def test_the_scenarios_differ(alone: dict[str, dict[str, Any]]) -> None:
    """The comparisons below could catch one run answering with the other's state."""
    first, second = (alone[name] for name in SCENARIOS)
    assert first["launches"] and second["launches"]
    assert first["launches"] != second["launches"]


def test_the_shorter_scenarios_still_exercise_every_handler(
    scenarios: dict[str, Path], alone: dict[str, dict[str, Any]]
) -> None:
    """Cut down as they are, the runs still bind every pod and call each handler, disruption once more
    after the last pod was bound (it runs at 0 s and every 60 s)."""
    for name in SCENARIOS:
        run_alone, duration = alone[name], yaml.safe_load(scenarios[name].read_text())["duration"]
        assert run_alone["pods"]["pending"] == 0 and run_alone["pods"]["scheduled"] > 0, name
        assert set(run_alone["invocations"]) >= {"watcher", "provisioner", "registrar", "disruption"}, name
        last_disruption = duration // 60 * 60
        assert run_alone["pods"]["max_unbound_seconds"] < last_disruption, name
    assert len(alone["002-weight-vs-split.yaml"]["nodes"]) == 3, "three pools launched"


def test_one_after_the_other_matches_alone(
    alone: dict[str, dict[str, Any]],
    one_after_the_other: tuple[dict[str, dict[str, Any]], dict[str, str], dict[str, str]],
) -> None:
    outlines, _before, _after = one_after_the_other
    for name in SCENARIOS:
        assert outlines[name] == alone[name], name


def test_runs_leave_the_process_environment_alone(
    one_after_the_other: tuple[dict[str, dict[str, Any]], dict[str, str], dict[str, str]],
) -> None:
    """The functions' environment (endpoint, credentials, tables) is the run's, never `os.environ`."""
    _outlines, before, after = one_after_the_other
    assert after == before


def test_at_once_matches_alone(
    alone: dict[str, dict[str, Any]],
    at_once: tuple[dict[str, dict[str, Any]], dict[str, tuple[float, float]]],
) -> None:
    outlines, spans = at_once
    (start_a, end_a), (start_b, end_b) = (spans[name] for name in SCENARIOS)
    assert start_a < end_b and start_b < end_a, "the two runs did not overlap"
    for name in SCENARIOS:
        assert outlines[name] == alone[name], name
