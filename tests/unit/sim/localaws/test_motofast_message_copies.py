"""Received messages are copied as `copy.deepcopy` copies them: equal fields, no container shared with
the stored message, aliasing inside the message kept, the copy tracked like any moto model; any other
value still goes to `deepcopy`."""

from __future__ import annotations

import copy
from typing import Any

import boto3
from moto import mock_aws
from moto.sqs import models

from carpool.sim.localaws.motofast import faster_moto


def _message() -> models.Message:
    m = models.Message("id-1", "body", {"AWSTraceHeader": "Root=1"})
    m.message_attributes = {"k": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
                            "s": {"DataType": "String", "StringValue": "v"}}
    m._old_receipt_handles = ["a" * 185, "b" * 185]
    m.receipt_handle = "c" * 185
    m.approximate_receive_count, m.visible_at, m.group_id = 2, 1.5, None
    shared = ["x"]
    m.extra_a, m.extra_b = shared, shared  # type: ignore[attr-defined]  # two fields holding one list
    return m


def _containers(m: Any) -> list[int]:
    return [id(v) for v in vars(m).values() if isinstance(v, dict | list)]


def test_a_message_copy_is_what_deepcopy_makes() -> None:
    original = _message()
    expected = copy.deepcopy(original)
    with faster_moto():
        copied = models.deepcopy(original)
    assert type(copied) is models.Message and copied is not original
    assert vars(copied) == vars(expected) == vars(original)
    assert not set(_containers(copied)) & set(_containers(original))
    assert copied.extra_a is copied.extra_b  # type: ignore[attr-defined]
    assert copied.receipt_handle is original.receipt_handle  # strings are taken as they are, as deepcopy does
    assert copied in models.Message.instances_tracked  # type: ignore[attr-defined]
    copied.message_attributes["k"]["BinaryValue"] = b"changed"
    assert original.message_attributes["k"]["BinaryValue"] == b"\x00\x01"


def test_other_values_and_explicit_memos_go_to_deepcopy() -> None:
    groups = {"g": {"nested": [1, 2]}}
    with faster_moto():
        other = models.deepcopy(groups)
        memo: dict[int, Any] = {}
        inside = models.deepcopy(_message(), memo)
    assert other == groups and other["g"] is not groups["g"]
    assert type(inside) is models.Message and memo  # deepcopy's own path filled the caller's memo
    assert models.deepcopy is copy.deepcopy


def test_received_messages_are_unchanged() -> None:
    def receive_all() -> list[dict[str, Any]]:
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        for i in range(3):
            sqs.send_message(QueueUrl=url, MessageBody=f"m{i}", MessageAttributes={
                "bin": {"DataType": "Binary", "BinaryValue": b"\x01"}, "txt": {"DataType": "String", "StringValue": "t"}})
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["txt"],
                                  AttributeNames=["ApproximateReceiveCount"])["Messages"]
        return sorted(({k: v for k, v in m.items() if k not in ("MessageId", "ReceiptHandle")} for m in got),
                      key=lambda m: m["Body"])

    with mock_aws():
        plain = receive_all()
    with mock_aws(), faster_moto():
        fast = receive_all()
    assert fast == plain
    assert [m["MessageAttributes"] for m in fast] == [{"txt": {"StringValue": "t", "DataType": "String"}}] * 3
