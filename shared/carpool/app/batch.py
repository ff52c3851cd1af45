"""SQS batches in two phases: parse every record on its own (a bad record fails alone, with its
reason), then act on all the good ones together (the provisioner packs a whole batch of pods at once).

Powertools' `BatchProcessor` does the per-record bookkeeping and builds the partial-batch response, so
SQS redelivers only the failed records and, after `maxReceiveCount`, moves them to the DLQ.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class BatchOutcome(Generic[T]):
    """Parsed records by message id, failures by message id with their reasons, and the use case's
    own result."""

    parsed: dict[str, T] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    result: Any = None

    def response(self) -> dict[str, list[dict[str, str]]]:
        return {"batchItemFailures": [{"itemIdentifier": mid} for mid in self.failures]}


def process(
    event: Mapping[str, Any],
    parse: Callable[[str], T],
    act: Callable[[dict[str, T]], tuple[Any, Mapping[str, str]]],
) -> BatchOutcome[T]:
    """Parse each record's body with `parse`; call `act` once with the good ones.

    `act` returns (result, {message id: reason}) for records that must be retried (transient trouble).
    A non-dict event or one without `Records` is rejected as a whole with a clear error.
    """
    if not isinstance(event, Mapping) or not isinstance(event.get("Records"), list):
        raise ValueError("event: expected an SQS batch with a 'Records' list")
    # Imported on first use rather than with the module: Powertools' batch package loads every one of its
    # event data classes (DynamoDB, Kinesis...) and asyncio, which the handler's import need not pay for.
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType

    outcome: BatchOutcome[T] = BatchOutcome()
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)

    def handle(record: SQSRecord) -> None:
        try:
            body = record.raw_event.get("body")
            if not isinstance(body, str):
                raise ValueError(f"record body: expected the event as a JSON string, got {type(body).__name__}")
            outcome.parsed[record.message_id] = parse(body)
        except Exception as exc:  # every bad record is reported, never raised
            reason = f"{type(exc).__name__}: {exc}"
            outcome.failures[record.message_id] = reason
            log.warning("rejected record %s: %s", record.message_id, reason)
            raise

    records = [r for r in event["Records"] if _identifiable(r)]
    for bad in (r for r in event["Records"] if not _identifiable(r)):
        # without a message id SQS cannot be told about it; it returns after its visibility timeout
        log.warning("skipping a record without a messageId: %.200r", bad)
    with processor(records, handle):
        processor.process()
    if outcome.parsed:
        try:
            outcome.result, retry = act(outcome.parsed)
        except Exception as exc:
            # The use case isolates what it can pin on records; what escapes it is retried for every good
            # record rather than crashing the invocation (a crash retries them all the same, but answers
            # nothing and logs no reason per record).
            reason = f"{type(exc).__name__}: {exc}"
            log.exception("the batch's %d good records failed together: %s", len(outcome.parsed), reason)
            retry = dict.fromkeys(outcome.parsed, reason)
        for mid, reason in retry.items():
            outcome.failures[mid] = reason
            log.warning("record %s will be retried: %s", mid, reason)
        _log_left_alone(outcome.result)
    return outcome


#: summary fields in which use cases report what they did not act on, and why (key -> reason)
LEFT_ALONE_FIELDS = ("ignored", "dropped", "stale")


def _log_left_alone(result: Any) -> None:
    """Every record a use case dropped by design (another cluster's event, an instance or node carpool does
    not own, a pod no longer pending, an event too old) is answered as done, so SQS deletes it: its reason
    is logged here, from the use case's summary, so that no record disappears without one."""
    for name in LEFT_ALONE_FIELDS:
        entries = getattr(result, name, None)
        if isinstance(entries, Mapping):
            for key, reason in entries.items():
                log.info("not acted on (%s) %s: %s", name, key, reason)


def _identifiable(record: object) -> bool:
    return isinstance(record, Mapping) and isinstance(record.get("messageId"), str)
