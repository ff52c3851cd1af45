"""A batched CreateFleet that launched while its answer was lost (example 016), played through the real
handlers: the outcome is unknown, not a failure. Nothing is released or terminated, nothing launches
twice, each claim is repaired from EC2 and every pod is served."""

from __future__ import annotations

import pytest

from carpool.sim.run.scenario import load_scenario

from .conftest import EXAMPLES
from .test_crash_recovery import Run, _Runner


@pytest.fixture(scope="module")
def lost() -> Run:
    runner = _Runner(load_scenario(EXAMPLES / "022-create-fleet-answer-lost.yaml"))
    return Run(runner.run(), runner)


def test_the_answer_of_the_first_create_fleet_was_lost(lost: Run) -> None:
    (fired,) = lost.runner.crashes.fired
    assert (fired["point"], fired["function"]) == ("answer-lost-after-create-fleet", "provisioner")
    assert lost.logged("kept reserved: the outcome of CreateFleet is unknown")


def test_four_instances_for_four_pods_none_terminated(lost: Run) -> None:
    result = lost.result
    assert result.pods.total == 4 and result.pods.pending == 0
    assert len(result.launches) == 4, [(i.instance_id, i.launched_at, i.terminated_at) for i in result.launches]
    assert all(i.joined and i.terminated_at is None for i in result.launches)
    assert not lost.logged("launch deadline"), "a claim was released while its instance ran"


def test_every_claim_is_repaired_with_its_own_instance(lost: Run) -> None:
    claims = lost.runner.claims
    assert lost.logged("repaired"), "no claim was repaired"
    assert sorted(c.instance_id or "" for c in claims) == sorted(i.instance_id for i in lost.result.launches)
    assert all(c.name.startswith("default-") for c in claims), [c.name for c in claims]  # repaired, not adopted


def test_never_more_than_four_instances_at_once(lost: Run) -> None:
    """A second launch for the same pods would run beside the first for minutes (and past any limit that
    counts only what the claims hold)."""
    assert lost.most_running_at_once() == 4


def test_no_pod_killed_no_node_deleted(lost: Run) -> None:
    assert lost.killed_pods() == []
    assert lost.api_actions("evict") == [] and lost.api_actions("delete-node") == []
    assert not lost.logged("terminated as an orphan")
