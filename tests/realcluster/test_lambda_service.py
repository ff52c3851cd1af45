"""The wall-clock Lambda service invokes as the deployed triggers do: an SQS event source mapping gathers
what arrives within its batching window into one batch, deletes what the answer does not list as failed
and leaves the failed records to SQS's visibility timeout; a schedule invokes at once and then every
period; a warm environment keeps what its cold start built. Local AWS only (no control plane): the
handlers here record what they are given, they stand for carpool's code, which is not under test."""

from __future__ import annotations

import contextvars
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tests.realcluster.lambda_service import WallClockLambda

from carpool import delivery
from carpool.sim.localaws.server import LocalAws

#: what a handler's "cold start" builds and later invocations of the same environment find
_built: contextvars.ContextVar[str | None] = contextvars.ContextVar("built", default=None)


@pytest.fixture
def aws() -> Iterator[tuple[LocalAws, dict[str, tuple[str, str]]]]:
    with LocalAws(cluster="lambda-service", export=False) as local:
        path = local.create_event_path("lambda-service", {n: delivery.visibility_timeout_seconds(n)
                                                          for n in delivery.BY_FUNCTION})
        sqs = local.client("sqs")
        queues = {n: (url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"])
                  for n, url in path.queues.items()}
        yield local, queues


def _service(local: LocalAws, queues: dict[str, tuple[str, str]], handler: Any, name: str = "registrar",
             schedules: dict[str, int] | None = None) -> WallClockLambda:
    return WallClockLambda({name: dict(local.env)}, {n: q for n, q in queues.items() if n == name},
                           local.client("sqs"), region=local.region, account=local.account,
                           handlers={name: handler}, schedules=schedules or {})


def _until(check: Any, seconds: float = 20.0) -> Any:
    deadline = time.monotonic() + seconds
    while not (answer := check()):
        assert time.monotonic() < deadline, "not so in time"
        time.sleep(0.1)
    return answer


def test_messages_sent_together_are_one_batch_and_failures_stay_queued(aws: Any) -> None:
    local, queues = aws
    batches: list[list[dict[str, Any]]] = []

    def handler(event: dict[str, Any], _context: Any) -> dict[str, Any]:
        batches.append(event["Records"])
        return {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in event["Records"]
                                      if json.loads(r["body"])["n"] == 0]}

    sqs, url = local.client("sqs"), queues["registrar"][0]
    for n in range(5):
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"n": n}))
    with _service(local, queues, handler):
        _until(lambda: batches)
        time.sleep(1.5)  # a second batch would be invoked by now
    assert [len(b) for b in batches] == [5]
    assert all(r["eventSource"] == "aws:sqs" and r["eventSourceARN"] == queues["registrar"][1] for r in batches[0])
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    # the failed record is held until the visibility timeout; the other four are deleted
    assert (attrs["ApproximateNumberOfMessages"], attrs["ApproximateNumberOfMessagesNotVisible"]) == ("0", "1")


def test_a_raising_handler_fails_the_whole_batch(aws: Any) -> None:
    local, queues = aws

    def handler(_event: dict[str, Any], _context: Any) -> dict[str, Any]:
        raise RuntimeError("boom")

    sqs, url = local.client("sqs"), queues["registrar"][0]
    sqs.send_message(QueueUrl=url, MessageBody="{}")
    with _service(local, queues, handler) as service:
        _until(lambda: service.errors())
    assert "RuntimeError: boom" in (service.errors()[0].error or "")
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attrs["ApproximateNumberOfMessagesNotVisible"] == "1"


def test_a_schedule_invokes_at_once_and_a_warm_environment_keeps_its_cold_start(aws: Any) -> None:
    local, queues = aws
    seen: list[tuple[str | None, int, str]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        seen.append((_built.get(), context.get_remaining_time_in_millis(), event["detail-type"]))
        _built.set("built")
        return {}

    with _service(local, queues, handler, name="disruption", schedules={"disruption": 2}) as service:
        _until(lambda: len(seen) >= 2, 10)
    assert seen[0][0] is None and seen[1][0] == "built"  # the second run found the first's work
    assert [i.cold for i in service.invocations[:2]] == [True, False]
    assert seen[0][2] == "Scheduled Event"
    assert 57_000 < seen[0][1] <= delivery.TIMEOUT_SECONDS["disruption"] * 1000
