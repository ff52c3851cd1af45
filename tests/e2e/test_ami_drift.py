"""AMI drift end to end: a new AL2023 release is published mid-run and every carpool node is replaced by one
on it, replacement first, one at a time as the NodePool's budget (`nodes: "1"`) allows.

Assertions are on outcomes and simulated-time bounds (the AMI cache's 300 s, the disruption function's
minute), not on the tick at which something happened."""

from __future__ import annotations

from carpool.adapters.aws.wiring import AMI_TTL_SECONDS
from carpool.sim.run.result import Decision, SimResult

from .conftest import registered

SCENARIO = "011-ami-drift.yaml"
PUBLISHED_AT = 300
OLD, NEW = "v20241215", "v20250301"
NODES = 4
BUDGET = 1
#: the disruption function's schedule
DISRUPTION_EVERY = 60
#: by then every node runs the new release: the AMI cache expires, the next disruption run sees the drift,
#: and each node, one after another, takes at most two disruption runs (launch the replacement; drain
#: once it registered, some 55 s later)
ALL_DRIFTED_WITHIN = AMI_TTL_SECONDS + DISRUPTION_EVERY + NODES * 2 * DISRUPTION_EVERY


def _disrupted_intervals(decisions: list[Decision]) -> list[tuple[str, str]]:
    """(`taint`|`gone`, node) in the order the cluster saw them: a node is disrupting from the
    `karpenter.sh/disrupted` taint until its Node is deleted."""
    out = []
    for d in decisions:
        if d.source != "k8s-api":
            continue
        verb, _, rest = d.message.partition(" ")
        if verb == "taint" and "karpenter.sh/disrupted" in rest:
            out.append(("taint", rest.split()[0]))
        elif verb == "delete-node":
            out.append(("gone", rest.split()[0]))
    return out


def test_every_pod_runs(scenario_result: SimResult) -> None:
    r = scenario_result
    assert r.pods.total == NODES and r.pods.pending == 0
    assert r.expectations == {"allPodsScheduled": True}
    assert not any(r.dead_letters.values())
    assert not [d for d in r.decisions if d.level == "ERROR"]


def test_nodes_came_up_on_the_old_release(scenario_result: SimResult) -> None:
    first = [i for i in registered(scenario_result) if i.launched_at < PUBLISHED_AT]
    assert len(first) == NODES
    assert all(i.image_name.endswith(f"-{OLD}") for i in first)


def test_every_node_drifted_to_the_new_release(scenario_result: SimResult) -> None:
    r = scenario_result
    assert len(r.instances) == NODES
    assert all(i.image_name == f"amazon-eks-node-al2023-x86_64-standard-1.32-{NEW}" for i in r.instances)
    old = [i for i in r.launches if i.image_name.endswith(f"-{OLD}")]
    assert all(i.terminated_at is not None for i in old)
    assert max(i.terminated_at or 0 for i in old) <= PUBLISHED_AT + ALL_DRIFTED_WITHIN


def test_the_release_was_seen_once_the_ami_cache_expired(scenario_result: SimResult) -> None:
    """The first drift decision comes no later than the cache's TTL plus one disruption run after the
    publish (and never before it)."""
    drift = [d for d in scenario_result.decisions
             if d.source == "disruption" and "EC2NodeClass default now gives" in d.message]
    assert drift, "the disruption function never saw the new AMI"
    assert PUBLISHED_AT <= drift[0].at <= PUBLISHED_AT + AMI_TTL_SECONDS + DISRUPTION_EVERY


def test_replacements_come_first(scenario_result: SimResult) -> None:
    """The pool never has fewer nodes than its pods need: each replacement is up before its node goes."""
    after = [p for p in scenario_result.timeline if p.at >= PUBLISHED_AT]
    assert after and all(p.nodes.get("default", 0) >= NODES for p in after)
    assert all(p.pending_pods == 0 for p in after)


def test_no_more_nodes_disrupting_than_the_budget_allows(scenario_result: SimResult) -> None:
    disrupting: set[str] = set()
    most = 0
    for what, node in _disrupted_intervals(scenario_result.decisions):
        if what == "taint":
            disrupting.add(node)
        else:
            disrupting.discard(node)
        most = max(most, len(disrupting))
    assert most == BUDGET
    # and the budget is what held the others back
    waiting = [d for d in scenario_result.decisions if "budget for Drifted" in d.message]
    assert waiting, "no node ever waited for the budget"
