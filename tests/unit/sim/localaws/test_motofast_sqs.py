"""Queue attributes looked up one at a time while sending answer as moto's whole-attribute property does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from carpool.sim.localaws.moto_patches import installed
from carpool.sim.localaws.motofast import _CheapCounts, _QueueAttributeLookups, faster_moto


def _create(sqs: Any, prefix: str = "") -> dict[str, str]:
    """A standard queue with a policy and a redrive policy, a FIFO queue, and a FIFO queue with
    content-based deduplication and a KMS key."""
    dlq = sqs.create_queue(QueueName=f"{prefix}dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": "*", "Action": "sqs:*"}]}
    return {
        "standard": sqs.create_queue(QueueName=f"{prefix}standard", Attributes={
            "Policy": json.dumps(policy),
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "3"})})["QueueUrl"],
        "fifo": sqs.create_queue(QueueName=f"{prefix}f.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"],
        "dedup": sqs.create_queue(QueueName=f"{prefix}d.fifo", Attributes={
            "FifoQueue": "true", "ContentBasedDeduplication": "true", "KmsMasterKeyId": "k"})["QueueUrl"],
    }


@pytest.fixture
def queues() -> Iterator[tuple[Any, dict[str, str]]]:
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        yield sqs, _create(sqs)


def _queue(name: str) -> Any:
    from moto.sqs import sqs_backends

    return sqs_backends["123456789012"]["us-east-1"].get_queue(name)


@pytest.mark.parametrize("name", ["standard", "f.fifo", "d.fifo"])
def test_each_attribute_is_the_one_the_property_answers(queues: Any, name: str) -> None:
    from moto.sqs.models import Queue

    queue = _queue(name)
    whole = Queue.attributes.fget(queue)  # type: ignore[attr-defined]
    lookups = _QueueAttributeLookups(queue, Queue.__dict__["attributes"])
    for attribute in [*whole, "ContentBasedDeduplication", "NoSuchAttribute"]:
        assert lookups.get(attribute) == whole.get(attribute), attribute
        assert lookups.get(attribute, "dflt") == whole.get(attribute, "dflt"), attribute
    assert dict(lookups.items()) == whole and set(lookups) == set(whole) and len(lookups) == len(whole)
    assert ("Policy" in lookups) == ("Policy" in whole)


def test_sending_behaves_as_in_moto(queues: Any) -> None:
    sqs, _ = queues

    def send_all(prefix: str) -> list[Any]:
        urls = _create(sqs, prefix)
        outcome: list[Any] = []
        for url in urls.values():
            for kwargs in ({}, {"MessageGroupId": "g"}, {"MessageGroupId": "g"},
                           {"MessageGroupId": "g", "MessageDeduplicationId": "x"}):
                try:
                    outcome.append(sqs.send_message(QueueUrl=url, MessageBody="same", **kwargs)["MD5OfMessageBody"])
                except sqs.exceptions.ClientError as e:
                    outcome.append(e.response["Error"]["Code"])
        counts = [sqs.get_queue_attributes(QueueUrl=u, AttributeNames=["All"])["Attributes"] for u in urls.values()]
        return [outcome, [{k: v.replace(prefix, "") for k, v in c.items() if not k.endswith("Timestamp")}
                          for c in counts]]

    plain = send_all("plain-")
    with faster_moto():
        assert _CheapCounts.installed()
        fast = send_all("fast-")
    assert fast == plain
    assert "MissingParameter" in plain[0]  # a FIFO queue without content-based deduplication needs an id
    assert plain[1][2]["ApproximateNumberOfMessages"] == "2"  # the repeated body was deduplicated


def test_outside_sending_the_property_answers_whole(queues: Any) -> None:
    with installed(_CheapCounts):
        assert isinstance(_queue("d.fifo").attributes, dict)
