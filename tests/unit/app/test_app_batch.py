"""Partial-batch behaviour: a bad record fails alone, with its reason; good records proceed together."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carpool.api import events
from carpool.api.k8s import Pod
from carpool.app import batch, parsing

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _pod(name: str) -> Pod:
    return Pod.model_validate({
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    })


def _good_body(name: str) -> str:
    entry = events.pod_unschedulable_entry("demo", _pod(name), NOW, "carpool-demo")
    return json.dumps(events.delivered_event(entry, event_id=f"e-{name}"))


def _sqs(bodies: list[Any]) -> dict[str, Any]:
    return {"Records": [
        {"messageId": f"m{i}", "receiptHandle": "r", "body": b, "attributes": {}, "messageAttributes": {},
         "md5OfBody": "", "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:1:q", "awsRegion": "us-east-1"}
        for i, b in enumerate(bodies)
    ]}


def test_good_records_reach_act_together_and_bad_ones_fail_with_reason() -> None:
    seen: list[list[str]] = []

    def act(parsed: dict[str, events.PodUnschedulableEvent]) -> tuple[None, dict[str, str]]:
        seen.append(sorted(e.detail.pod.key for e in parsed.values()))
        return None, {}

    event = _sqs([_good_body("a"), "{not json", _good_body("b"), json.dumps({"detail-type": "Pod Unschedulable"})])
    outcome = batch.process(event, parsing.pod_unschedulable, act)
    assert seen == [["default/a", "default/b"]]
    assert set(outcome.failures) == {"m1", "m3"}
    assert all(outcome.failures[m] for m in ("m1", "m3"))
    assert outcome.response() == {"batchItemFailures": [{"itemIdentifier": "m1"}, {"itemIdentifier": "m3"}]}


def test_wrong_detail_type_on_a_queue_is_rejected_by_name() -> None:
    node_event = events.node_deleted_entry("demo", "ip-1", None, NOW, "carpool-demo")
    body = json.dumps(events.delivered_event(node_event, event_id="e-node"))
    outcome = batch.process(_sqs([body]), parsing.pod_unschedulable, lambda p: (None, {}))
    assert "Node Deleted" in outcome.failures["m0"]


def test_transient_failures_from_act_are_reported() -> None:
    outcome = batch.process(_sqs([_good_body("a")]), parsing.pod_unschedulable, lambda p: (None, {"m0": "throttled"}))
    assert outcome.failures == {"m0": "throttled"}


def test_not_an_sqs_event_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="Records"):
        batch.process({"foo": 1}, parsing.pod_unschedulable, lambda p: (None, {}))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
    max_leaves=10,
)


@st.composite
def malformed_bodies(draw: st.DrawFn) -> str:
    """Mutations of a valid event (drop/replace a field at some depth) and raw junk."""
    kind = draw(st.integers(0, 2))
    if kind == 0:
        return draw(st.text(max_size=40))
    doc = json.loads(_good_body("x"))
    if kind == 1:
        key = draw(st.sampled_from(sorted(doc)))
        doc[key] = draw(json_values)
    else:
        detail = doc["detail"]
        key = draw(st.sampled_from(sorted(detail)))
        detail[key] = draw(json_values)
    return json.dumps(doc)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(malformed_bodies(), min_size=1, max_size=3))
def test_fuzzed_events_never_raise_and_every_rejection_has_a_reason(bodies: list[str]) -> None:
    outcome = batch.process(_sqs(bodies), parsing.pod_unschedulable, lambda p: (None, {}))
    assert set(outcome.parsed) | set(outcome.failures) == {f"m{i}" for i in range(len(bodies))}
    assert all(isinstance(r, str) and r for r in outcome.failures.values())
    reported = {f["itemIdentifier"] for f in outcome.response()["batchItemFailures"]}
    assert reported == set(outcome.failures)
