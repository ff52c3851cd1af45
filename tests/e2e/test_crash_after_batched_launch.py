"""A provisioner killed after a batched CreateFleet, nodes that boot slowly (example 015), played through
the real handlers: every instance of the batch is traced back to its claim (the request's claims tag,
paired as the launch paired them), no claim is released while its instance boots, nothing launches twice,
no serving node is killed."""

from __future__ import annotations

import pytest

from carpool.sim.run.scenario import load_scenario

from .conftest import EXAMPLES
from .test_crash_recovery import Run, _Runner


@pytest.fixture(scope="module", params=["slow boots", "prompt boots"])
def batched(request: pytest.FixtureRequest) -> Run:
    """As the example has it (kubelets joining past the launch deadline: the orphan sweep repairs the
    claims), and with prompt boots (the nodes join first: the registrar repairs them)."""
    scenario = load_scenario(EXAMPLES / "021-crash-after-batched-launch.yaml")
    if request.param == "prompt boots":
        scenario = scenario.model_copy(update={"kubelets": []})
    runner = _Runner(scenario)
    return Run(runner.run(), runner)


def test_the_crash_came_after_one_create_fleet_launched_four(batched: Run) -> None:
    (fired,) = batched.runner.crashes.fired
    assert (fired["point"], fired["function"]) == ("after-create-fleet", "provisioner")
    (killed,) = batched.logged("invocation killed after CreateFleet launched i-")
    assert killed.count("i-") == 4, killed


def test_four_instances_for_four_pods_none_terminated(batched: Run) -> None:
    result = batched.result
    assert result.pods.total == 4 and result.pods.pending == 0
    assert len(result.launches) == 4, [(i.instance_id, i.launched_at, i.terminated_at) for i in result.launches]
    assert all(i.joined and i.terminated_at is None for i in result.launches)
    assert not batched.logged("launch deadline"), "a claim was released while its instance booted"


def test_every_claim_records_its_own_instance(batched: Run) -> None:
    claims = batched.runner.claims
    # each claim repaired from its instance's tags: by the orphan sweep (slow boots: past the launch
    # deadline, no node yet) or by the registrar (prompt boots: the node joined first)
    repaired = {c.name for c in claims if any(f"claim {c.name} " in m for m in batched.logged("repaired"))}
    assert repaired == {c.name for c in claims}, batched.logged("repaired")
    assert sorted(c.instance_id or "" for c in claims) == sorted(i.instance_id for i in batched.result.launches)
    assert all(c.name.startswith("default-") for c in claims), [c.name for c in claims]  # repaired, not adopted
    assert sorted(p for c in claims for p in c.pods) == sorted({p for c in claims for p in c.pods})


def test_never_more_than_four_instances_at_once(batched: Run) -> None:
    """A second launch for the same pods would run beside the first for minutes (and past any limit that
    counts only what the claims hold)."""
    assert batched.most_running_at_once() == 4


def test_no_pod_killed_no_node_deleted(batched: Run) -> None:
    assert batched.killed_pods() == []
    assert batched.api_actions("evict") == [] and batched.api_actions("delete-node") == []
    assert not batched.logged("terminated as an orphan")
