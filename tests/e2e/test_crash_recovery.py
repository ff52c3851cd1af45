"""A provisioner killed around CreateFleet (examples 006 and 007), played through the real handlers.

After CreateFleet (006): the instance boots and joins while no claim records it. The node must be
adopted (its claim repaired from the instance's nodeclaim tag), serve its pods, and never be taken for an
orphan: no pod that ran on a carpool node is evicted or deleted, no instance is terminated.
Before CreateFleet (007): the reservation holds the pods with no instance coming; it is released after the
launch deadline and the pods are served within six and a half minutes of simulated time (on the deployed
clock: the deadline, the next disruption run, the next watcher resync, boot and registration).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from carpool.api.k8s import Pod
from carpool.sim.run.result import SimResult
from carpool.sim.run.runner import SimRunner
from carpool.sim.run.scenario import load_scenario
from carpool.state.models import Claim, ClaimStatus

from .conftest import EXAMPLES


class _Runner(SimRunner):
    """The simulation, keeping the ledger's claims as they were at the end of the run (local AWS is gone
    once `run()` returns)."""

    claims: list[Claim]

    def _result(self) -> SimResult:
        self.claims = self.deps.ledger.active()
        return super()._result()


@dataclass
class Run:
    result: SimResult
    runner: _Runner

    def killed_pods(self) -> list[str]:
        """Pods that were bound to a node and then deleted (evicted, or gone with their node), from the
        simulated API server's full change history."""
        out = []
        for change in self.runner.cluster.watch({"pods": "0", "nodes": "0"}):
            obj = change.obj
            if change.type == "DELETED" and isinstance(obj, Pod) and obj.spec.node_name and not obj.is_daemonset_pod():
                out.append(f"{obj.key} on {obj.spec.node_name}")
        return out

    def api_actions(self, verb: str) -> list[str]:
        return [d.message for d in self.result.decisions if d.source == "k8s-api" and d.message.startswith(verb)]

    def logged(self, text: str) -> list[str]:
        return [d.message for d in self.result.decisions if text in d.message]

    def most_running_at_once(self) -> int:
        """The most instances running at one moment, from each launch's start and end."""
        edges = sorted([(i.launched_at, 1) for i in self.result.launches]
                       + [(i.terminated_at, -1) for i in self.result.launches if i.terminated_at is not None])
        return max(sum(d for _, d in edges[: n + 1]) for n in range(len(edges)))


def _run(name: str) -> Run:
    runner = _Runner(load_scenario(EXAMPLES / name))
    return Run(runner.run(), runner)


@pytest.fixture(scope="module")
def after_launch() -> Run:
    return _run("006-crash-after-launch.yaml")


@pytest.fixture(scope="module")
def before_launch() -> Run:
    return _run("007-crash-before-launch.yaml")


# -- killed after CreateFleet ---------------------------------------------------------------------------
def test_the_crash_happened_after_an_instance_was_launched(after_launch: Run) -> None:
    (fired,) = after_launch.runner.crashes.fired
    assert (fired["point"], fired["function"]) == ("after-create-fleet", "provisioner") and fired["at"] <= 30
    assert after_launch.logged("invocation killed after CreateFleet launched i-")


def test_one_instance_serves_every_pod_and_is_never_terminated(after_launch: Run) -> None:
    result = after_launch.result
    assert result.pods.total == 12 and result.pods.pending == 0
    assert len(result.launches) == 1, [i.instance_type for i in result.launches]
    (instance,) = result.launches
    assert instance.node_name is not None and instance.terminated_at is None


def test_no_running_pod_is_ever_killed(after_launch: Run) -> None:
    assert after_launch.killed_pods() == []
    assert after_launch.api_actions("evict") == [] and after_launch.api_actions("delete-node") == []
    assert not after_launch.logged("terminated as an orphan")


def test_the_claim_learns_its_instance(after_launch: Run) -> None:
    """Whoever gets there first (the registrar when the node joins, the disruption function's sweep)
    records the instance on the claim its tag names; the node is then registered for that claim."""
    (instance,) = after_launch.result.launches
    assert [m for m in after_launch.logged("repaired") if instance.instance_id in m], "no claim was repaired"
    (claim,) = after_launch.runner.claims
    assert claim.instance_id == instance.instance_id and claim.instance_type == instance.instance_type
    assert claim.status == ClaimStatus.REGISTERED and claim.node_name == instance.node_name


# -- killed before CreateFleet --------------------------------------------------------------------------
def test_the_crash_happened_before_anything_was_launched(before_launch: Run) -> None:
    (fired,) = before_launch.runner.crashes.fired
    assert (fired["point"], fired["function"]) == ("before-create-fleet", "provisioner") and fired["at"] <= 30
    assert [i.launched_at for i in before_launch.result.launches] != [] and all(
        i.launched_at >= 180 for i in before_launch.result.launches)  # nothing launched before the release


def test_the_stale_reservation_is_released_and_pods_served_within_six_and_a_half_minutes(before_launch: Run) -> None:
    result = before_launch.result
    assert before_launch.logged("launch deadline"), "the reservation was never released"
    assert result.pods.total == 12 and result.pods.pending == 0
    assert result.pods.max_unbound_seconds <= 390
    assert result.expectations == {"allPodsScheduled": True, "maxSecondsToSchedule": True}
    assert before_launch.killed_pods() == []
