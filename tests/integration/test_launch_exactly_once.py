"""Issue 30, the launch path, through the real provisioner handler on local AWS (moto) with the
simulation's cluster playing the API server and the kube-scheduler:

- a refusal is decided on its kind (`Refusal`), not its text: a pod named `limit-...` whose claim lost
  a pod to a concurrent provisioner is scheduled again like any other;
- a deleted predecessor's event, stamped later, does not hide the live pod's own event;
- a CreateFleet that launched but whose answer was lost (read timeouts on every retry) is an unknown
  outcome, not a failure: nothing is released, a redelivery launches nothing more, and the claim learns
  its instance from what EC2 holds (the instance's claim tag).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from carpool_env import CLUSTER, MakeDeps, running_instances, sqs_batch
from test_exactly_once import ON_DEMAND, Context, assert_books_balance, config, unschedulable

from carpool.adapters.aws import session
from carpool.api import events
from carpool.api.k8s import Pod
from carpool.app import wiring
from carpool.app.wiring import Dependencies
from carpool.sim.localaws.lambda_runtime import load_handler, scheduled_event
from carpool.sim.localaws.server import LocalAws
from carpool.sim.run.faults import LostAnswers
from carpool.state.models import ClaimStatus

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("event_path")
#: 4-vCPU types: two 1500m pods share a node
TWO_PODS_PER_NODE = {**ON_DEMAND, "karpenter.k8s.aws/instance-size": ["xlarge"]}


def handler() -> Any:
    return load_handler("provisioner", ROOT / "functions")


def entry(pod: Pod, deps: Dependencies, seconds: float = 0.0) -> dict[str, Any]:
    return events.pod_unschedulable_entry(CLUSTER, pod, deps.clock() + timedelta(seconds=seconds), "bus")


def claimed(deps: Dependencies) -> set[str]:
    return {p for c in deps.ledger.active() for p in c.pods}


# -- item 3: typed refusal reasons ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["limit-", "web-"])
def test_a_pod_named_limit_is_scheduled_again_after_a_race_like_any_other(make_deps: MakeDeps, aws: LocalAws,
                                                                          name: str) -> None:
    """Two pods planned onto one node; a concurrent provisioner nominates the first one between the plan
    and the reservation (the interleaving DynamoDB decides). The refused claim's other pod must be
    scheduled again in the same invocation, whatever the first pod is called."""
    deps = make_deps(config(TWO_PODS_PER_NODE))
    wiring.use(deps)
    pods = unschedulable(2, deps, cpu="1500m", prefix=name)
    ledger = deps.ledger
    real = ledger.reserve_many
    rival: list[str] = []

    def racing(claims: Any, *args: Any, **kwargs: Any) -> Any:
        if not rival:  # the other provisioner reserves the first pod a moment earlier
            other = claims[0].model_copy(deep=True)
            other.name, other.pods = "default-rival00000", [pods[0].key]
            ledger.reserve(other, None, deps.clock(), deps.settings.nomination_ttl_seconds)
            rival.append(other.name)
        return real(claims, *args, **kwargs)

    ledger.reserve_many = racing  # type: ignore[method-assign]
    response = handler()(sqs_batch([entry(p, deps) for p in pods]), Context(60))
    assert rival, "the race never happened"
    assert response == {"batchItemFailures": []}
    # the second pod got a node of its own (launched in the next round), not a silent "done"
    launched = [c for c in deps.ledger.active() if c.status == ClaimStatus.LAUNCHED]
    assert [c.pods for c in launched] == [[pods[1].key]], [c.pods for c in deps.ledger.active()]
    assert len(running_instances(aws)) == 1


# -- item 7 (third part): events told apart by uid ------------------------------------------------------
def test_a_predecessors_later_event_does_not_hide_the_live_pods_own(make_deps: MakeDeps, aws: LocalAws) -> None:
    """`default/db-0` was deleted and created again (a StatefulSet's pod): the old pod's event, stamped
    later (a slower watcher, a redelivery), arrives in the same batch as the live pod's own."""
    deps = make_deps(config())
    wiring.use(deps)
    (live,) = unschedulable(1, deps, cpu="1500m", prefix="db-")
    predecessor = live.to_json_dict()
    predecessor["metadata"]["uid"] = "uid-of-the-deleted-db-0"
    old = Pod.model_validate(predecessor)
    response = handler()(sqs_batch([entry(live, deps), entry(old, deps, seconds=5)]), Context(60))
    assert response == {"batchItemFailures": []}
    assert claimed(deps) == {live.key}, "the live pod was answered done without a node"
    assert len(running_instances(aws)) == 1


# -- item 2: a lost CreateFleet answer ------------------------------------------------------------------
@pytest.fixture
def lost_answers() -> Iterator[LostAnswers]:
    """Every CreateFleet of the process's EC2 client launches, then its answer is lost."""
    lost = LostAnswers()
    client = session.client("ec2")
    lost.register(client)
    yield lost
    lost.unregister(client)


@pytest.mark.parametrize("n_pods", [1, 4])
def test_a_lost_create_fleet_answer_is_repaired_from_ec2_not_launched_again(
    make_deps: MakeDeps, aws: LocalAws, lost_answers: LostAnswers, n_pods: int
) -> None:
    deps = make_deps(config({**ON_DEMAND, "karpenter.k8s.aws/instance-size": ["large"]}))
    wiring.use(deps)
    pods = unschedulable(n_pods, deps, cpu="1500m")
    first = handler()(sqs_batch([entry(p, deps) for p in pods]), Context(60))
    assert lost_answers.lost, "no answer was lost"
    launched = running_instances(aws)
    assert len(launched) == n_pods
    # unknown, not failed: the reservations stay, holding their pods; the records are retried
    held = deps.ledger.active()
    assert len(held) == n_pods and all(c.status == ClaimStatus.RESERVED for c in held)
    assert claimed(deps) == {p.key for p in pods}
    assert {f["itemIdentifier"] for f in first["batchItemFailures"]} == {f"m{i}" for i in range(n_pods)}
    # every instance carries its claim (alone) or its request's claims (batched): that is what repairs them
    tags = [{t["Key"]: t["Value"] for t in i.get("Tags", [])} for i in launched]
    named = [[t["karpenter.sh/nodeclaim"]] if "karpenter.sh/nodeclaim" in t
             else [f"default-{c}" for c in t["carpool.dev/fleet-claims"].split()] for t in tags]
    assert all(sorted(n) == sorted(c.name for c in held) for n in named) if n_pods > 1 else named == [[held[0].name]]
    # redelivered (the answers are back): nothing more is launched, the pods are held
    lost_answers.unregister(session.client("ec2"))
    again = handler()(sqs_batch([entry(p, deps) for p in pods]), Context(60))
    assert again == {"batchItemFailures": []}
    assert len(running_instances(aws)) == n_pods
    # past the launch deadline the disruption function's sweep repairs the claims from the tags
    deps.clock.now += timedelta(seconds=deps.settings.launch_deadline_seconds + 10)
    disruption = load_handler("disruption", ROOT / "functions")
    disruption(scheduled_event("carpool-disruption", deps.clock(), "us-east-1"), Context(60))
    assert len(running_instances(aws)) == n_pods
    repaired = deps.ledger.active()
    assert {c.instance_id for c in repaired} == {i["InstanceId"] for i in launched}
    assert claimed(deps) == {p.key for p in pods}
    assert_books_balance(deps, aws)
