"""The Lambda service's SQS event source mapping, as the simulation plays it against local SQS.

In AWS a function subscribed to a queue never calls SQS itself: the Lambda service polls the queue,
receiving up to 10 messages per `ReceiveMessage`, hands them to the function as one batch of records, and
deletes the messages the function did not report in `batchItemFailures` (`DeleteMessageBatch`, up to 10 a
request). A message it leaves alone becomes visible again when its visibility timeout ends, and after the
queue's `maxReceiveCount` receives SQS moves it to the dead-letter queue instead of handing it out again.

That poller is AWS's own, not carpool's, so it does not go through local AWS's HTTP API: it asks the
account's SQS backend in moto directly (`LocalAws.sqs_backend`), the same methods the server's
`ReceiveMessage`, `DeleteMessageBatch` and `ChangeMessageVisibility` call, with the same arguments and on
the same clock. Everything SQS decides stays SQS's: which messages are visible, the receive count and
first-receive time it stamps, the receipt handle it issues, redrive to the dead-letter queue. Records are
built from the received messages exactly as from the HTTP answer (`lambda_runtime.received_message`).

The backend is not safe to share between threads; a simulation polls its own account's queues from its
own loop while none of its handlers runs (simulations on other threads use accounts of their own).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Sequence
from typing import Any

from carpool.sim.localaws import lambda_runtime

#: Messages per `ReceiveMessage` (the most SQS hands out at once; Lambda's poller asks for that many).
RECEIVE_MAX = 10
#: Entries per `DeleteMessageBatch` (SQS's limit).
DELETE_MAX = 10
#: SQS's longest visibility timeout (seconds): `ReceiveMessage` refuses more.
MAX_VISIBILITY = 43_200

Backend = Callable[[], contextlib.AbstractContextManager[Any]]


class SqsEventSource:
    """Receives, deletes and re-shows the messages of one queue for one function, as Lambda's poller does.

    `backend` opens the account's SQS backend on local AWS's clock (`LocalAws.sqs_backend`)."""

    def __init__(self, backend: Backend, queue_url: str, queue_arn: str, region: str) -> None:
        self._backend = backend
        #: how moto's responses name the queue of a URL: its last path segment
        self.queue_name = queue_url.rstrip("/").split("/")[-1]
        self.queue_url = queue_url
        self.queue_arn = queue_arn
        self.region = region

    def receive(self, batch: int, visibility_timeout: int) -> list[dict[str, Any]]:
        """Up to `batch` records, received `RECEIVE_MAX` at a time until the queue has no visible message,
        each hidden for `visibility_timeout` seconds."""
        _check_visibility(visibility_timeout)
        records: list[dict[str, Any]] = []
        with self._backend() as backend:
            while len(records) < batch:
                wanted = min(RECEIVE_MAX, batch - len(records))  # Lambda never invokes with more than the batch size
                messages = backend.receive_message(self.queue_name, wanted, 0, visibility_timeout, ["All"])
                if not messages:
                    break
                records += [lambda_runtime.sqs_record(lambda_runtime.received_message(m), self.queue_arn, self.region)
                            for m in messages]
        return records

    def has_visible(self) -> bool:
        """Whether a `ReceiveMessage` now would return a message (what a long poll waits for)."""
        with self._backend() as backend:
            queue = backend.get_queue(self.queue_name)
            return next(iter(queue.messages), None) is not None

    def visible_count(self, at_most: int) -> int:
        """How many messages a `ReceiveMessage` could return now, counted up to `at_most`."""
        with self._backend() as backend:
            queue = backend.get_queue(self.queue_name)
            return sum(1 for _ in itertools.islice(iter(queue.messages), at_most))

    def delete(self, receipts: Sequence[str]) -> list[str]:
        """Delete the messages of these receipt handles, `DELETE_MAX` per batch; returns the receipt
        handles SQS refused (what `DeleteMessageBatch` lists under `Failed`)."""
        failed: list[str] = []
        with self._backend() as backend:
            for start in range(0, len(receipts), DELETE_MAX):
                chunk = receipts[start:start + DELETE_MAX]
                entries = [{"Id": str(i), "ReceiptHandle": r} for i, r in enumerate(chunk)]
                _done, refused = backend.delete_message_batch(self.queue_name, entries)
                failed += [chunk[int(e["Id"])] for e in refused]
        return failed

    def change_visibility(self, receipt: str, visibility_timeout: int) -> bool:
        """`ChangeMessageVisibility`; False when SQS refuses it (the message was deleted or moved to the
        dead-letter queue, so its receipt handle is no longer valid)."""
        from moto.sqs.exceptions import SQSException

        _check_visibility(visibility_timeout)
        with self._backend() as backend:
            try:
                backend.change_message_visibility(self.queue_name, receipt, visibility_timeout)
            except SQSException:
                return False
        return True


def _check_visibility(seconds: int) -> None:
    """What SQS answers `InvalidParameterValue` to, before it looks at any message."""
    if not 0 <= seconds <= MAX_VISIBILITY:
        raise ValueError(f"visibility timeout {seconds} is outside 0..{MAX_VISIBILITY} seconds")
