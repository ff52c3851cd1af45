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
- DynamoDB items in answers (maps of AttributeValue), which moto's backend already holds in their wire
  form, are written as they are instead of walked member by member through the response serializer
  (about 90 µs per attribute value: a Query returning claims with their pod lists took 200 ms). Items
  holding binary values still take the serializer, which base64-encodes them.
- a DynamoDB Query considers only the items of the partition it names: moto lists and sorts every item
  of the table (10,000 pod nominations) for every Query, then drops the ones of other partitions. The
  same items come back in the same order.
- DynamoDB condition expressions are parsed once per distinct (text, names, values): a 100-item
  nomination carries the same condition 99 times, and moto parses each twice;
- the server's list of service modules (a directory listing per request) is read once.
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
        from moto.sqs import models

        # `Message.visible`/`delayed` read the clock per message; messages received a moment ago (held
        # invisible while a batch is handled) would cost a clock read each on every receive. The clock is
        # read through the SQS models module, as moto's own code does (LocalAws answers it on the clock of
        # the server serving the request: a simulation's)
        now = models.unix_time_millis()
        for message in list(self._queue._messages):
            if now > message.visible_at and not now < message.delayed_until:
                yield message
                now = models.unix_time_millis()

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
        messages = queue._messages
        for i, message in enumerate(messages):
            if not wanted:  # all found (received messages sit near the front): keep the rest as is
                keep.extend(messages[i:])
                break
            handles = message.all_receipt_handles
            if wanted.intersection(handles):
                wanted.difference_update(handles)
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


_WIRE_TYPES = frozenset({"S", "N", "BOOL", "NULL", "L", "M", "SS", "NS"})


def _is_wire_form(value: Any) -> bool:
    """An AttributeValue already as DynamoDB's JSON puts it, with nothing the serializer would change."""
    if not isinstance(value, dict) or len(value) != 1:
        return False
    (kind, inner), = value.items()
    if kind not in _WIRE_TYPES:
        return False
    if kind == "L":
        return isinstance(inner, list) and all(_is_wire_form(v) for v in inner)
    if kind == "M":
        return isinstance(inner, dict) and all(_is_wire_form(v) for v in inner.values())
    if kind in ("SS", "NS"):
        return isinstance(inner, list) and all(isinstance(v, str) for v in inner)
    if kind == "BOOL" or kind == "NULL":
        return isinstance(inner, bool)
    return isinstance(inner, str)


def _install_wire_form_items() -> None:
    from moto.core import serialize

    cls = serialize.BaseJSONSerializer
    original = cls.__dict__.get("_serialize_type_map")
    if original is None:
        return

    def _serialize_type_map(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
        if (getattr(shape.value, "name", None) == "AttributeValue" and isinstance(value, dict)
                and all(_is_wire_form(v) for v in value.values())):
            self._default_serialize(serialized, value, shape, key)
            return
        original(self, serialized, value, shape, key)

    _saved.append((cls, "_serialize_type_map", original))
    cls._serialize_type_map = _serialize_type_map  # type: ignore[method-assign]


def _install_partition_queries() -> None:
    import inspect

    from moto.dynamodb.models.table import Table

    original = Table.__dict__.get("query")
    if original is None or "all_items" not in Table.__dict__:
        return
    signature = inspect.signature(original)

    def query(self: Any, *args: Any, **kwargs: Any) -> Any:
        given = signature.bind(self, *args, **kwargs).arguments
        conditions = list(given.get("hash_key_conditions") or [])
        if given.get("index_name") is None and given.get("hash_key") is not None:
            conditions = [(self.hash_key_attr, given["hash_key"])]
        if not conditions:
            return original(self, *args, **kwargs)
        self.all_items = lambda: _partition(self, conditions, given.get("index_name") is None)
        try:
            return original(self, *args, **kwargs)
        finally:
            del self.all_items

    _saved.append((Table, "query", original))
    Table.query = query  # type: ignore[method-assign]


def _partition(table: Any, conditions: list[tuple[str, Any]], base: bool) -> list[Any]:
    """What `Table.all_items()` returns, less the items the query's hash-key conditions rule out."""
    if base:
        found = table.items.get(conditions[0][1])
        candidates = [] if found is None else list(found.values()) if table.range_key_attr else [found]
    else:
        candidates = [item for group in table.items.values()
                      for item in (group.values() if table.range_key_attr else [group])]
    kept = [i for i in candidates if all(_equal(i.attrs.get(name), value) for name, value in conditions)]
    return sorted(kept, key=lambda x: (x.hash_key, x.range_key) if x.range_key else x.hash_key)


_MISSING = object()
#: Parsed expressions kept at most (the simulation uses a handful; the bound only guards a runaway).
_MEMO_LIMIT = 4096


def _expression_key(expr: Any, names: Any, values: Any) -> str | None:
    """A key for an expression with its names and values; None for binary values (not worth a key)."""
    import json

    try:
        return json.dumps([expr, names, values], sort_keys=True)
    except (TypeError, ValueError):
        return None


def _remember(memo: dict[str, Any], key: str, value: Any) -> Any:
    if len(memo) > _MEMO_LIMIT:
        memo.clear()
    memo[key] = value
    return value


def _install_parsed_conditions() -> None:
    from moto.dynamodb import comparisons, responses
    from moto.dynamodb import models as dynamodb_models
    from moto.dynamodb.models import table

    original = comparisons.__dict__.get("get_filter_expression")
    if original is None:
        return
    parsed: dict[str, Any] = {}

    def get_filter_expression(expr: Any, names: Any, values: Any) -> Any:
        key = _expression_key(expr, names, values)
        if key is None:
            return original(expr, names, values)
        hit = parsed.get(key, _MISSING)  # one lookup: another server's thread may clear the memo meanwhile
        return hit if hit is not _MISSING else _remember(parsed, key, original(expr, names, values))

    for module in (comparisons, responses, dynamodb_models, table):
        if module.__dict__.get("get_filter_expression") is original:
            _saved.append((module, "get_filter_expression", original))
            module.get_filter_expression = get_filter_expression  # type: ignore[attr-defined]

    create = responses.__dict__.get("create_condition_expression_parser")
    if create is not None:  # request validation parses every action's condition once more
        validated: dict[str, tuple[Any, Any]] = {}

        def create_condition_expression_parser(expr: Any, names: Any, values: Any) -> Any:
            key = _expression_key(expr, names, values)
            if key is None:
                return create(expr, names, values)
            return _ParsedOnce(key, validated, lambda: create(expr, names, values))

        _saved.append((responses, "create_condition_expression_parser", create))
        responses.create_condition_expression_parser = create_condition_expression_parser  # type: ignore[attr-defined]


class _ParsedOnce:
    """A condition parser whose `parse()` answer (and the names it found) is shared by equal inputs.
    Errors are not remembered: an invalid expression raises from `parse()` every time, as before."""

    def __init__(self, key: str, memo: dict[str, tuple[Any, Any]], make: Any) -> None:
        self._key, self._memo, self._make = key, memo, make

    def parse(self) -> Any:
        found = self._memo.get(self._key)
        if found is None:
            parser = self._make()
            found = _remember(self._memo, self._key, (parser.parse(), parser.expr_attr_names_found))
        result, self.expr_attr_names_found = found
        return result

    def __getattr__(self, name: str) -> Any:  # anything else: a real parser, parsed
        parser = self._make()
        parser.parse()
        return getattr(parser, name)


def _install_module_list() -> None:
    from moto import backends

    original = backends.__dict__.get("list_of_moto_modules")
    if original is None:
        return
    names = tuple(original())
    _saved.append((backends, "list_of_moto_modules", original))
    backends.list_of_moto_modules = lambda: names  # type: ignore[assignment]


def _equal(found: Any, wanted: Any) -> bool:
    return found is not None and bool(found == wanted)


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
            for install in (_install, _install_fast_delete_and_names, _install_jsonpath_cache,
                            _install_wire_form_items, _install_partition_queries, _install_parsed_conditions,
                            _install_module_list):
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
