"""Hostile records the fuzzing of the SQS-fed handlers found: each fails alone with a reason naming the
field, and what a use case drops by design is logged with its reason."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from carpool.api import events
from carpool.api.k8s import Pod
from carpool.app import batch, parsing

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _pod_json(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web-1", "namespace": "default", "uid": "u1"},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}], **spec},
            "status": {"phase": "Pending"}}


def _body(pod: dict[str, Any] | None = None, **envelope: Any) -> str:
    entry = events.pod_unschedulable_entry("demo", Pod.model_validate(_pod_json()), NOW, "bus")
    event = events.delivered_event(entry, event_id="e-1")
    if pod is not None:
        event["detail"]["pod"] = pod
    event.update(envelope)
    return json.dumps(event)


def _sqs(bodies: list[Any]) -> dict[str, Any]:
    records = []
    for i, b in enumerate(bodies):
        record = {"messageId": f"m{i}", "receiptHandle": "r", "attributes": {}, "messageAttributes": {},
                  "md5OfBody": "", "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:1:q",
                  "awsRegion": "us-east-1"}
        if b is not None:
            record["body"] = b
        records.append(record)
    return {"Records": records}


def _reasons(bodies: list[Any]) -> dict[str, str]:
    return batch.process(_sqs(bodies), parsing.pod_unschedulable, lambda parsed: (None, {})).failures


@pytest.mark.parametrize(("pod", "named"), [
    ({**_pod_json(), "spec": {}}, "spec.containers: a pod has at least one container"),
    (_pod_json(containers=[{"name": "c"}, {"name": "c"}]), "spec.containers[1].name: duplicate container name"),
    (_pod_json(containers=[{"name": "Bad_Name"}]), "invalid spec.containers[0].name"),
    (_pod_json(containers=[{"name": "c", "resources": {"requests": {"cpu": "-500m"}}}]),
     "spec.containers[0].resources.requests[cpu]: '-500m' must be greater than or equal to 0"),
    (_pod_json(containers=[{"name": "c", "resources": {"limits": {"memory": "1e999999"}}}]),
     "spec.containers[0].resources.limits[memory]: '1e999999' is too large"),
    (_pod_json(overhead={"cpu": "-1"}), "spec.overhead[cpu]"),
])
def test_a_pod_the_api_server_would_refuse_fails_naming_the_field(pod: dict[str, Any], named: str) -> None:
    (reason,) = _reasons([_body(pod)]).values()
    assert named in reason and "detail.pod" in reason


@pytest.mark.parametrize(("envelope", "named"), [
    ({"time": 1767225600}, "time: expected an RFC 3339 timestamp string, got int"),
    ({"detail": {"cluster": "demo", "pod": _pod_json(), "observedAt": -5}},
     "detail.observedAt: expected an RFC 3339 timestamp string"),
])
def test_a_timestamp_that_is_a_number_is_refused(envelope: dict[str, Any], named: str) -> None:
    (reason,) = _reasons([_body(**envelope)]).values()
    assert named in reason


def test_a_record_without_a_string_body_and_json_nested_too_deep_fail_with_a_reason() -> None:
    failures = _reasons([None, 42, "[" * 50_000 + "]" * 50_000])
    assert "record body: expected the event as a JSON string, got NoneType" in failures["m0"]
    assert "got int" in failures["m1"]
    assert "nests too deeply" in failures["m2"]


def test_an_instance_id_longer_than_ec2_makes_is_refused() -> None:
    event = {"version": "0", "id": "e", "detail-type": events.SPOT_INTERRUPTION, "source": "aws.ec2",
             "time": "2026-01-01T00:00:00Z", "region": "us-east-1", "resources": [],
             "detail": {"instance-id": "i-" + "0" * 5000, "instance-action": "terminate"}}
    with pytest.raises(events.EventError, match="detail.instance-id"):
        events.parse_aws_event(json.dumps(event))
    event["detail"]["instance-id"] = "i-0123456789abcdef0"
    assert events.parse_aws_event(json.dumps(event)).instance_ids() == ["i-0123456789abcdef0"]


@dataclass
class Summary:
    ignored: dict[str, str] = field(default_factory=dict)
    stale: dict[str, str] = field(default_factory=dict)


def test_what_a_use_case_drops_by_design_is_logged_with_its_reason(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="carpool.app.batch")
    summary = Summary(ignored={"e-1": "event for cluster 'prod'"}, stale={"i-1": "400 s old"})
    outcome = batch.process(_sqs([_body()]), parsing.pod_unschedulable, lambda parsed: (summary, {}))
    assert outcome.failures == {}
    logged = [r.getMessage() for r in caplog.records]
    assert "not acted on (ignored) e-1: event for cluster 'prod'" in logged
    assert "not acted on (stale) i-1: 400 s old" in logged
