"""PutEvents with `DirectSqsDelivery` delivers exactly the messages moto's own code delivers.

Each scenario runs twice in a fresh moto (same random seed, same clock): once with moto's `put_events`,
once with the patch, and every queue's messages (bodies, order, MD5s) and every PutEvents answer must
be equal. The entries cover what the shortcut takes and everything it must leave to moto.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from carpool.sim.localaws import moto_events
from carpool.sim.localaws.moto_events import DirectSqsDelivery, _FlatView
from carpool.sim.localaws.moto_patches import installed
from carpool.sim.localaws.server import _routes

BUS = "carpool-c"
NOW = datetime(2026, 1, 1, 12, 30, 15, 250000, tzinfo=UTC)
POD = {"cluster": "c", "pod": {"metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"}},
                               "spec": {"containers": [{"name": "w", "resources": {"requests": {"cpu": "100m"}}}]}},
       "observedAt": "2026-01-01T12:30:15Z", "ratio": 0.1, "big": 10**20, "none": None, "ok": True, "uni": "é✓"}
#: patterns beyond carpool's own: moto's named filters, nesting, $or, and keys holding dots
EXTRA_PATTERNS = [
    {"source": ["carpool.cluster"], "detail": {"pod": {"metadata": {"labels": {"app": [{"prefix": "we"}]}}}}},
    {"source": [{"anything-but": "aws.ec2"}], "detail": {"ratio": [{"numeric": [">", 0, "<=", 1]}]}},
    {"detail": {"missing": [{"exists": False}], "ok": [True]}},
    {"$or": [{"detail-type": ["Node Deleted"]}, {"detail": {"a.b": ["dotted"]}}]},
    {"detail": {"a": {"b": ["nested"]}}},
    {"resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-1"]},
    {"account": ["123456789012"], "region": ["us-east-1"]},
    {"source": [{"prefix": "carpool."}], "detail-type": [{"anything-but": ["Node Deleted"]}], "version": ["0"]},
    {"$or": [{"source": ["carpool.other"]}, {"detail-type": [{"equals-ignore-case": "node registered"}]}]},
    {"source": {"sub": ["x"]}},  # a nested pattern under an envelope key reads "source.sub", not the envelope
    {"ingestion-time": [{"numeric": [">", 1767269999]}], "time": [{"exists": True}]},
]


def _entry(detail: Any, detail_type: str = "Pod Unschedulable", source: str = "carpool.cluster",
           **more: Any) -> dict[str, Any]:
    text = detail if isinstance(detail, str) else json.dumps(detail)
    return {"Source": source, "DetailType": detail_type, "Detail": text, "EventBusName": BUS, "Time": NOW, **more}


ENTRIES = [
    [_entry({**POD, "pod": {**POD["pod"], "n": i}}) for i in range(10)],
    [_entry({"cluster": "c", "node": {"name": "n1"}}, "Node Registered"),
     _entry({"cluster": "c"}, "Node Deleted", Resources=["arn:aws:ec2:us-east-1:123456789012:instance/i-1"]),
     _entry({"a.b": "dotted", "a": {"b": "nested"}}),  # two paths to the flattened key "detail.a.b"
     _entry({"a": {"b": "nested"}}, Resources=["r<x>"]),
     _entry({"note": "<time> and <detail-type>", "html": "<b>"}),  # moto's template replaces inside it
     _entry({"quote": 'say "hi"', "slash": "a\\b", "ctl": "tab\there"})],
    # one call, several (source, detail-type) pairs: rules matched once per pair must tell them apart
    [_entry({"i": 1}), _entry({"i": 2}, "Node Registered"), _entry({"i": 3}, source="carpool.other"),
     _entry({"i": 4}), _entry({"i": 5}, "Node Deleted", source="carpool.other"), _entry({"i": 6}, "Node Registered"),
     _entry({"i": 7}, "Pod Unschedul\u00e9"), _entry({"i": 8}, source="carpool.other"), _entry({"i": 9})],
    [_entry({"k": 1}, detail_type='Pod "Quoted"')],  # moto's template cannot be decoded: PutEvents fails
    [_entry({"k": 1}, source="carpool.cluster<x>"),
     _entry([1, 2, {"x": 3}]),  # not an object: moto warns and still delivers what matches
     _entry({}),
     _entry("{not json"),
     _entry({"k": 1}, detail_type=""),
     {"Source": "carpool.cluster", "DetailType": "Pod Unschedulable", "EventBusName": BUS},
     _entry({"k": 2}, Time=datetime(2025, 6, 1, tzinfo=UTC))],
    [{"Source": "aws.ec2", "DetailType": "EC2 Instance State-change Notification", "Time": NOW,
      "Detail": json.dumps({"instance-id": "i-1", "state": "terminated"})},
     {"Source": "aws.ec2", "DetailType": "EC2 Spot Instance Interruption Warning", "Time": NOW,
      "Detail": json.dumps({"instance-id": "i-2", "instance-action": "terminate"})},
     {"Source": "aws.health", "DetailType": "AWS Health Event", "Time": NOW,
      "Detail": json.dumps({"service": "EC2", "eventTypeCategory": "scheduledChange"})}],
]


@contextmanager
def _world() -> Iterator[tuple[Any, Any, dict[str, str]]]:
    """A fresh moto with carpool's bus, rules and queues, the extra patterns (one queue each), and a rule
    whose target has an input transformer (moto's delivery, not the shortcut's)."""
    from moto.moto_api._internal import mock_random

    with mock_aws():
        mock_random.seed(7)
        events = boto3.client("events", region_name="us-east-1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        events.create_event_bus(Name=BUS)
        queues: dict[str, str] = {}

        def route(rule: str, bus: str, pattern: dict[str, Any], **target: Any) -> None:
            queues[rule] = url = sqs.create_queue(QueueName=rule)["QueueUrl"]
            arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
            events.put_rule(Name=rule, EventBusName=bus, EventPattern=json.dumps(pattern))
            events.put_targets(Rule=rule, EventBusName=bus, Targets=[{"Id": "q", "Arn": arn, **target}])

        for rule, bus, pattern, _ in _routes("c", BUS):
            route(rule, bus, pattern)
        for i, pattern in enumerate(EXTRA_PATTERNS):
            route(f"extra-{i}", BUS, pattern)
        route("transformed", BUS, {"source": ["carpool.cluster"]},
              InputTransformer={"InputPathsMap": {"t": "$.detail-type"}, "InputTemplate": '{"type": "<t>"}'})
        yield events, sqs, queues


def _run(patched: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], dict[str, list[Any]]]:
    from moto.events import models

    monkeypatch.setattr(models, "unix_time", lambda dt=None: 1767270000.5)  # entries without Time: one clock
    with _world() as (events, sqs, queues), (installed(DirectSqsDelivery) if patched else _nothing()):
        answers: list[Any] = []
        for batch in ENTRIES:
            with warnings.catch_warnings(record=True) as warned:
                warnings.simplefilter("always")
                try:
                    answers.append(events.put_events(Entries=batch)["Entries"])
                except Exception as e:  # moto's own failures must stay failures
                    answers.append(type(e).__name__)
            answers.append(sorted(str(w.message) for w in warned if w.category is UserWarning))
        delivered = {name: _drain(sqs, url) for name, url in queues.items()}
    return answers, delivered


def _drain(sqs: Any, url: str) -> list[Any]:
    found = []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        found += [(m["Body"], m["MD5OfBody"]) for m in batch]
    return found


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def test_every_queue_gets_the_messages_moto_delivers_in_the_same_order(monkeypatch: pytest.MonkeyPatch) -> None:
    moto_answers, moto_delivered = _run(False, monkeypatch)
    fast_answers, fast_delivered = _run(True, monkeypatch)
    assert fast_answers == moto_answers
    assert fast_delivered == moto_delivered
    # the scenarios reach what they are written for
    assert len(moto_delivered["carpool-c-pod-unschedulable"]) == 20
    assert json.loads(moto_delivered["carpool-c-pod-unschedulable"][0][0])["time"] == "2026-01-01T12:30:15Z"
    assert len(moto_delivered["carpool-c-instance-state-change"]) == 1
    assert any("<" in body for body, _ in moto_delivered["carpool-c-pod-unschedulable"])
    assert moto_delivered["transformed"][0][0] == '{"type": "Pod Unschedulable"}'
    assert moto_answers[6] == "JSONDecodeError"
    assert any(e.get("ErrorCode") == "MalformedDetail" for e in moto_answers[8])
    assert any("EventDetail should be of type dict" in w for w in moto_answers[9])
    assert len(moto_delivered[f"extra-{len(EXTRA_PATTERNS) - 1}"]) == 29  # the ingestion time is read
    assert 0 < len(moto_delivered["extra-7"]) < 29 and 0 < len(moto_delivered["extra-8"]) < 29  # envelope-only rules


def test_the_shortcut_carries_most_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pod events take the shortcut (moto's delivery is not merely called for everything)."""
    fallbacks: list[str] = []
    original = moto_events._moto_delivery
    monkeypatch.setattr(moto_events, "_moto_delivery",
                        lambda backend, rule, event, event_id: fallbacks.append(rule.name)
                        or original(backend, rule, event, event_id))
    _run(True, monkeypatch)
    assert "carpool-c-pod-unschedulable" in fallbacks  # the odd entries go to moto
    assert fallbacks.count("carpool-c-pod-unschedulable") < 10
    assert fallbacks.count("transformed") == 29  # each valid entry on the bus (10 + 6 + 9 + 4; the quoted type fails before this rule)


@pytest.mark.parametrize(("event", "key", "expected"), [
    ({"detail": {"a": {"b": 1}}}, "detail.a.b", 1),
    ({"detail": {"a": {"b": {}}}}, "detail.a.b", {}),  # an empty object is a value, not descended into
    ({"detail": {"a": {"b": {"c": 1}}}}, "detail.a.b", None),  # a non-empty object is not a value
    ({"detail": {"a.b": 2}}, "detail.a.b", 2),
    ({"detail": {"a": []}}, "detail.a", []),
    ({"detail": {}}, "detail", {}),
])
def test_the_flat_view_answers_as_moto_s_flattening(event: dict[str, Any], key: str, expected: Any) -> None:
    from moto.events.models import EventPattern

    assert _FlatView(event).get(key) == EventPattern._flatten_dict(event).get(key) == expected


def test_a_key_two_paths_reach_is_left_to_moto() -> None:
    with pytest.raises(moto_events._Ambiguous):
        _FlatView({"detail": {"a.b": 1, "a": {"b": 2}}}).get("detail.a.b")


def test_a_rule_reading_only_the_envelope_is_matched_once_per_call_and_pair(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ten pod events in one call: carpool's rules (source and detail-type only) are matched once each;
    a rule reading the detail is matched per entry."""
    from moto.events import models

    matched: list[int] = []
    original = models.EventPattern._does_event_match

    def counting(self: Any, event_flat: Any, pattern_node: Any, prefix: str = "") -> bool:
        if not prefix:
            matched.append(id(self))
        return bool(original(self, event_flat, pattern_node, prefix))

    with _world() as (events, _sqs, _queues), installed(DirectSqsDelivery):
        rules = models.events_backends["123456789012"]["us-east-1"].event_buses[BUS].rules
        monkeypatch.setattr(models.EventPattern, "_does_event_match", counting)
        events.put_events(Entries=ENTRIES[0])
        events.put_events(Entries=ENTRIES[2])  # five (source, detail-type) pairs
        pod_rule, by_detail = id(rules["carpool-c-pod-unschedulable"].event_pattern), id(rules["extra-0"].event_pattern)
    assert matched.count(pod_rule) == 1 + 5  # once in the first call, once per pair in the second
    assert matched.count(by_detail) == 10 + 9


@pytest.mark.parametrize(("pattern", "envelope_only"), [
    ({"source": ["a"], "detail-type": ["b"]}, True),
    ({"account": ["1"], "region": [{"prefix": "us-"}], "version": ["0"]}, True),
    ({"$or": [{"source": ["a"]}, {"detail-type": ["b"]}]}, True),
    ({}, True),
    ({"source": ["a"], "detail": {"x": ["y"]}}, False),
    ({"source": {"sub": ["x"]}}, False),  # reads "source.sub"
    ({"id": ["e-1"]}, False),
    ({"time": [{"exists": True}]}, False),
    ({"resources": ["r"]}, False),
    ({"$or": [{"source": ["a"]}, {"detail": {"x": ["y"]}}]}, False),
    ({"$or": {"source": ["a"]}}, False),  # not a list: left to the per-entry path
])
def test_which_patterns_read_the_envelope_only(pattern: dict[str, Any], envelope_only: bool) -> None:
    assert moto_events._reads_envelope_only(pattern) is envelope_only
