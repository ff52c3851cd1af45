"""Runtime reliability against local AWS (moto on 127.0.0.1), through the real provisioner handler and
use cases: at-least-once delivery, concurrent provisioners, and a crash between CreateFleet and the claim
write. The cluster is the simulation's in-memory one; everything else is the production adapters."""

from __future__ import annotations

import random
import threading
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from carpool_env import (
    CLUSTER,
    T0,
    LambdaContext,
    MakeDeps,
    manifests,
    nodeclass,
    nodepool,
    pending_pods,
    running_instances,
    sqs_batch,
)

from carpool.api import events
from carpool.api.k8s import Pod
from carpool.app import disrupt, wiring
from carpool.app.provisioning import provision
from carpool.sim.localaws.lambda_runtime import load_handler
from carpool.sim.localaws.server import LocalAws
from carpool.sim.run.faults import CrashFaults, InvocationKilled
from carpool.sim.run.scenario import Crash
from carpool.state.models import ClaimStatus

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("event_path")  # the bus's queues, emptied before each test


def config(limit: int = 10_000) -> str:
    return manifests(
        nodepool(requirements={"karpenter.k8s.aws/instance-family": ["c5", "m5"],
                               "karpenter.sh/capacity-type": ["on-demand"]},
                 limits={"cpu": str(limit)}),
        nodeclass(),
    )


def _sqs_event(pods: list[Pod], now: datetime, copies: int = 1) -> dict[str, Any]:
    return sqs_batch([events.pod_unschedulable_entry(CLUSTER, p, now, "bus") for _ in range(copies) for p in pods])


def test_provisioner_handler_launches_and_records_claims(make_deps: MakeDeps, aws: LocalAws) -> None:
    deps = make_deps(config())
    wiring.use(deps)
    handler = load_handler("provisioner", ROOT / "functions")
    pods = pending_pods(6, deps=deps)
    deps.cluster.bind()  # type: ignore[attr-defined]  # the kube-scheduler marks them Unschedulable
    response = handler(_sqs_event(pods, T0), LambdaContext())
    assert response == {"batchItemFailures": []}
    instances = running_instances(aws)
    claims = deps.ledger.active()
    assert instances and len(instances) == len(claims)
    assert {c.instance_id for c in claims} == {i["InstanceId"] for i in instances}
    assert sorted(p for c in claims for p in c.pods) == sorted(f"default/p{i}" for i in range(6))
    assert all(c.status == ClaimStatus.LAUNCHED for c in claims)


def test_every_event_delivered_three_times_launches_nothing_extra(make_deps: MakeDeps, aws: LocalAws) -> None:
    deps = make_deps(config())
    wiring.use(deps)
    handler = load_handler("provisioner", ROOT / "functions")
    pods = pending_pods(8, deps=deps)
    deps.cluster.bind()  # type: ignore[attr-defined]  # the kube-scheduler marks them Unschedulable
    handler(_sqs_event(pods, T0, copies=3), LambdaContext())          # duplicates within one batch
    first = {i["InstanceId"] for i in running_instances(aws)}
    for _ in range(2):                                         # and redelivered in later batches
        deps.clock.now += timedelta(seconds=30)
        handler(_sqs_event(pods, deps.clock.now), LambdaContext())
    assert first and {i["InstanceId"] for i in running_instances(aws)} == first


@pytest.mark.parametrize("seed", range(20))
def test_two_concurrent_provisioners_never_double_launch_or_pass_the_limit(make_deps: MakeDeps, aws: LocalAws, seed: int) -> None:
    rng = random.Random(seed)
    limit = 300
    deps = make_deps(config(limit))
    pods = pending_pods(500, cpu="500m")
    batches = []
    for _ in range(2):  # overlapping, differently ordered halves
        chosen = rng.sample(pods, rng.randint(250, 500))
        batches.append(chosen)
    errors: list[BaseException] = []

    def work(batch: list[Pod]) -> None:
        try:
            provision.provision_pods(batch, deps, reason="test")
        except BaseException as exc:  # pragma: no cover - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(b,)) for b in batches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    claims = deps.ledger.active()
    nominated = [p for c in claims for p in c.pods]
    assert len(nominated) == len(set(nominated)), "a pod was provisioned twice"
    assert len(running_instances(aws)) == len(claims)
    cpu_reserved = sum(c.reserved.get("cpu", 0) for c in claims)
    assert cpu_reserved <= limit * 1000
    assert deps.ledger.usage().get("default", {}).get("cpu", 0) == cpu_reserved


def test_crash_between_launch_and_claim_write_is_repaired_not_killed(make_deps: MakeDeps, aws: LocalAws) -> None:
    """The process dies after CreateFleet returned (the simulation's crash hook on the real EC2 client):
    the instance runs, its claim is RESERVED without an instance id. After the launch deadline the
    disruption function records the instance on the claim its tag names; it never takes it for an orphan,
    and the pods stay nominated to it, so provisioning them again launches nothing."""
    deps = make_deps(config())
    pods = pending_pods(3, deps=deps)
    crash = CrashFaults([Crash(point="after-create-fleet")], lambda: 0.0, lambda: "provisioner")
    crash.register(deps.compute.client)  # type: ignore[attr-defined]
    try:
        with pytest.raises(InvocationKilled):
            provision.provision_pods(pods, deps, reason="test")
    finally:
        crash.unregister(deps.compute.client)  # type: ignore[attr-defined]
    (instance,) = running_instances(aws)
    (claim,) = deps.ledger.active()
    assert claim.status == ClaimStatus.RESERVED and claim.instance_id is None
    # within the launch deadline nothing is touched: a live provisioner may still be writing the claim
    first = disrupt.run(deps)
    assert (first.repaired, first.released, first.orphans) == ([], [], [])
    deps.clock.now += timedelta(seconds=deps.settings.launch_deadline_seconds)
    summary = disrupt.run(deps)
    assert summary.repaired == [claim.name] and summary.released == [] and summary.orphans == []
    stored = deps.ledger.get(claim.name)
    assert stored is not None and stored.status == ClaimStatus.LAUNCHED
    assert (stored.instance_id, stored.instance_type) == (instance["InstanceId"], instance["InstanceType"])
    outcome = provision.provision_pods(pods, deps, reason="test")
    assert outcome.launched == [] and sorted(outcome.already_nominated) == sorted(p.key for p in pods)
    deps.clock.now += timedelta(seconds=deps.settings.orphan_grace_seconds + 1)
    assert disrupt.run(deps).orphans == []
    assert [i["InstanceId"] for i in running_instances(aws)] == [instance["InstanceId"]]


def test_crash_before_create_fleet_releases_the_reservation_after_the_launch_deadline(
        make_deps: MakeDeps, aws: LocalAws) -> None:
    deps = make_deps(config())
    pods = pending_pods(3, deps=deps)
    crash = CrashFaults([Crash(point="before-create-fleet")], lambda: 0.0, lambda: "provisioner")
    crash.register(deps.compute.client)  # type: ignore[attr-defined]
    try:
        with pytest.raises(InvocationKilled):
            provision.provision_pods(pods, deps, reason="test")
    finally:
        crash.unregister(deps.compute.client)  # type: ignore[attr-defined]
    assert running_instances(aws) == []
    (claim,) = deps.ledger.active()
    assert provision.provision_pods(pods, deps, reason="test").launched == []  # the pods are held by it
    deps.clock.now += timedelta(seconds=deps.settings.launch_deadline_seconds)
    assert disrupt.run(deps).released == [claim.name]
    outcome = provision.provision_pods(pods, deps, reason="test")
    assert outcome.launched and sorted(p for c in outcome.launched for p in c.pods) == sorted(p.key for p in pods)
    assert len(running_instances(aws)) == 1


def test_pods_that_fit_an_in_flight_node_are_nominated_to_it_not_launched_for(make_deps: MakeDeps, aws: LocalAws) -> None:
    deps = make_deps(config())
    first = provision.provision_pods(pending_pods(1, cpu="250m", prefix="x", deps=deps), deps, reason="test")
    (claim,) = first.launched
    second = provision.provision_pods(pending_pods(2, cpu="250m", prefix="y", deps=deps), deps, reason="test")
    assert second.launched == []
    assert second.nominated_in_flight == {claim.name: ["default/y0", "default/y1"]}
    assert len(running_instances(aws)) == 1
    stored = deps.ledger.get(claim.name)
    assert sorted(stored.pods) == ["default/x0", "default/y0", "default/y1"]
    assert stored.requested["cpu"] == 750
    # the same pods again (a duplicate event): nothing new
    again = provision.provision_pods(pending_pods(2, cpu="250m", prefix="y"), deps, reason="test")
    assert again.launched == [] and sorted(again.already_nominated) == ["default/y0", "default/y1"]


def _joined(deps: wiring.Dependencies, claim_name: str, *, ready: bool) -> str:
    """The claim's node as its kubelet registers it and the registrar labels it (not initialized yet)."""
    claim = deps.ledger.get(claim_name)
    assert claim is not None and claim.instance_id and claim.status != ClaimStatus.REGISTERED
    name = f"ip-{claim.instance_id}"
    allocatable = {"cpu": f"{claim.allocatable['cpu']}m", "memory": str(claim.allocatable["memory"]), "pods": "20"}
    deps.cluster.add_node({  # type: ignore[attr-defined]
        "metadata": {"name": name, "labels": {"carpool.dev/nodeclaim": claim.name}},
        "spec": {"providerID": f"aws:///{claim.zone}/{claim.instance_id}"},
        "status": {"allocatable": allocatable, "capacity": allocatable,
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    })
    return name


def _bound(deps: wiring.Dependencies, node: str, cpu_millis: int) -> None:
    """A pod the kube-scheduler bound to `node` (it knows nothing of carpool's nominations)."""
    deps.cluster.add_pod({  # type: ignore[attr-defined]
        "metadata": {"name": "other", "namespace": "default", "uid": "other"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x",
                                                   "resources": {"requests": {"cpu": f"{cpu_millis}m"}}}]},
        "status": {"phase": "Running"},
    })


def test_a_ready_node_of_an_in_flight_claim_offers_only_the_room_left_by_its_bound_pods(
        make_deps: MakeDeps, aws: LocalAws) -> None:
    """The claim's node is Ready before the registrar marks the claim, and the kube-scheduler filled it
    with a pod carpool planned elsewhere: the room carpool planned there is gone, so new pods get a node
    of their own instead of a nomination to a full one (which would leave them waiting for nothing)."""
    deps = make_deps(config())
    (claim,) = provision.provision_pods(pending_pods(1, cpu="250m", prefix="x", deps=deps), deps, reason="test").launched
    node = _joined(deps, claim.name, ready=True)
    stored = deps.ledger.get(claim.name)
    assert stored is not None
    _bound(deps, node, stored.allocatable["cpu"] - 100)
    second = provision.provision_pods(pending_pods(2, cpu="250m", prefix="y", deps=deps), deps, reason="test")
    assert second.nominated_in_flight == {}
    assert sorted(p for c in second.launched for p in c.pods) == ["default/y0", "default/y1"]


def test_a_joined_node_not_ready_yet_keeps_the_room_carpool_planned(make_deps: MakeDeps, aws: LocalAws) -> None:
    """Until the node is Ready nothing but DaemonSets binds to it: the claim's planned room still holds."""
    deps = make_deps(config())
    (claim,) = provision.provision_pods(pending_pods(1, cpu="250m", prefix="x", deps=deps), deps, reason="test").launched
    _joined(deps, claim.name, ready=False)
    second = provision.provision_pods(pending_pods(2, cpu="250m", prefix="y", deps=deps), deps, reason="test")
    assert second.launched == []
    assert second.nominated_in_flight == {claim.name: ["default/y0", "default/y1"]}
