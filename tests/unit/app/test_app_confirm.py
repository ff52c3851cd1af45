"""The provisioner's rules for trusting an event (confirm), what a claim reserves, the deadline, and the
batch's last line of defence."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from carpool.api import events
from carpool.api.k8s import Pod
from carpool.app import batch, parsing
from carpool.app.deadline import ANSWER_MARGIN_SECONDS, Deadline, allows_a_claim
from carpool.app.provisioning import confirm, reserve
from carpool.state.memory import MemoryLedger
from carpool.state.models import NOMINATION_HOLD_AFTER_REGISTRATION, Claim
from carpool.state.ports import ReservationRefused

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def pod(name: str = "web", **changes: Any) -> Pod:
    raw: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]},
        "status": {"phase": "Pending",
                   "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    }
    for path, value in changes.items():
        node = raw
        *parents, leaf = path.split("__")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return Pod.model_validate(raw)


# -- confirm ----------------------------------------------------------------------------------------------
def test_a_pod_still_pending_and_unschedulable_is_confirmed_as_the_cluster_has_it() -> None:
    event = pod()
    live = pod(metadata__labels={"changed": "after the event"})
    out = confirm.confirm({event.key: (event, NOW)}, {live.key: live})
    assert out.dropped == {} and out.pods[event.key] is live


@pytest.mark.parametrize(("live", "expected"), [
    (None, "no longer an unbound Pending pod"),
    (pod(metadata__uid="uid-other"), "replaced: the event is for uid uid-web, the cluster's pod is uid-other"),
    (pod(spec__nodeName="ip-1"), "bound to node ip-1 after the event"),
    (pod(status__phase="Succeeded"), "finished (phase Succeeded)"),
    (pod(status__phase="Failed"), "finished (phase Failed)"),
    (pod(metadata__deletionTimestamp="2026-01-01T00:00:00Z"), "being deleted"),
    (pod(metadata__ownerReferences=[{"kind": "DaemonSet", "name": "agent"}]), "a DaemonSet pod"),
    (pod(metadata__ownerReferences=[{"kind": "Node", "name": "ip-1"}]), "a static pod"),
    (pod(status__nominatedNodeName="ip-2"), "waiting for a preemption on node ip-2"),
    (pod(status__conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]),
     "not marked Unschedulable by the kube-scheduler (PodScheduled=False/SchedulingGated)"),
    (pod(status__conditions=[]), "not marked Unschedulable by the kube-scheduler (no PodScheduled condition)"),
])
def test_events_the_cluster_no_longer_backs_are_dropped_with_their_reason(live: Pod | None, expected: str) -> None:
    event = pod()
    out = confirm.confirm({event.key: (event, NOW)}, {} if live is None else {live.key: live})
    assert out.pods == {}
    assert expected in out.dropped[event.key]


def test_an_event_without_a_uid_is_matched_by_name() -> None:
    event = pod(metadata__uid=None)
    assert confirm.verdict(event, pod(), NOW) is None


# -- what a claim reserves ----------------------------------------------------------------------------------
def test_a_claim_reserves_every_resource_at_its_largest_option_limited_or_not() -> None:
    largest = {"cpu": 8000, "memory": 32 * 2**30, "pods": 58, "nvidia.com/gpu": 4, "ephemeral-storage": 10}
    everything = {**largest, "nodes": 1}
    # unlimited resources are held too: a limit added while the node runs counts it
    assert reserve.reservation(largest, None) == everything
    assert reserve.reservation(largest, {"nvidia.com/gpu": 1, "nodes": 3, "pods": 100}) == everything
    # a limited resource the types do not have is reserved as 0 (it still takes part in the condition)
    assert reserve.reservation({"cpu": 2000}, {"amd.com/gpu": 2})["amd.com/gpu"] == 0


def _claim(name: str, pods: list[str], reserved: dict[str, int]) -> Claim:
    return Claim(name=name, nodepool="gpu", nodeclass="default", created_at=NOW, pods=pods, reserved=reserved)


def test_the_memory_ledger_refuses_the_claim_that_would_pass_a_gpu_limit() -> None:
    ledger = MemoryLedger()
    limits = {"nvidia.com/gpu": 1}
    ledger.reserve(_claim("a", ["default/a"], {"cpu": 4000, "nodes": 1, "nvidia.com/gpu": 1}), limits, NOW, 600)
    with pytest.raises(ReservationRefused, match="limit nvidia.com/gpu exhausted"):
        ledger.reserve(_claim("b", ["default/b"], {"cpu": 4000, "nodes": 1, "nvidia.com/gpu": 1}), limits, NOW, 600)
    assert ledger.usage() == {"gpu": {"cpu": 4000, "nodes": 1, "nvidia.com/gpu": 1}}


def test_a_registered_claim_holds_its_pods_briefly_and_a_replacement_may_take_them() -> None:
    ledger = MemoryLedger()
    ledger.reserve(_claim("old", ["default/a"], {"nodes": 1}), None, NOW, 900)
    ledger.mark_registered("old", "ip-1", NOW)
    later = NOW + NOMINATION_HOLD_AFTER_REGISTRATION - timedelta(seconds=1)
    assert ledger.nominated(later) == {"default/a": "old"}
    with pytest.raises(ReservationRefused):
        ledger.reserve(_claim("dup", ["default/a"], {"nodes": 1}), None, later, 900)
    ledger.reserve(_claim("new", ["default/a"], {"nodes": 1}), None, later, 900, replacing={"old"})
    assert ledger.nominated(later) == {"default/a": "new"}


# -- the deadline -----------------------------------------------------------------------------------------
class _Context:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def get_remaining_time_in_millis(self) -> int:
        return self.ms


def test_the_deadline_comes_from_the_lambda_context_minus_the_answer_margin() -> None:
    clock = iter([1000.0, 1000.0, 1040.0]).__next__
    deadline = Deadline.after(60.0, claim_budget=20.0, clock=clock)
    assert deadline.at == 1000.0 + 60.0 - ANSWER_MARGIN_SECONDS
    assert deadline.allows_a_claim()  # 57 s left
    assert not deadline.allows_a_claim()  # 17 s left: a claim may need 20


def test_a_context_without_remaining_time_sets_no_deadline() -> None:
    assert Deadline.from_lambda_context(object()) is None
    assert allows_a_claim(None)
    short = Deadline.from_lambda_context(_Context(5_000))
    assert short is not None and not short.allows_a_claim()
    long = Deadline.from_lambda_context(_Context(120_000))
    assert long is not None and long.allows_a_claim()


# -- the batch's last line of defence ---------------------------------------------------------------------
def _sqs(bodies: list[str]) -> dict[str, Any]:
    return {"Records": [{"messageId": f"m{i}", "receiptHandle": "r", "body": b, "attributes": {},
                         "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs",
                         "eventSourceARN": "arn:aws:sqs:us-east-1:1:q", "awsRegion": "us-east-1"}
                        for i, b in enumerate(bodies)]}


def _body(p: Pod) -> str:
    return json.dumps(events.delivered_event(events.pod_unschedulable_entry("demo", p, NOW, "bus"), event_id=p.name))


def test_a_use_case_that_raises_fails_the_good_records_instead_of_the_invocation() -> None:
    def act(parsed: dict[str, Any]) -> tuple[None, dict[str, str]]:
        raise RuntimeError("state table unreachable")

    outcome = batch.process(_sqs([_body(pod("a")), "{bad", _body(pod("b"))]), parsing.pod_unschedulable, act)
    assert outcome.failures["m0"] == outcome.failures["m2"] == "RuntimeError: state table unreachable"
    assert "m1" in outcome.failures and outcome.failures["m1"] != outcome.failures["m0"]


@pytest.mark.parametrize(("field", "value", "message"), [
    ("name", "x" * 5000, "at most 253 characters"),
    ("name", "Web_1", "RFC 1123 subdomain"),
    ("name", "", "RFC 1123 subdomain"),
    ("namespace", "n" * 64, "at most 63 characters"),
    ("namespace", "team.a", "RFC 1123 label"),
])
def test_names_are_bounded_at_the_parser_as_kubernetes_bounds_them(field: str, value: str, message: str) -> None:
    body = json.loads(_body(pod("ok")))
    body["detail"]["pod"]["metadata"][field] = value
    with pytest.raises(events.EventError, match=message):
        parsing.pod_unschedulable(json.dumps(body))
    parsing.pod_unschedulable(_body(pod("a" * 253)))  # the longest name Kubernetes allows is fine
