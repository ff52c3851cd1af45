"""Exactly-once launches under real delivery, faults and hostile input: the real provisioner handler on
local AWS (moto on 127.0.0.1), the simulation's cluster playing the kube-scheduler.

- The same batch delivered three times, from four threads at once, then again after the node registered
  and again after the pods were bound: the instances launched are the instances the batch needs.
- Faults injected into one claim (EC2 InternalError, UnauthorizedOperation, persistent
  RequestLimitExceeded, a throttled DynamoDB write) through botocore's `before-send` hook, so botocore's
  own retries run as they would against AWS: only that claim's records are retried, no reservation is
  left behind, every invocation answers before its deadline.
- A record with a 5,000-character pod name fails alone; a `nvidia.com/gpu: 1` limit launches one GPU.
"""

from __future__ import annotations

import contextvars
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from carpool_env import (
    CLUSTER,
    MakeDeps,
    manifests,
    nodeclass,
    nodepool,
    pending_pods,
    running_instances,
    sqs_batch,
)

from carpool import observability
from carpool.adapters.aws import session
from carpool.api import events
from carpool.api.k8s import Pod
from carpool.app import wiring
from carpool.app.deadline import Deadline
from carpool.app.provisioning import provision, schedule
from carpool.app.provisioning.invocation import Invocation
from carpool.app.provisioning.world import World
from carpool.app.wiring import Dependencies
from carpool.sim.localaws.lambda_runtime import load_handler
from carpool.sim.localaws.server import LocalAws
from carpool.state.models import NOMINATION_HOLD_AFTER_REGISTRATION, ClaimStatus

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("event_path")

ON_DEMAND = {"karpenter.k8s.aws/instance-family": ["c5", "m5"], "karpenter.sh/capacity-type": ["on-demand"]}
#: 2-vCPU types only: a 1500m pod needs a node of its own, so N pods are N claims
ONE_POD_PER_NODE = {**ON_DEMAND, "karpenter.k8s.aws/instance-size": ["large"]}
AL2023_NVIDIA = {"name": "amazon-eks-node-al2023-x86_64-nvidia-1.32-v20260101", "architecture": "x86_64",
                 "creationDate": "2026-01-01T00:00:00Z",
                 "parameter": "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/nvidia/recommended/image_id"}


def config(requirements: dict[str, list[str]] = ON_DEMAND, limits: dict[str, Any] | None = None) -> str:
    return manifests(nodepool(requirements=requirements, limits=limits or {"cpu": "1000"}), nodeclass())


class Context:
    """A Lambda context whose remaining time runs down with the wall clock."""

    function_name = "carpool-provisioner"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:carpool-provisioner"
    aws_request_id = "req"

    def __init__(self, seconds: float) -> None:
        self._end = time.monotonic() + seconds

    def get_remaining_time_in_millis(self) -> int:
        return int((self._end - time.monotonic()) * 1000)


def unschedulable(n: int, deps: Dependencies, *, cpu: str = "1", prefix: str = "p",
                  selectors: list[dict[str, str]] | None = None, **resources: str) -> list[Pod]:
    """Pods created in the cluster and marked Unschedulable by its scheduler (no node fits yet); pod i
    gets `selectors[i]` as its nodeSelector."""
    pods = pending_pods(n, cpu=cpu, prefix=prefix)
    for i, pod in enumerate(pods):
        raw = pod.to_json_dict()
        if selectors:
            raw["spec"]["nodeSelector"] = selectors[i]
        if resources:
            raw["spec"]["containers"][0]["resources"]["requests"].update(resources)
            raw["spec"]["containers"][0]["resources"]["limits"] = dict(resources)
        deps.cluster.add_pod(raw)  # type: ignore[attr-defined]
    deps.cluster.bind()  # type: ignore[attr-defined]
    live = {p.key: p for p in deps.cluster.pending_pods()}
    assert all(live[p.key].is_unschedulable() for p in pods)
    return [live[p.key] for p in pods]


def batch_of(pods: list[Pod], deps: Dependencies, copies: int = 1) -> dict[str, Any]:
    return sqs_batch([events.pod_unschedulable_entry(CLUSTER, p, deps.clock(), "bus")
                      for _ in range(copies) for p in pods])


def failed_ids(response: dict[str, Any]) -> set[str]:
    return {f["itemIdentifier"] for f in response["batchItemFailures"]}


def planned_claims(pods: list[Pod], deps: Dependencies) -> int:
    """How many nodes the batch needs: one plan of it, before anything is launched."""
    call = Invocation(deps, deps.clock(), "provisioning")
    world = World.read(deps, deps.clock())
    _, result, _ = schedule.plan_round({p.key: p for p in pods}, world, call)
    assert not result.unschedulable and not call.outcome.failed
    return len(result.claims)


def register_and_bind(deps: Dependencies, bind: bool = True) -> None:
    """Every launched claim's node joins (Ready, with the launched type's allocatable) and is registered;
    then the cluster's scheduler binds what fits (unless `bind` is False)."""
    for claim in deps.ledger.active():
        if claim.status != ClaimStatus.LAUNCHED:
            continue
        name = f"ip-{claim.instance_id}.ec2.internal"
        allocatable = {"cpu": f"{claim.allocatable['cpu']}m", "memory": str(claim.allocatable["memory"]),
                       "pods": str(claim.allocatable.get("pods", 29))}
        deps.cluster.add_node({  # type: ignore[attr-defined]
            "metadata": {"name": name, "labels": {**claim.labels, "karpenter.sh/nodepool": claim.nodepool}},
            "spec": {"providerID": f"aws:///{claim.zone}/{claim.instance_id}"},
            "status": {"allocatable": allocatable, "capacity": allocatable,
                       "conditions": [{"type": "Ready", "status": "True"}]},
        })
        deps.ledger.mark_registered(claim.name, name, deps.clock())
    if bind:
        deps.cluster.bind()  # type: ignore[attr-defined]


def assert_books_balance(deps: Dependencies, aws: LocalAws) -> None:
    """No reservation without an instance, usage equal to what the live claims hold, one instance per
    claim, and no pod held by two claims."""
    claims = deps.ledger.active()
    assert all(c.status != ClaimStatus.RESERVED and c.instance_id for c in claims), "a reservation was left behind"
    assert {c.instance_id for c in claims} == {i["InstanceId"] for i in running_instances(aws)}
    held = [p for c in claims for p in c.pods]
    assert len(held) == len(set(held))
    usage = deps.ledger.usage().get("default", {})
    assert usage.get("cpu", 0) == sum(c.reserved.get("cpu", 0) for c in claims)
    assert usage.get("nodes", 0) == len(claims)


# -- delivered again and again --------------------------------------------------------------------------
@pytest.mark.parametrize("n_pods", [6, 13])
def test_duplicates_concurrent_and_late_launch_only_what_is_needed(make_deps: MakeDeps, aws: LocalAws, n_pods: int) -> None:
    deps = make_deps(config())
    wiring.use(deps)
    handler = load_handler("provisioner", ROOT / "functions")
    pods = unschedulable(n_pods, deps, cpu="1500m")
    needed = planned_claims(pods, deps)
    assert needed >= 1
    answers: list[dict[str, Any]] = []
    errors: list[BaseException] = []

    def deliver() -> None:
        try:
            answers.append(handler(batch_of(pods, deps, copies=3), Context(60)))
        except BaseException as exc:  # pragma: no cover - surfaced below
            errors.append(exc)

    # each thread in a copy of this context: the dependencies `wiring.use` installed are context-local
    threads = [threading.Thread(target=contextvars.copy_context().run, args=(deliver,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(answers) == 4
    assert all(a == {"batchItemFailures": []} for a in answers)
    assert len(running_instances(aws)) == needed
    assert sorted(p for c in deps.ledger.active() for p in c.pods) == sorted(p.key for p in pods)
    assert_books_balance(deps, aws)

    # the nodes registered, the kube-scheduler has not bound the pods yet: the nominations still hold
    deps.clock.now += timedelta(seconds=60)
    register_and_bind(deps, bind=False)
    assert handler(batch_of(pods, deps), Context(60)) == {"batchItemFailures": []}
    assert len(running_instances(aws)) == needed
    # bound: the events are stale, whatever the nominations say by now
    deps.cluster.bind()  # type: ignore[attr-defined]
    deps.clock.now += NOMINATION_HOLD_AFTER_REGISTRATION
    outcome, retry = provision.run({f"m{i}": _parsed(p, deps) for i, p in enumerate(pods)}, deps)
    assert retry == {} and outcome.launched == []
    assert set(outcome.dropped) == {p.key for p in pods}
    assert all("no longer an unbound Pending pod" in r for r in outcome.dropped.values())
    assert handler(batch_of(pods, deps, copies=3), Context(60)) == {"batchItemFailures": []}
    assert len(running_instances(aws)) == needed


def _parsed(pod: Pod, deps: Dependencies) -> events.PodUnschedulableEvent:
    entry = events.pod_unschedulable_entry(CLUSTER, pod, deps.clock(), "bus")
    event = events.parse_cluster_event(events.delivered_event(entry, event_id=pod.name))
    assert isinstance(event, events.PodUnschedulableEvent)
    return event


def test_events_for_deleted_replaced_finished_and_daemonset_pods_launch_nothing(make_deps: MakeDeps, aws: LocalAws) -> None:
    deps = make_deps(config())
    pods = unschedulable(5, deps, cpu="1500m")
    cluster: Any = deps.cluster
    cluster.delete_pod(pods[0].key)
    replaced = pods[1].to_json_dict()
    replaced["metadata"]["uid"] = "another-uid"
    cluster.delete_pod(pods[1].key)
    cluster.add_pod(replaced)
    cluster.pods[pods[2].key].raw["status"]["phase"] = "Succeeded"
    ds = pods[3].to_json_dict()
    ds["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "d"}]
    cluster.delete_pod(pods[3].key)
    cluster.add_pod(ds)
    cluster.bind()
    outcome, retry = provision.run({f"m{i}": _parsed(p, deps) for i, p in enumerate(pods)}, deps)
    assert retry == {}
    assert set(outcome.dropped) == {p.key for p in pods[:4]}
    assert "replaced" in outcome.dropped[pods[1].key]
    assert "DaemonSet" in outcome.dropped[pods[3].key]
    assert [c.pods for c in outcome.launched] == [[pods[4].key]]
    assert len(running_instances(aws)) == 1


# -- faults, one claim at a time ------------------------------------------------------------------------
class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


def _ec2_error(code: str, status: int) -> AWSResponse:
    body = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response><Errors><Error><Code>{code}</Code>"
            f"<Message>{code} (injected)</Message></Error></Errors><RequestID>inj</RequestID></Response>").encode()
    return AWSResponse("https://ec2.local/", status, {}, _Raw(body))


def _dynamodb_throttle() -> AWSResponse:
    body = json.dumps({"__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
                       "message": "The level of configured provisioned throughput for the table was exceeded (injected)"})
    return AWSResponse("https://dynamodb.local/", 400, {"x-amzn-RequestId": "inj"}, _Raw(body.encode()))


@dataclass
class Fault:
    """Fails every attempt of every request about the `nth` distinct claim (a request writing several
    claims, a batch, is about each of them). `attempts` counts the failed attempts per request body."""

    event: str | tuple[str, ...]
    pick: Callable[[Any], str | list[str] | None]
    answer: Callable[[], AWSResponse]
    nth: int = 2
    seen: list[str] = field(default_factory=list)
    per_request: dict[str, int] = field(default_factory=dict)

    @property
    def events(self) -> tuple[str, ...]:
        return (self.event,) if isinstance(self.event, str) else self.event

    @property
    def attempts(self) -> int:
        return sum(self.per_request.values())

    def __call__(self, request: Any, **_: Any) -> AWSResponse | None:
        subjects = self.subjects(request)
        for subject in subjects:
            if subject not in self.seen:
                self.seen.append(subject)
        if self.hit(subjects):
            body = _body(request)
            self.per_request[body] = self.per_request.get(body, 0) + 1
            return self.answer()
        return None

    def subjects(self, request: Any) -> list[str]:
        found = self.pick(request)
        return [] if found is None else [found] if isinstance(found, str) else found

    def hit(self, subjects: list[str]) -> bool:
        return len(self.seen) >= self.nth and self.seen[self.nth - 1] in subjects


class ThrottleAll(Fault):
    """Fails every attempt of every claim."""

    def hit(self, subjects: list[str]) -> bool:
        return bool(subjects)


def _body(request: Any) -> str:
    body = request.body
    return body.decode() if isinstance(body, bytes) else str(body or "")


def _fleet_token(request: Any) -> str | None:
    found = re.search(r"ClientToken=([^&]+)", _body(request))
    return found.group(1) if found else None


def _reserved_claims(request: Any) -> list[str] | None:
    """The claims a reserve transaction writes (their claim Puts are conditional on not existing)."""
    body = _body(request)
    found = re.findall(r'"S":\s*"CLAIM#([^"]+)"', body)
    return found if found and "attribute_not_exists(pk)" in body and '"Put"' in body else None


def _written_claims(request: Any) -> list[str] | None:
    """The claims a launch record writes: Puts conditional on the claim's version (`#ver`), one claim's
    PutItem or a transaction of several (a reservation's Puts are conditional on not existing, a
    release's Delete is not a write of the claim)."""
    body = _body(request)
    written = '"#ver"' in body and '"Delete"' not in body
    return (re.findall(r'"S":\s*"CLAIM#([^"]+)"', body) or None) if written else None


FAULTS: dict[str, Callable[[], Fault]] = {
    "InternalError": lambda: Fault("before-send.ec2.CreateFleet", _fleet_token, lambda: _ec2_error("InternalError", 500)),
    "UnauthorizedOperation": lambda: Fault("before-send.ec2.CreateFleet", _fleet_token,
                                           lambda: _ec2_error("UnauthorizedOperation", 403)),
    "RequestLimitExceeded": lambda: Fault("before-send.ec2.CreateFleet", _fleet_token,
                                          lambda: _ec2_error("RequestLimitExceeded", 503)),
    "throttled reserve": lambda: Fault("before-send.dynamodb.TransactWriteItems", _reserved_claims, _dynamodb_throttle),
    "throttled claim write": lambda: Fault(("before-send.dynamodb.PutItem", "before-send.dynamodb.TransactWriteItems"),
                                           _written_claims, _dynamodb_throttle),
}


@pytest.fixture
def inject() -> Iterator[Callable[[Fault], Fault]]:
    """Registers faults on the process's shared EC2 and DynamoDB clients; removed after the test."""
    registered: list[Fault] = []

    def add(fault: Fault) -> Fault:
        for event in fault.events:
            session.client(event.split(".")[1]).meta.events.register(event, fault)
        registered.append(fault)
        return fault

    yield add
    for fault in registered:
        remove(fault)


def remove(fault: Fault) -> None:
    for event in fault.events:
        session.client(event.split(".")[1]).meta.events.unregister(event, fault)


#: one node each, and four different CreateFleet requests (claims with identical requests share one)
DISTINCT_REQUESTS = [{"topology.kubernetes.io/zone": "us-east-1a"}, {"topology.kubernetes.io/zone": "us-east-1b"},
                     {"node.kubernetes.io/instance-type": "c5.large"}, {"node.kubernetes.io/instance-type": "m5.large"}]


@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_a_failing_claim_fails_only_its_records_and_leaves_nothing_reserved(
    make_deps: MakeDeps, aws: LocalAws, inject: Callable[[Fault], Fault], kind: str
) -> None:
    deps = make_deps(config(ONE_POD_PER_NODE))
    wiring.use(deps)
    handler = load_handler("provisioner", ROOT / "functions")
    pods = unschedulable(4, deps, cpu="1500m", selectors=DISTINCT_REQUESTS)
    fault = inject(FAULTS[kind]())
    started = time.monotonic()
    response = handler(batch_of(pods, deps), Context(60))
    elapsed = time.monotonic() - started
    assert fault.attempts >= 1, "the fault never fired"
    launched = {p for c in deps.ledger.active() for p in c.pods}
    assert len(launched) == 3, "the other claims must go on"
    (failed,) = failed_ids(response)
    assert pods[int(failed.removeprefix("m"))].key not in launched  # exactly the records of the failed claim
    assert_books_balance(deps, aws)
    assert deps.ledger.nominated(deps.clock(), [p.key for p in pods]).keys() == launched
    assert elapsed < 20, f"one failing claim took {elapsed:.1f}s"
    if kind in ("RequestLimitExceeded", "InternalError") or kind.startswith("throttled"):
        # botocore's retries, and only theirs, for each request about the claim (a batch that held it
        # is done again claim by claim, so the claim's own write fails alone)
        assert set(fault.per_request.values()) == {session.DEFAULT_MAX_ATTEMPTS}
    # redelivered without the fault: the failed record's pod gets its node
    remove(fault)
    again = handler(batch_of(pods, deps), Context(60))
    assert again == {"batchItemFailures": []}
    assert {p for c in deps.ledger.active() for p in c.pods} == {p.key for p in pods}
    assert_books_balance(deps, aws)


def test_persistent_throttling_answers_before_the_deadline(
    make_deps: MakeDeps, aws: LocalAws, inject: Callable[[Fault], Fault]
) -> None:
    """Every CreateFleet throttled: claims stop being started while a claim's worst case still fits,
    the invocation answers before the context's deadline, every record is retried, nothing is held."""
    deps = make_deps(config(ONE_POD_PER_NODE))
    wiring.use(deps)
    handler = load_handler("provisioner", ROOT / "functions")
    pods = unschedulable(12, deps, cpu="1500m")
    fault = inject(ThrottleAll("before-send.ec2.CreateFleet", _fleet_token,
                               lambda: _ec2_error("RequestLimitExceeded", 503)))
    remaining = 27.0
    started = time.monotonic()
    response = handler(batch_of(pods, deps), Context(remaining))
    elapsed = time.monotonic() - started
    assert elapsed < remaining - 1, f"answered after {elapsed:.1f}s of {remaining}s"
    assert failed_ids(response) == {f"m{i}" for i in range(len(pods))}
    assert deps.ledger.active() == [] and running_instances(aws) == []
    assert 1 <= len(fault.seen) < len(pods), "claims must stop being started before the deadline"


def test_claims_not_started_before_the_deadline_are_reported_with_their_reason(make_deps: MakeDeps, aws: LocalAws) -> None:
    deps = make_deps(config(ONE_POD_PER_NODE))
    pods = unschedulable(3, deps, cpu="1500m")
    ticks = iter([100.0, 100.0, 100.0, 119.0])  # the round starts; the third claim finds the deadline near
    deadline = Deadline(at=125.0, claim_budget=10.0, clock=lambda: next(ticks, 125.0))
    outcome, retry = provision.run({f"m{i}": _parsed(p, deps) for i, p in enumerate(pods)}, deps, deadline)
    assert len(outcome.launched) == 2
    (late,) = set(outcome.failed)
    assert "deadline" in outcome.failed[late]
    assert retry == {f"m{[p.key for p in pods].index(late)}": outcome.failed[late]}
    assert_books_balance(deps, aws)


# -- hostile input --------------------------------------------------------------------------------------
def test_a_5000_character_pod_name_fails_alone(make_deps: MakeDeps, aws: LocalAws) -> None:
    deps = make_deps(config())
    wiring.use(deps)
    handler = load_handler("provisioner", ROOT / "functions")
    good = unschedulable(40, deps, cpu="250m")
    entries = [events.pod_unschedulable_entry(CLUSTER, p, deps.clock(), "bus") for p in good]
    bad = dict(entries[0])  # what a hostile or broken publisher could put on the bus
    detail = json.loads(bad["Detail"])
    detail["pod"]["metadata"]["name"] = "x" * 5000
    bad["Detail"] = json.dumps(detail)
    response = handler(sqs_batch([*entries, bad]), Context(60))
    assert failed_ids(response) == {"m40"}
    assert sorted(p for c in deps.ledger.active() for p in c.pods) == sorted(p.key for p in good)
    assert_books_balance(deps, aws)


# -- limits -----------------------------------------------------------------------------------------------
def test_a_gpu_limit_of_one_launches_one_gpu(make_deps: MakeDeps, aws: LocalAws) -> None:
    aws.seed_amis([AL2023_NVIDIA])
    gpu_pool = {"karpenter.k8s.aws/instance-family": ["g4dn"], "karpenter.sh/capacity-type": ["on-demand"]}
    deps = make_deps(config(gpu_pool, limits={"cpu": "1000", "nvidia.com/gpu": "1"}))
    wiring.use(deps)
    handler = load_handler("provisioner", ROOT / "functions")
    pods = unschedulable(4, deps, cpu="1", **{"nvidia.com/gpu": "1"})
    assert handler(batch_of(pods[:2], deps), Context(60)) == {"batchItemFailures": []}
    deps.clock.now += timedelta(seconds=10)
    assert handler(batch_of(pods[2:], deps), Context(60)) == {"batchItemFailures": []}  # a later batch
    (claim,) = deps.ledger.active()
    assert claim.reserved["nvidia.com/gpu"] == 1
    assert deps.ledger.usage()["default"]["nvidia.com/gpu"] == 1
    (instance,) = running_instances(aws)
    assert instance["InstanceType"] == claim.instance_type and claim.instance_type.startswith("g4dn.")


def test_a_cluster_without_karpenters_crds_is_loud_and_retried(make_deps: MakeDeps, aws: LocalAws) -> None:
    deps = make_deps(config())
    deps.cluster.karpenter.installed.clear()  # type: ignore[attr-defined]  # the CRDs were never installed
    wiring.use(deps)
    handler = load_handler("provisioner", ROOT / "functions")
    pods = unschedulable(2, deps)
    before = observability.total("ConfigInvalid")
    response = handler(batch_of(pods, deps), Context(60))
    assert failed_ids(response) == {"m0", "m1"}
    assert observability.total("ConfigInvalid") == before + 1
    assert running_instances(aws) == []
