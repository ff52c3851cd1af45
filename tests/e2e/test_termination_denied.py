"""Issue 30 item 4: one TerminateInstances that EC2 refuses (termination protection, turned on by someone
while the node runs) is one failed action, not a failed run: it is reported (a log line naming the
instance and EC2's error, the `DisruptionActionFailures` metric) each time it is tried, and the other
pool's empty node is still removed. Played through the real handlers on local AWS, whose EC2 refuses the
call for a protected instance as EC2 does."""

from __future__ import annotations

import pytest

from carpool import observability
from carpool.sim.run.result import SimResult
from carpool.sim.run.runner import SimRunner
from carpool.sim.run.scenario import TerminationDenial, load_scenario

from .conftest import EXAMPLES

SCENARIO = "015-termination-denied.yaml"
BETA_EMPTY_AT = 330


@pytest.fixture(scope="module")
def run() -> tuple[SimResult, float]:
    """The scenario's result and how many failed disruption actions it counted."""
    before = observability.total("DisruptionActionFailures", action="terminate", cluster="denied")
    result = SimRunner(load_scenario(EXAMPLES / SCENARIO)).run()
    return result, observability.total("DisruptionActionFailures", action="terminate", cluster="denied") - before


def _instance(result: SimResult, pool: str):
    (instance,) = [i for i in result.launches if i.node_pool == pool]
    return instance


def test_the_protected_instance_is_refused_and_keeps_running(run: tuple[SimResult, float]) -> None:
    result, _ = run
    protected = _instance(result, "alpha")
    assert protected.terminated_at is None
    refusals = [d for d in result.decisions if d.level == "ERROR" and d.source == "disruption"
                and protected.instance_id in d.message and "OperationNotPermitted" in d.message]
    assert refusals, "the refusal was never reported"


def test_the_other_pools_empty_node_is_still_removed(run: tuple[SimResult, float]) -> None:
    result, _ = run
    beta = _instance(result, "beta")
    assert beta.terminated_at is not None and BETA_EMPTY_AT < beta.terminated_at <= BETA_EMPTY_AT + 90


def test_no_disruption_run_fails_and_every_refusal_is_counted(run: tuple[SimResult, float]) -> None:
    result, counted = run
    failed = [d.message for d in result.decisions if "invocation raised" in d.message]
    assert failed == []
    refusals = [d for d in result.decisions if d.level == "ERROR" and "refused TerminateInstances" in d.message]
    assert counted == len(refusals) >= 5  # tried again (and reported) every run from 180 s to the end


# -- the same with a service control policy denying TerminateInstances on the alpha pool's instances ----------
@pytest.fixture(scope="module")
def scp_run() -> SimResult:
    """015 with the protection step replaced by an explicit deny (an SCP) on alpha's instances from 150 s."""
    scenario = load_scenario(EXAMPLES / SCENARIO)
    steps = [s for s in scenario.workload if s.termination_protection is None]
    denial = TerminationDenial.model_validate({"nodePool": "alpha", "from": 150})
    return SimRunner(scenario.model_copy(update={"workload": steps, "termination_denials": [denial]})).run()


def test_a_denial_by_policy_is_reported_and_the_run_goes_on(scp_run: SimResult) -> None:
    alpha, beta = _instance(scp_run, "alpha"), _instance(scp_run, "beta")
    assert alpha.terminated_at is None
    assert beta.terminated_at is not None and BETA_EMPTY_AT < beta.terminated_at <= BETA_EMPTY_AT + 90
    refusals = [d.message for d in scp_run.decisions if d.level == "ERROR" and alpha.instance_id in d.message
                and "UnauthorizedOperation" in d.message and "service control policy" in d.message]
    assert len(refusals) >= 5
    assert not [d for d in scp_run.decisions if "invocation raised" in d.message]
