"""The simulated Lambda SQS event source hands out what local SQS's API would, with SQS's semantics."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from carpool.sim.localaws import lambda_runtime
from carpool.sim.localaws.event_source import SqsEventSource
from carpool.sim.localaws.motofast import faster_moto
from carpool.sim.localaws.server import LocalAws

REGION = "us-east-1"
START = 1_767_225_600.0  # 2026-01-01T00:00:00Z
HOLD = 43_200


class Clock:
    """The simulated clock local SQS keeps time on (seconds since the epoch)."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def clock() -> Clock:
    return Clock()


@pytest.fixture(scope="module")
def aws(clock: Clock) -> Iterator[LocalAws]:
    local = LocalAws(cluster="events", region=REGION, export=False)
    local.clock = clock
    with local:
        yield local


@pytest.fixture(scope="module")
def sqs(aws: LocalAws) -> Any:
    return aws.client("sqs")


_queues = iter(range(1_000))


def _queue(sqs: Any, max_receives: int | None = None, prefix: str = "q") -> tuple[str, str]:
    """A fresh queue (URL, ARN), with a dead-letter queue after `max_receives` receives when given."""
    name = f"{prefix}-{next(_queues)}"
    attributes: dict[str, str] = {}
    if max_receives is not None:
        dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        attributes["RedrivePolicy"] = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(max_receives)})
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn


def _source(aws: LocalAws, url: str, arn: str) -> SqsEventSource:
    return SqsEventSource(aws.sqs_backend, url, arn, REGION)


def _send(sqs: Any, url: str, bodies: list[str], **extra: Any) -> None:
    for body in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=body, **extra)


def _over_http(sqs: Any, url: str, arn: str) -> list[dict[str, Any]]:
    """What the records were when the poller called `ReceiveMessage` on local SQS's API."""
    answer = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0, VisibilityTimeout=HOLD,
                                 AttributeNames=["All"], MessageAttributeNames=["All"])
    return [lambda_runtime.sqs_record(m, arn, REGION) for m in answer.get("Messages") or []]


def _comparable(record: dict[str, Any]) -> dict[str, Any]:
    """A record without what differs between two queues and two receives (ids, handles, the queue)."""
    return {k: v for k, v in record.items() if k not in ("messageId", "receiptHandle", "eventSourceARN")}


@pytest.mark.parametrize("fast", [False, True], ids=["moto", "faster_moto"])
def test_records_are_those_receive_message_answers_over_http(aws: LocalAws, sqs: Any, clock: Clock, fast: bool) -> None:
    (http_url, http_arn), (url, arn) = _queue(sqs), _queue(sqs)
    bodies = [json.dumps({"detail-type": "Pod Unschedulable", "n": i}) for i in range(4)]
    attributes = {"origin": {"DataType": "String", "StringValue": "watcher"}}
    for target in (http_url, url):
        _send(sqs, target, bodies, MessageAttributes=attributes)
    clock.now += 7
    with faster_moto() if fast else contextlib.nullcontext():
        over_http = _over_http(sqs, http_url, http_arn)
        direct = _source(aws, url, arn).receive(10, HOLD)

    assert [_comparable(r) for r in direct] == [_comparable(r) for r in over_http]
    first = direct[0]
    assert first["body"] == bodies[0]
    assert first["md5OfBody"] == hashlib.md5(bodies[0].encode()).hexdigest()
    assert first["attributes"]["ApproximateReceiveCount"] == "1"
    assert first["attributes"]["SentTimestamp"] == str(int((clock.now - 7) * 1000))
    assert first["attributes"]["ApproximateFirstReceiveTimestamp"] == str(int(clock.now * 1000))
    assert first["messageAttributes"] == {"origin": {"stringValue": "watcher", "stringListValues": [],
                                                     "binaryListValues": [], "dataType": "String"}}
    assert {r["eventSourceARN"] for r in direct} == {arn}
    assert len({r["messageId"] for r in direct}) == 4


def test_a_batch_is_received_ten_at_a_time_up_to_the_batch_size(aws: LocalAws, sqs: Any) -> None:
    url, arn = _queue(sqs)
    for start in range(0, 25, 10):
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{i}"}
                                                      for i in range(start, min(start + 10, 25))])
    source = _source(aws, url, arn)
    assert len(source.receive(15, HOLD)) == 15
    assert len(source.receive(1000, HOLD)) == 10  # the rest; the first 15 are held
    assert source.receive(1000, HOLD) == []


def test_a_received_message_stays_hidden_until_its_visibility_timeout_ends(aws: LocalAws, sqs: Any, clock: Clock) -> None:
    url, arn = _queue(sqs)
    _send(sqs, url, ["a"])
    source = _source(aws, url, arn)
    (first,) = source.receive(10, 30)
    clock.now += 29
    assert source.receive(10, 30) == []
    assert _over_http(sqs, url, arn) == []  # the API sees the same hidden message
    clock.now += 2
    (again,) = source.receive(10, 30)
    assert again["messageId"] == first["messageId"]
    assert again["receiptHandle"] != first["receiptHandle"]
    assert again["attributes"]["ApproximateReceiveCount"] == "2"
    assert again["attributes"]["ApproximateFirstReceiveTimestamp"] == first["attributes"]["ApproximateFirstReceiveTimestamp"]


def test_only_deleted_messages_are_gone_and_a_failed_one_comes_back_when_shown(aws: LocalAws, sqs: Any,
                                                                                 clock: Clock) -> None:
    url, arn = _queue(sqs)
    _send(sqs, url, ["ok-1", "failed", "ok-2"])
    source = _source(aws, url, arn)
    records = source.receive(10, HOLD)
    assert source.delete([r["receiptHandle"] for r in records if r["body"] != "failed"]) == []
    clock.now += 1
    assert source.receive(10, HOLD) == []  # the failed one is still held
    failed = next(r for r in records if r["body"] == "failed")
    assert source.change_visibility(failed["receiptHandle"], 0) is True
    clock.now += 1
    assert [r["body"] for r in source.receive(10, HOLD)] == ["failed"]
    assert int(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
               ["Attributes"]["ApproximateNumberOfMessages"]) == 0


def test_a_refused_delete_is_reported(aws: LocalAws, sqs: Any) -> None:
    url, arn = _queue(sqs)
    assert _source(aws, url, arn).delete(["not-a-receipt-handle"]) == ["not-a-receipt-handle"]


def test_after_max_receive_count_the_message_goes_to_the_dead_letter_queue(aws: LocalAws, sqs: Any,
                                                                             clock: Clock) -> None:
    url, arn = _queue(sqs, max_receives=3)
    _send(sqs, url, ["poison"])
    source = _source(aws, url, arn)
    receipts = []
    for count in ("1", "2", "3"):
        (record,) = source.receive(10, HOLD)
        assert record["attributes"]["ApproximateReceiveCount"] == count
        receipts.append(record["receiptHandle"])
        assert source.change_visibility(record["receiptHandle"], 0) is True  # the handler failed it
        clock.now += 1
    assert source.receive(10, HOLD) == []
    assert source.change_visibility(receipts[-1], 0) is False  # moved on: the handle is no longer valid
    dlq = url + "-dlq"
    moved = sqs.receive_message(QueueUrl=dlq, AttributeNames=["All"]).get("Messages") or []
    assert [m["Body"] for m in moved] == ["poison"]


def test_a_visibility_timeout_beyond_sqs_limit_is_refused(aws: LocalAws, sqs: Any) -> None:
    url, arn = _queue(sqs)
    with pytest.raises(ValueError, match="outside"):
        _source(aws, url, arn).receive(10, HOLD + 1)


def test_each_local_aws_polls_its_own_account(aws: LocalAws, sqs: Any) -> None:
    url, arn = _queue(sqs, prefix="shared-name")
    _send(sqs, url, ["mine"])
    with LocalAws(cluster="other", region=REGION, export=False) as other:
        other_sqs = other.client("sqs")
        other_url = other_sqs.create_queue(QueueName=url.rsplit("/", 1)[-1])["QueueUrl"]
        _send(other_sqs, other_url, ["theirs"])
        other_arn = f"arn:aws:sqs:{REGION}:{other.account}:{url.rsplit('/', 1)[-1]}"
        assert [r["body"] for r in _source(other, other_url, other_arn).receive(10, HOLD)] == ["theirs"]
    assert [r["body"] for r in _source(aws, url, arn).receive(10, HOLD)] == ["mine"]

