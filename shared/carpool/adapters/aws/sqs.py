"""Sending an event back to the SQS queue it came from, delayed: how a drain that outlives one
invocation asks for its next step (`carpool.app.interrupt.FollowUp`)."""

from __future__ import annotations

import json
from typing import Any

from carpool.adapters.aws import session

#: SQS's per-message delay bound (standard queues).
MAX_DELAY_SECONDS = 900


def queue_url(queue_arn: str) -> str:
    """The URL of the queue an event source ARN names (arn:aws:sqs:<region>:<account>:<name>)."""
    parts = queue_arn.split(":")
    if len(parts) != 6 or parts[2] != "sqs":
        raise ValueError(f"not an SQS queue ARN: {queue_arn!r}")
    _arn, partition, _sqs, region, account, name = parts
    domain = "amazonaws.com.cn" if partition == "aws-cn" else "amazonaws.com"
    return f"https://sqs.{region}.{domain}/{account}/{name}"


class SqsFollowUp:
    """Puts an EventBridge event (as the queue received it) back on the queue after `delay` seconds."""

    def __init__(self, queue_arn: str, client: Any | None = None) -> None:
        self.url = queue_url(queue_arn)
        self.client = client or session.client("sqs", region=queue_arn.split(":")[3])

    def __call__(self, event: Any, delay: int) -> None:
        body = json.dumps(event.model_dump(mode="json", by_alias=True, exclude_none=True))
        self.client.send_message(QueueUrl=self.url, MessageBody=body,
                                 DelaySeconds=max(0, min(int(delay), MAX_DELAY_SECONDS)))
