"""Scoped speed-ups for moto's SQS and EventBridge so a simulation can push tens of thousands of events
through them.

moto's SQS is written for tests with a handful of messages: every SendMessage and every received message
recomputes the queue's attributes, which count all messages (three full scans), and every ReceiveMessage
first lists every visible message. A 10,000-pod burst puts 20,000 events through one queue, and those
scans make the run quadratic (hours instead of seconds).

EventBridge delivery to a target builds a JSONPath parser (ply tables, about 1.5 ms) eight times per
event to apply the default input template.

While `faster_moto()` is active:
- sending and receiving skip the approximate message counts (they only feed GetQueueAttributes, which
  still computes them exactly);
- ReceiveMessage walks the queue lazily and stops once it has its batch;
- DeleteMessageBatch removes its (up to ten) messages in one pass instead of one pass per message;
- attribute-name conversions are memoised, and JSONPath expressions are parsed once per distinct text
  (both are pure functions of their text).
(DynamoDB transactions are made cheap by `LocalAws` itself, which serializes DynamoDB requests.)
Nothing about which messages are delivered, their order, visibility, receive counts or dead-lettering
changes; the patch is removed when the block ends. If moto's internals change, it does nothing.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

_cheap = threading.local()
_APPROXIMATE = (
    "approximate_number_of_messages",
    "approximate_number_of_messages_delayed",
    "approximate_number_of_messages_not_visible",
)
_lock = threading.Lock()
_depth = 0
_saved: list[tuple[Any, str, Any]] = []


class _LazyMessages:
    """`Queue.messages` as a lazy view: iterating stops as soon as the caller has enough."""

    def __init__(self, queue: Any) -> None:
        self._queue = queue

    def __iter__(self) -> Iterator[Any]:
        for message in list(self._queue._messages):
            if message.visible and not message.delayed:
                yield message

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __bool__(self) -> bool:
        return any(True for _ in self)


def _approximate(original: property) -> property:
    def get(self: Any) -> int:
        if getattr(_cheap, "on", False):
            return 0
        return int(original.fget(self))  # type: ignore[misc]

    return property(get)


def _cheap_during(method: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        before = getattr(_cheap, "on", False)
        _cheap.on = True
        try:
            return method(*args, **kwargs)
        finally:
            _cheap.on = before

    return wrapper


def _install() -> None:
    from moto.sqs import models

    queue, backend = models.Queue, models.SQSBackend
    for name in _APPROXIMATE:
        original = queue.__dict__.get(name)
        if isinstance(original, property):
            _saved.append((queue, name, original))
            setattr(queue, name, _approximate(original))
    original_messages = queue.__dict__.get("messages")
    if isinstance(original_messages, property):
        _saved.append((queue, "messages", original_messages))
        queue.messages = property(lambda self: _LazyMessages(self))  # type: ignore[assignment]
    for name in ("send_message", "send_message_batch", "receive_message"):
        original = backend.__dict__.get(name)
        if original is not None:
            _saved.append((backend, name, original))
            setattr(backend, name, _cheap_during(original))


def _delete_message_batch(self: Any, queue_name: str, receipts: list[dict[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    """moto's DeleteMessageBatch with the same answers, in one pass over the queue."""
    queue = self.get_queue(queue_name)
    wanted = {r["ReceiptHandle"] for r in receipts} - set(queue.deleted_messages)
    if wanted:
        keep = []
        for message in queue._messages:
            handles = message.all_receipt_handles
            if wanted.intersection(handles):
                queue.pending_messages.discard(message)
                queue.deleted_messages.update(handles)
                continue
            keep.append(message)
        queue._messages = keep
    success, errors = [], []
    for r in receipts:
        if r["ReceiptHandle"] in queue.deleted_messages:
            success.append(r["Id"])
        else:
            errors.append({"Id": r["Id"], "SenderFault": True, "Code": "ReceiptHandleIsInvalid",
                           "Message": f'The input receipt handle "{r["ReceiptHandle"]}" is not a valid receipt handle.'})
    return success, errors


def _install_fast_delete_and_names() -> None:
    import functools

    from moto.sqs import models

    original = models.SQSBackend.__dict__.get("delete_message_batch")
    if original is not None:
        _saved.append((models.SQSBackend, "delete_message_batch", original))
        models.SQSBackend.delete_message_batch = _delete_message_batch  # type: ignore[assignment]
    convert = models.__dict__.get("camelcase_to_underscores")
    if convert is not None:
        _saved.append((models, "camelcase_to_underscores", convert))
        models.camelcase_to_underscores = functools.lru_cache(maxsize=1024)(convert)  # type: ignore[attr-defined]


def _install_jsonpath_cache() -> None:
    import functools

    from jsonpath_ng import ext

    original = ext.__dict__.get("parse")
    if original is not None:
        _saved.append((ext, "parse", original))
        ext.parse = functools.lru_cache(maxsize=256)(original)  # type: ignore[assignment]


def _uninstall() -> None:
    while _saved:
        owner, name, original = _saved.pop()
        setattr(owner, name, original)


@contextlib.contextmanager
def faster_moto() -> Iterator[None]:
    """Install the patches for the duration of the block (nested uses share one installation)."""
    global _depth
    with _lock:
        if _depth == 0:
            for install in (_install, _install_fast_delete_and_names, _install_jsonpath_cache):
                try:
                    install()
                except (ImportError, AttributeError):
                    continue
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _uninstall()
