"""Issue 30 item 9: a consolidation whose replacement never registers. Every m5.large's kubelet fails to
join, so each replacement consolidation launches for the underutilized m5.xlarge stays unregistered.
As Karpenter's orchestration queue, carpool abandons the decision 10 minutes after it was taken: the
old node's taint and cordon go, it keeps its pod, nothing is relaunched for the decision, and the log
says how many launches there were. The node is decided on again only once the registration timeout has
removed the replacement (Karpenter's simulation does not rely on an uninitialized node). Through the
real handlers, local AWS and the simulated kubelets (scenario `kubelets: failToJoin`)."""

from __future__ import annotations

import re

import pytest

from carpool.api.k8s import Pod
from carpool.sim.run.result import SimResult
from carpool.sim.run.runner import SimRunner
from carpool.sim.run.scenario import load_scenario

from .conftest import EXAMPLES

SCENARIO = "017-replacement-never-joins.yaml"
#: Karpenter's command timeout (`minRetryDuration`) and one disruption run to notice it
ABANDON_WITHIN = 600 + 60


@pytest.fixture(scope="module")
def run() -> tuple[SimResult, SimRunner]:
    runner = SimRunner(load_scenario(EXAMPLES / SCENARIO))
    return runner.run(), runner


def _old(result: SimResult):
    (old,) = [i for i in result.launches if i.instance_type == "m5.xlarge"]
    return old


def _messages(result: SimResult, pattern: str) -> list[tuple[float, str]]:
    return [(d.at, d.message) for d in result.decisions if d.source == "disruption" and re.search(pattern, d.message)]


def test_the_old_node_is_never_drained_and_its_pod_never_moves(run: tuple[SimResult, SimRunner]) -> None:
    result, runner = run
    old = _old(result)
    assert old.terminated_at is None
    killed = [c.obj.key for c in runner.cluster.watch({"pods": "0"})
              if c.type == "DELETED" and isinstance(c.obj, Pod) and c.obj.spec.node_name == old.node_name]
    assert [k for k in killed if not k.startswith("default/web")] == [] and len(killed) == 2  # the scale-down's
    assert not [a for a in runner.cluster.actions if a[1] == "evict"]
    assert result.pods.total == 1 and result.pods.pending == 0


def test_each_decision_is_abandoned_in_time_after_one_launch(run: tuple[SimResult, SimRunner]) -> None:
    result, _ = run
    decided = [at for at, _m in _messages(result, r"underutilized: replace with m5\.large")]
    abandoned = _messages(result, r"abandoned: its replacement .* has not registered 10 minutes")
    assert len(decided) >= 4 and len(abandoned) >= 3
    for (at, message), start in zip(abandoned, decided, strict=False):
        assert start < at <= start + ABANDON_WITHIN and "(1 launch for it)" in message
    replacements = [i for i in result.launches if i.instance_type == "m5.large"]
    assert len(replacements) == len(decided)  # one launch per decision, never a relaunch
    assert not _messages(result, "launched again|draining anyway")


def test_the_node_is_schedulable_again_from_each_abandonment_to_the_next_decision(
        run: tuple[SimResult, SimRunner]) -> None:
    result, runner = run
    node = _old(result).node_name
    decided = [at for at, _m in _messages(result, r"underutilized: replace with m5\.large")]
    for at, _message in _messages(result, "abandoned"):
        uncordoned = [a for a in runner.cluster.actions if a[1] == "uncordon" and a[2] == node and a[0] == at]
        assert uncordoned, f"not uncordoned at {at}"
        following = [d for d in decided if d > at]
        assert not following or following[0] - at >= 240  # held while its replacement still boots
