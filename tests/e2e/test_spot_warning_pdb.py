"""A spot warning on a node running every replica of a Deployment with a PodDisruptionBudget (web) and
of one without (api): every pod is off the node before EC2 reclaims it, and at no point of the run is
every replica of a Deployment unavailable."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from carpool.sim.run.result import SimResult
from carpool.sim.run.runner import SimRunner
from carpool.sim.run.scenario import load_scenario

from .conftest import EXAMPLES

SCENARIO = "010-spot-warning-pdb.yaml"
WARNING_AT = 120
REPLICAS = {"Deployment/default/web": 6, "Deployment/default/api": 4}


class _Watching(SimRunner):
    """The real runner, also noting per tick how many pods of each controller serve, and which pods
    are still on an instance at the moment EC2 reclaims it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.serving: list[tuple[float, Counter[str]]] = []
        self.left_at_reclaim: dict[str, list[str]] = {}

    def _record(self, now: float) -> None:
        super()._record(now)
        self._note_serving(now)

    def _tick_kubelets(self) -> None:
        super()._tick_kubelets()
        self._note_serving(self.clock.elapsed)

    def _note_serving(self, now: float) -> None:
        up: Counter[str] = Counter()
        for rec in self.cluster.user_pods():
            if (rec.raw.get("spec") or {}).get("nodeName") and (rec.raw.get("status") or {}).get("phase") == "Running":
                up[rec.controller or ""] += 1
        self.serving.append((now, up))

    def _reclaim_due(self) -> None:
        due = {iid for at, iid in self._terminations if at <= self.clock.elapsed}
        for name, rec in self.cluster.nodes.items():
            iid = ((rec.raw.get("spec") or {}).get("providerID") or "").rsplit("/", 1)[-1]
            if iid in due:
                self.left_at_reclaim[iid] = sorted(
                    k for k, p in self.cluster.pods.items() if (p.raw.get("spec") or {}).get("nodeName") == name
                    and p.controller is not None)
        super()._reclaim_due()


@pytest.fixture(scope="module")
def watched() -> tuple[SimResult, _Watching]:
    runner = _Watching(load_scenario(EXAMPLES / SCENARIO))
    return runner.run(), runner


def interrupted(result: SimResult):
    """The one instance of the first launch (before the warning)."""
    [first] = [i for i in result.launches if i.launched_at < WARNING_AT]
    return first


def test_every_pod_left_the_node_before_it_was_reclaimed(watched):
    result, runner = watched
    gone = interrupted(result)
    assert gone.terminated_at is not None and gone.terminated_at <= WARNING_AT + 120
    assert runner.left_at_reclaim.get(gone.instance_id, []) == []
    evicted = [d for d in result.decisions if d.source == "k8s-api" and d.message.startswith("evict ")]
    assert len(evicted) >= sum(REPLICAS.values())
    assert all(WARNING_AT <= d.at < WARNING_AT + 120 for d in evicted)


def test_no_deployment_ever_loses_all_its_replicas(watched):
    _result, runner = watched
    after = [(at, up) for at, up in runner.serving if at >= WARNING_AT]
    assert after
    for at, up in after:
        for controller in REPLICAS:
            assert up[controller] >= 1, f"{controller} had no serving replica at {at} s"


def test_the_pdb_is_never_exceeded_and_api_moves_a_quarter_at_a_time(watched):
    _result, runner = watched
    for at, up in runner.serving:
        if at >= WARNING_AT:
            assert up["Deployment/default/web"] >= REPLICAS["Deployment/default/web"] - 1, at
            assert up["Deployment/default/api"] >= REPLICAS["Deployment/default/api"] - 1, at


def test_blocked_evictions_are_retried_within_seconds_not_minutes(watched):
    result, _runner = watched
    steps = sorted({d.at for d in result.decisions if d.source == "interruption" and "interrupted node" in d.message})
    assert len(steps) >= 5
    gaps = [b - a for a, b in zip(steps, steps[1:], strict=False) if b < WARNING_AT + 90]
    assert gaps and max(gaps) <= 10


def test_the_replacement_was_launched_at_the_warning_and_the_log_says_why(watched):
    result, _runner = watched
    replacements = [i for i in result.launches if i.launched_at >= WARNING_AT]
    assert replacements and min(i.launched_at for i in replacements) <= WARNING_AT + 5
    said = " ".join(d.message for d in result.decisions if d.source == "interruption")
    assert "cordoned and tainted" in said and "PodDisruptionBudget" in said and "25%" in said
    assert result.pods.total == sum(REPLICAS.values()) and result.pods.pending == 0
