"""Interruption events are facts to check, and every invocation on one warning agrees (issue 30, items 7
and 10), through the real interruption Lambda handler on local AWS (moto) and the simulated cluster.

- An EC2 state-change "terminated" for an instance that is running and serving is confirmed with
  DescribeInstances first: forged or stale, it drains nothing, deletes nothing and releases nothing
  (logged and counted); once EC2 really terminated the instance, the same event is acted on.
- Two invocations on the same spot warning (a duplicate delivery read the claim before the first one
  wrote it) never blank the replacement the first launched: bare pods wait for it, none is lost.
- A spot warning within two minutes of the node's registration pre-launches a replacement although the
  node's pods are still nominated to another claim (the kube-scheduler bound them here, not where carpool
  planned them).
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from carpool_env import (
    MakeDeps,
    helper_client,
    manifests,
    nodeclass,
    nodepool,
    pending_pods,
    running_instances,
)

from carpool import observability
from carpool.api import events
from carpool.app import wiring
from carpool.app.provisioning import provision
from carpool.app.wiring import Dependencies
from carpool.sim.localaws.lambda_runtime import load_handler
from carpool.sim.localaws.server import LocalAws
from carpool.state.models import Claim

ROOT = Path(__file__).resolve().parents[2]
POOL = {"karpenter.k8s.aws/instance-family": ["m5"], "karpenter.sh/capacity-type": ["on-demand"],
        "karpenter.k8s.aws/instance-size": ["large"]}


class Context:
    function_name = "carpool-interruption"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:carpool-interruption"
    aws_request_id = "req"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def _deliver(deps: Dependencies, detail_type: str, detail: dict[str, Any]) -> dict[str, Any]:
    """One EventBridge event through the interruption handler, as its queue delivers it."""
    body = {"version": "0", "id": str(uuid.uuid4()), "detail-type": detail_type, "source": events.EC2_SOURCE,
            "account": "123456789012", "time": deps.clock().strftime("%Y-%m-%dT%H:%M:%SZ"), "region": "us-east-1",
            "resources": [], "detail": detail}
    record = {"messageId": "m1", "receiptHandle": "r", "body": json.dumps(body), "attributes": {},
              "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs",
              "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:missing", "awsRegion": "us-east-1"}
    answer: dict[str, Any] = load_handler("interruption", ROOT / "functions")({"Records": [record]}, Context())
    return answer


def _join(deps: Dependencies, claim: Claim) -> str:
    """The claim's node joins Ready and registered (what the kubelet and the registrar do)."""
    name = f"ip-{claim.instance_id}.ec2.internal"
    allocatable = {"cpu": f"{claim.allocatable['cpu']}m", "memory": str(claim.allocatable["memory"]), "pods": "29"}
    deps.cluster.add_node({  # type: ignore[attr-defined]
        "metadata": {"name": name, "labels": {**claim.labels, "karpenter.sh/nodepool": claim.nodepool}},
        "spec": {"providerID": f"aws:///{claim.zone}/{claim.instance_id}"},
        "status": {"allocatable": allocatable, "capacity": allocatable, "conditions": [{"type": "Ready", "status": "True"}]}})
    deps.ledger.mark_registered(claim.name, name, deps.clock())
    return name


def _replaced_by(claim: Claim | None) -> list[str]:
    """The replacement claims the interrupted node's disruption in progress waits for."""
    return list(claim.disruption.replaced_by) if claim is not None and claim.disruption is not None else []


@pytest.fixture
def deps(make_deps: MakeDeps) -> Dependencies:
    built = make_deps(manifests(nodepool(requirements=POOL), nodeclass()))
    wiring.use(built)
    return built


def _serving(deps: Dependencies, n: int = 3) -> tuple[Claim, str]:
    """`n` bare pods launched for, their node joined and serving them."""
    pods = pending_pods(n, cpu="500m", prefix="web", deps=deps)
    [claim] = provision.provision_pods(pods, deps, reason="test").launched
    deps.clock.now += timedelta(seconds=60)  # type: ignore[attr-defined]
    node = _join(deps, claim)
    deps.cluster.bind()  # type: ignore[attr-defined]
    assert len(deps.cluster.pods_on_node(node)) == n
    return claim, node


# -- item 7: a state change is confirmed with EC2 ------------------------------------------------------------
def test_a_terminated_event_for_a_running_serving_instance_does_nothing(deps: Dependencies, aws: LocalAws) -> None:
    claim, node = _serving(deps)
    before = observability.total("InterruptionsStale", kind="state-change")

    answer = _deliver(deps, events.INSTANCE_STATE_CHANGE, {"instance-id": claim.instance_id, "state": "terminated"})

    assert answer == {"batchItemFailures": []}  # dropped is the outcome, not a failure to retry
    assert deps.cluster.get_node(node) is not None and not deps.cluster.get_node(node).spec.unschedulable
    assert len(deps.cluster.pods_on_node(node)) == 3  # nothing evicted
    assert deps.ledger.find_by_instance(claim.instance_id or "") is not None  # claim kept: no orphan sweep
    assert [i["InstanceId"] for i in running_instances(aws)] == [claim.instance_id]
    assert observability.total("InterruptionsStale", kind="state-change") - before == 1


def test_the_same_event_is_acted_on_once_ec2_really_terminated_the_instance(deps: Dependencies, aws: LocalAws) -> None:
    claim, node = _serving(deps)
    helper_client(aws, "ec2").terminate_instances(InstanceIds=[claim.instance_id])

    answer = _deliver(deps, events.INSTANCE_STATE_CHANGE, {"instance-id": claim.instance_id, "state": "terminated"})

    assert answer == {"batchItemFailures": []}
    assert deps.cluster.get_node(node) is None
    assert deps.ledger.find_by_instance(claim.instance_id or "") is None


# -- item 10: two invocations on one warning, and a warning soon after registration -------------------------
class _ReadBefore:
    """The ledger as an invocation sees it when it read the interrupted claim before another invocation on
    the same warning wrote it (the two ran at once): that read returns the earlier copy, every other call
    is the real ledger's."""

    def __init__(self, ledger: Any, earlier: Claim) -> None:
        self._ledger, self._earlier = ledger, earlier

    def find_by_instance(self, instance_id: str) -> Claim | None:
        return self._earlier.model_copy(deep=True) if instance_id == self._earlier.instance_id else None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ledger, name)


def _spot_warning(deps: Dependencies, instance_id: str) -> dict[str, Any]:
    return _deliver(deps, events.SPOT_INTERRUPTION, {"instance-id": instance_id, "instance-action": "terminate"})


def test_two_invocations_on_one_warning_keep_the_replacement_and_evict_no_bare_pod(
        deps: Dependencies, aws: LocalAws) -> None:
    claim, node = _serving(deps)
    deps.clock.now += timedelta(minutes=5)  # type: ignore[attr-defined]
    earlier = deps.ledger.get(claim.name)
    assert earlier is not None

    assert _spot_warning(deps, claim.instance_id or "") == {"batchItemFailures": []}
    first = _replaced_by(deps.ledger.get(claim.name) or earlier)
    assert first, "the first invocation launched no replacement"

    wiring.use(dataclasses.replace(deps, ledger=_ReadBefore(deps.ledger, earlier)))  # type: ignore[arg-type]
    assert _spot_warning(deps, claim.instance_id or "") == {"batchItemFailures": []}

    assert len(deps.cluster.pods_on_node(node)) == 3, "a bare pod was evicted before its replacement exists"
    stored = deps.ledger.get(claim.name)
    assert stored is not None and _replaced_by(stored) == first
    assert len(running_instances(aws)) == 2  # the node and one replacement


def test_a_warning_soon_after_registration_pre_launches_a_replacement(deps: Dependencies, aws: LocalAws) -> None:
    pods = pending_pods(6, cpu="500m", prefix="web", deps=deps)
    launched = provision.provision_pods(pods, deps, reason="test").launched
    assert len(launched) == 2
    deps.clock.now += timedelta(seconds=60)  # type: ignore[attr-defined]
    # the node of the claim NOT holding the first pods joins first: the kube-scheduler (first fit, oldest
    # pod first) binds there the pods carpool planned for the other node
    holder = deps.ledger.nominated(deps.clock(), ["default/web0"])["default/web0"]
    other = next(c for c in launched if c.name != holder)
    first_node = _join(deps, other)
    _join(deps, next(c for c in launched if c.name == holder))
    deps.cluster.bind()  # type: ignore[attr-defined]
    on_first = {p.key for p in deps.cluster.pods_on_node(first_node)}
    assert "default/web0" in on_first
    deps.clock.now += timedelta(seconds=30)  # type: ignore[attr-defined]  (30 s after registration)

    assert _spot_warning(deps, other.instance_id or "") == {"batchItemFailures": []}

    stored = deps.ledger.get(other.name)
    assert stored is not None and _replaced_by(stored), "no replacement was pre-launched"
    assert len(running_instances(aws)) == 3
    assert {p.key for p in deps.cluster.pods_on_node(first_node)} == on_first  # bare pods wait for it
