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
  still computes them exactly), and look up the one queue attribute they read alone instead of building
  all of them (the queue policy encoded three times per message);
- ReceiveMessage walks the queue lazily and stops once it has its batch, reads the queue's retention
  period alone per message, and draws each receipt handle as random bytes mapped to letters (moto draws
  its 185 letters one `random.choice` at a time);
- DeleteMessageBatch removes its (up to ten) messages in one pass instead of one pass per message;
- each received message is copied field by field as `deepcopy` copies it, without its generic machinery;
- attribute-name conversions are memoised, and JSONPath expressions are parsed once per distinct text
  (both are pure functions of their text).
- DynamoDB items in answers (maps of AttributeValue), which moto's backend already holds in their wire
  form, are written as they are instead of walked member by member through the response serializer
  (about 90 µs per attribute value: a Query returning claims with their pod lists took 200 ms). Items
  holding binary values still take the serializer, which base64-encodes them.
- a DynamoDB Query considers only the items of the partition it names: moto lists and sorts every item
  of the table (10,000 pod nominations) for every Query, then drops the ones of other partitions. The
  same items come back in the same order, without the deep copy of each one moto makes first (nothing
  after it changes them; a claim holding 500 pods took ~8 ms to copy).
  A Query of a global secondary index looks its partition up among the items kept by index key value
  since the last write to any table (`carpool.sim.localaws.moto_partitions`) instead of testing every item.
- DynamoDB's empty-key check runs only for items that could fail it, and duplicate keys in a batch are
  found through a set instead of comparing every pair (`carpool.sim.localaws.moto_checks`);
- DynamoDB condition expressions are parsed once per distinct (text, names, values): a 100-item
  nomination carries the same condition 99 times, and moto parses each twice;
- DynamoDB update expressions are parsed once per distinct text (moto parses each twice per Update,
  about 200 µs a parse; the per-item validation against the stored item still runs every time);
- the table of botocore service names an error answer needs is built once per process, not by every
  request that fails before moto's cache of it is filled (`carpool.sim.localaws.moto_errors`);
- the server's list of service modules (a directory listing per request) is read once, and so is each
  response class's list of method names (an `inspect.getmembers` over the class per request);
- an answer's request id is written into its body only where the body has a `<RequestId>` element (moto
  scans every body, a half-megabyte Query answer included, with a regular expression);
- DynamoDB items in requests already in wire form are taken as decoded from the request's JSON instead
  of rebuilt through the operation's shapes (binary values still decoded by moto's parser);
- EventBridge PutEvents decodes and encodes each entry's detail once and sends SQS targets the body
  moto's default template renders (`carpool.sim.localaws.moto_events`).
(DynamoDB transactions are made cheap by `LocalAws` itself, which serializes DynamoDB requests.)
Nothing about which messages are delivered, their order, visibility, receive counts or dead-lettering
changes; the patches are removed when the block ends. Each is a `carpool.sim.localaws.moto_patches.MotoPatch`:
it names the moto internals it replaces or mirrors, with fingerprints of the code it was written
against, and refuses to install (naming the patch and the internal) when moto's internals changed.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import json
import string
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from carpool.sim.localaws import moto_checks, moto_errors, moto_partitions
from carpool.sim.localaws.moto_events import DirectSqsDelivery
from carpool.sim.localaws.moto_patches import Internal, MotoInternalChanged, MotoPatch, Replaced, installed

_cheap = threading.local()
_APPROXIMATE = (
    "approximate_number_of_messages",
    "approximate_number_of_messages_delayed",
    "approximate_number_of_messages_not_visible",
)
_CHEAP_CALLS = ("send_message", "send_message_batch", "receive_message")
_SQS = "moto.sqs.models"


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


_DEDUPLICATION = "ContentBasedDeduplication"
#: base attributes looked up alone: every queue carries them, each copied from one field of the queue
#: (ReceiveMessage reads the retention period once per message, through `get_queue_attributes`)
_ALONE_BASE = frozenset({"MessageRetentionPeriod"})


class _QueueAttributeLookups:
    """`Queue.attributes` while sending or receiving: the attributes those calls look up
    (`ContentBasedDeduplication`, a FIFO attribute, and `MessageRetentionPeriod`, a base one) computed
    alone, as the property computes them; any other use gets the property's whole answer. The property
    itself encodes the queue policy three times (and the redrive policy once) per call, for every message
    EventBridge delivers and every message received."""

    __slots__ = ("_original", "_queue")

    def __init__(self, queue: Any, original: property) -> None:
        self._queue, self._original = queue, original

    def get(self, name: str, default: Any = None) -> Any:
        if name in _ALONE_BASE:  # every queue carries it
            return self._field(name)
        if name != _DEDUPLICATION:
            return self._whole().get(name, default)
        if not self._queue.fifo_queue:  # only FIFO queues carry it (not a base or KMS attribute: checked on install)
            return default
        return self._field(name)

    def _field(self, name: str) -> Any:
        """An attribute as the property computes it: the queue's field of that name, booleans in lower case."""
        from moto.sqs import models

        value = getattr(self._queue, models.camelcase_to_underscores(name))
        return str(value).lower() if isinstance(value, bool) else value

    def _whole(self) -> dict[str, Any]:
        return dict(self._original.fget(self._queue))  # type: ignore[misc]

    def __getitem__(self, name: str) -> Any:
        return self._whole()[name]

    def __contains__(self, name: object) -> bool:
        return name in _ALONE_BASE or name in self._whole()

    def __iter__(self) -> Iterator[str]:
        return iter(self._whole())

    def __len__(self) -> int:
        return len(self._whole())

    def __getattr__(self, name: str) -> Any:  # items(), keys(), copy(), ...: the whole answer's
        return getattr(self._whole(), name)


def _attribute_lookups(original: property) -> property:
    def get(self: Any) -> Any:
        if getattr(_cheap, "on", False):
            return _QueueAttributeLookups(self, original)
        return original.fget(self)  # type: ignore[misc]

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


class _CheapCounts(MotoPatch):
    """Sending and receiving skip the approximate message counts (three scans of the queue each) and
    look up queue attributes one at a time."""

    replaces = (
        Internal(_SQS, "Queue.approximate_number_of_messages", "d357a9506a56d2f8"),
        Internal(_SQS, "Queue.approximate_number_of_messages_delayed", "c3c1dadb0c42ed5f"),
        Internal(_SQS, "Queue.approximate_number_of_messages_not_visible", "5dbecc4dda174358"),
        Internal(_SQS, "SQSBackend.send_message", "bf161af09a9e6b86"),
        Internal(_SQS, "SQSBackend.send_message_batch", "0707ad219481c867"),
        Internal(_SQS, "SQSBackend.receive_message", "065f3e5e7d214408"),
        Internal(_SQS, "Queue.attributes", "40cb990b121628d5"),
    )
    #: the other ways a sending or receiving call reaches the attributes (`ContentBasedDeduplication`, and
    #: `MessageRetentionPeriod` through `get_queue_attributes`: `name in attributes`, then `get`)
    relies_on = (Internal(_SQS, "Queue.add_message", "f27c9231c1f20433"),
                 Internal(_SQS, "SQSBackend._validate_message", "39cb57c19e596164"),
                 Internal(_SQS, "SQSBackend.is_message_valid_based_on_retention_period", "cca23b94a5f3af9d"),
                 Internal(_SQS, "SQSBackend.get_queue_attributes", "58417223da457b5a"))

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.sqs import models

        queue, backend = models.Queue, models.SQSBackend
        if _DEDUPLICATION in queue.BASE_ATTRIBUTES + queue.KMS_ATTRIBUTES or _DEDUPLICATION not in queue.FIFO_ATTRIBUTES:
            raise MotoInternalChanged(f"{cls.__name__}: {_DEDUPLICATION} is no longer only a FIFO queue attribute")
        for name in _ALONE_BASE:
            if name not in queue.BASE_ATTRIBUTES or name in queue.FIFO_ATTRIBUTES + queue.KMS_ATTRIBUTES + ["Policy", "RedrivePolicy"]:
                raise MotoInternalChanged(f"{cls.__name__}: {name} is no longer a base attribute copied from its field")
        replaced: Replaced = []
        for name in _APPROXIMATE:
            original = queue.__dict__[name]
            replaced.append((queue, name, original))
            setattr(queue, name, _approximate(original))
        for name in _CHEAP_CALLS:
            original = backend.__dict__[name]
            replaced.append((backend, name, original))
            setattr(backend, name, _cheap_during(original))
        attributes = queue.__dict__["attributes"]
        replaced.append((queue, "attributes", attributes))
        queue.attributes = _attribute_lookups(attributes)  # type: ignore[assignment,method-assign]
        return replaced


class _LazyReceive(MotoPatch):
    """ReceiveMessage walks the queue lazily (the visibility test of `Message.visible`/`delayed`, on
    one clock read per yielded message) and stops once it has its batch."""

    replaces = (Internal(_SQS, "Queue.messages", "03a531dbcbcf9aee"),)
    relies_on = (Internal(_SQS, "Message.visible", "5129b573308de62a"), Internal(_SQS, "Message.delayed", "e2fd48abf582683a"))

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.sqs import models

        original = models.Queue.__dict__["messages"]
        models.Queue.messages = property(lambda self: _LazyMessages(self))  # type: ignore[assignment]
        return [(models.Queue, "messages", original)]


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


class _OnePassDeleteBatch(MotoPatch):
    """DeleteMessageBatch removes its (up to ten) messages in one pass instead of one pass per message
    (a re-implementation of moto's `delete_message_batch`/`delete_message`: both are fingerprinted)."""

    replaces = (Internal(_SQS, "SQSBackend.delete_message_batch", "53c0bc5d5f51468a"),)
    relies_on = (Internal(_SQS, "SQSBackend.delete_message", "9eb658afdceb6bd9"), Internal(_SQS, "Queue.delete_message", "fa6fd5b9bd2cafb4"))

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.sqs import models

        original = models.SQSBackend.__dict__["delete_message_batch"]
        models.SQSBackend.delete_message_batch = _delete_message_batch  # type: ignore[assignment]
        return [(models.SQSBackend, "delete_message_batch", original)]


class _MemoisedNames(MotoPatch):
    """Attribute-name conversions are memoised (a pure function of its text)."""

    replaces = (Internal(_SQS, "camelcase_to_underscores", "084cdc5bab92db95"),)

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.sqs import models

        convert = models.__dict__["camelcase_to_underscores"]
        models.camelcase_to_underscores = functools.lru_cache(maxsize=1024)(convert)  # type: ignore[attr-defined]
        return [(models, "camelcase_to_underscores", convert)]


class _ParsedJsonPaths(MotoPatch):
    """JSONPath expressions are parsed once per distinct text. moto's EventBridge input templates import
    `parse` when they run (which is why replacing the module's attribute reaches them)."""

    replaces = (Internal("jsonpath_ng.ext", "parse", "8e8fc5e91980418d"),)
    relies_on = (Internal("moto.events.utils", "EventTemplateParser.parse", "40a5a46a321811bb"),)

    @classmethod
    def _apply(cls) -> Replaced:
        from jsonpath_ng import ext

        original = ext.__dict__["parse"]
        ext.parse = functools.lru_cache(maxsize=256)(original)  # type: ignore[assignment]
        return [(ext, "parse", original)]


#: moto's receipt handle: 185 lowercase ASCII letters (`moto.sqs.utils.generate_receipt_handle`)
_HANDLE_LENGTH = 185
_HANDLE_LETTERS = string.ascii_lowercase
#: random bytes below this map evenly onto the letters (9 bytes each); the others are dropped, so every
#: letter is equally likely, as with moto's `choice`
_EVEN_BYTES = 256 - 256 % len(_HANDLE_LETTERS)
_BYTE_TO_LETTER = bytes(ord(_HANDLE_LETTERS[b % len(_HANDLE_LETTERS)]) if b < _EVEN_BYTES else 0 for b in range(256))
_UNEVEN_BYTES = bytes(range(_EVEN_BYTES, 256))
#: bytes drawn per round: ~212 kept on average, so a second round is needed about once in 10^10 handles
_HANDLE_DRAW = 232


def _receipt_handle() -> str:
    """A receipt handle as moto makes one (185 letters a-z, each uniformly at random from moto's random
    source, `mock_random`, so seeding moto still makes the run repeatable), drawn as bytes and mapped
    to letters in C instead of 185 calls to `random.choice` (~90 µs a handle, ~3 µs drawn as bytes;
    the 10,000 messages of a 10,000-pod burst spent ~5 s profiled there). The letters differ from the
    ones moto's own code would draw for the same seed."""
    from moto.moto_api._internal import mock_random

    letters = b""
    while len(letters) < _HANDLE_LENGTH:
        letters += mock_random.randbytes(_HANDLE_DRAW).translate(_BYTE_TO_LETTER, _UNEVEN_BYTES)
    return letters[:_HANDLE_LENGTH].decode("ascii")


class _FastReceiptHandles(MotoPatch):
    """Receipt handles drawn as bytes (see `_receipt_handle`): same length, alphabet and distribution,
    from the same random source. `Message.mark_received`, the only caller, looks the name up in the
    SQS models module."""

    replaces = (Internal(_SQS, "generate_receipt_handle", "10853f98152c8dab"),)
    relies_on = (Internal(_SQS, "Message.mark_received", "98e7ec115c7fcb9f"),
                 Internal("moto.moto_api._internal.moto_random", "MotoRandom", "22b9dfd0ef63cb3d"))

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.sqs import models

        original = models.__dict__["generate_receipt_handle"]
        models.generate_receipt_handle = _receipt_handle  # type: ignore[attr-defined]
        return [(models, "generate_receipt_handle", original)]


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


class _WireFormItems(MotoPatch):
    """DynamoDB items already in wire form are written as they are instead of member by member."""

    replaces = (Internal("moto.core.serialize", "BaseJSONSerializer._serialize_type_map", "faa32d1fa9a8bfc9"),)
    relies_on = (Internal("moto.core.serialize", "ResponseSerializer._default_serialize", "25ce8ddbb1a991c0"),)

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.core import serialize

        serializer = serialize.BaseJSONSerializer
        original = serializer.__dict__["_serialize_type_map"]

        def _serialize_type_map(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
            if (getattr(shape.value, "name", None) == "AttributeValue" and isinstance(value, dict)
                    and all(_is_wire_form(v) for v in value.values())):
                self._default_serialize(serialized, value, shape, key)
                return
            original(self, serialized, value, shape, key)

        serializer._serialize_type_map = _serialize_type_map  # type: ignore[method-assign]
        return [(serializer, "_serialize_type_map", original)]


class _WireFormRequests(MotoPatch):
    """DynamoDB items in requests (maps of AttributeValue) already in wire form are taken as decoded from
    the request's JSON instead of rebuilt member by member through the operation's shapes (a
    100-item TransactWriteItems walked ~40,000 shapes, a quarter of its server time). moto's JSON parser
    keeps strings, booleans and nulls as they are and rebuilds lists and maps equal to the input, so the
    answer is equal; binary values (`B`, `BS`), which it base64-decodes, still take the parser."""

    replaces = (Internal("moto.core.parse", "RequestParser._parse_map", "a9e8feb4d5519e24"),)
    #: the JSON parser's handlers the shortcut stands for (structures rebuilt, strings and booleans as is)
    relies_on = (Internal("moto.core.parse", "BaseJSONParser._parse_structure", "2de165721ba4b69e"),
                 Internal("moto.core.parse", "RequestParser._parse_list", "e2539182995b831e"),
                 Internal("moto.core.parse", "RequestParser._default_handle", "88c1ab7f9c988be8"),
                 Internal("moto.core.parse", "JSONParser", "203b5e65629fb3c5"))

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.core import parse

        original = parse.RequestParser.__dict__["_parse_map"]
        json_parser = parse.JSONParser

        def _parse_map(self: Any, shape: Any, value: Any) -> Any:
            if (type(self) is json_parser and self.MAP_TYPE is dict and isinstance(value, dict)
                    and getattr(shape.value, "name", None) == "AttributeValue"
                    and all(type(k) is str and _is_wire_form(v) for k, v in value.items())):
                return value
            return original(self, shape, value)

        parse.RequestParser._parse_map = _parse_map  # type: ignore[method-assign]
        return [(parse.RequestParser, "_parse_map", original)]


class _PartitionQueries(MotoPatch):
    """A DynamoDB Query considers only the items of the partition it names (moto lists and sorts the
    whole table through `Table.all_items`, which the patch answers per query), and hands its results
    to the response without deep-copying them first.

    The copy (`copy.deepcopy(results)` in `Table.query`, ~8 ms a claim holding 500 pods) protects the
    stored items from what follows, and nothing that follows changes them: an index projecting ALL
    returns the item itself, other projections and projection expressions build new items, a filter
    expression only reads, and `DynamoHandler.query` turns the items into plain dicts
    (`DynamoResult`, `dynamo_to_dict`) before the request ends. Those readers are in `relies_on`. Only
    calls made inside a Query see the copy skipped (`moto.dynamodb.models.table.copy` answers everything
    else as the `copy` module)."""

    replaces = (Internal("moto.dynamodb.models.table", "Table.query", "002b4d00be6df07c"),
                Internal("moto.dynamodb.models.table", "copy", "47ee7b6043b7c1e1"))
    relies_on = (Internal("moto.dynamodb.models.table", "Table.all_items", "c80d2ee3c896acd0"),
                 Internal("moto.dynamodb.models.dynamo_type", "DynamoType.__eq__", "48f12362c49f00c1"),
                 Internal("moto.dynamodb.models.dynamo_type", "DynamoType.cast_value", "135da387dfcc7c1c"),
                 Internal("moto.dynamodb.models.table", "SecondaryIndex.project", "b2eb603ebd167860"),
                 Internal("moto.dynamodb.models.dynamo_type", "Item.project", "f411e6d8b56886f4"),
                 Internal("moto.dynamodb.responses", "DynamoHandler.query", "681834c64038af93"),
                 Internal("moto.dynamodb.responses", "DynamoResult.__init__", "e2394775cd5ef6ad"))

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.dynamodb.models import table as table_module
        from moto.dynamodb.models.table import Table

        original = Table.__dict__["query"]
        signature = inspect.signature(original)

        def query(self: Any, *args: Any, **kwargs: Any) -> Any:
            given = signature.bind(self, *args, **kwargs).arguments
            conditions = list(given.get("hash_key_conditions") or [])
            if given.get("index_name") is None and given.get("hash_key") is not None:
                conditions = [(self.hash_key_attr, given["hash_key"])]
            before = getattr(_querying, "on", False)
            _querying.on = True
            try:
                if not conditions:
                    return original(self, *args, **kwargs)
                self.all_items = lambda: _partition(self, conditions, given.get("index_name") is None)
                try:
                    return original(self, *args, **kwargs)
                finally:
                    del self.all_items
            finally:
                _querying.on = before

        copy_module = table_module.__dict__["copy"]
        table_module.copy = _ResultsUncopied(copy_module)  # type: ignore[assignment]
        Table.query = query  # type: ignore[method-assign]
        return [(table_module, "copy", copy_module), (Table, "query", original)]


#: set while a Query runs on this thread (the DynamoDB lock of LocalAws serializes the requests themselves)
_querying = threading.local()


class _ResultsUncopied:
    """The `copy` module as moto's table module sees it: inside a Query the results list is copied, not
    its items (see `_PartitionQueries`); everything else as `copy` does it."""

    def __init__(self, module: Any) -> None:
        self._copy = module

    def deepcopy(self, value: Any, *args: Any) -> Any:
        if getattr(_querying, "on", False) and type(value) is list:
            return list(value)
        return self._copy.deepcopy(value, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._copy, name)


def _every_item(table: Any) -> Iterable[Any]:
    """Every item of the table, in `Table.all_items` order."""
    groups = table.items.values()
    return itertools.chain.from_iterable(g.values() for g in groups) if table.range_key_attr else groups


def _partition(table: Any, conditions: list[tuple[str, Any]], base: bool) -> list[Any]:
    """What `Table.all_items()` returns, less the items the query's hash-key conditions rule out."""
    candidates: Iterable[Any]
    if base:
        found = table.items.get(conditions[0][1])
        candidates = [] if found is None else list(found.values()) if table.range_key_attr else [found]
    else:  # every item of the table, in `all_items` order
        candidates = _every_item(table)
    if len(conditions) == 1:
        (name, value), = conditions
        if not base:  # the index's partition as kept between writes (`carpool.sim.localaws.moto_partitions`)
            looked_up = moto_partitions.partition(table, name, value.type, value.value, lambda: _every_item(table))
            if looked_up is not None:
                return sorted(looked_up, key=lambda x: (x.hash_key, x.range_key) if x.range_key else x.hash_key)
        if value.type in _PLAIN_VALUE_TYPES:  # `_equal` inline: a GSI query tests every item of the table
            kind, wanted = value.type, value.value
            kept = [i for i in candidates
                    if (found := i.attrs.get(name)) is not None and found.type == kind and found.value == wanted]
        else:
            kept = [i for i in candidates if _equal(i.attrs.get(name), value)]
    else:
        kept = [i for i in candidates if all(_equal(i.attrs.get(name), value) for name, value in conditions)]
    return sorted(kept, key=lambda x: (x.hash_key, x.range_key) if x.range_key else x.hash_key)


#: AttributeValue types whose `DynamoType.cast_value` is the stored value itself
_PLAIN_VALUE_TYPES = frozenset({"S", "B"})


def _equal(found: Any, wanted: Any) -> bool:
    """`DynamoType.__eq__` (same type, equal `cast_value`); a string or binary key compares its stored
    values directly instead of through `cast_value` (a GSI query tests every item of the table)."""
    if found is None:
        return False
    if wanted.type in _PLAIN_VALUE_TYPES:
        return bool(found.type == wanted.type and found.value == wanted.value)
    return bool(found == wanted)


_MISSING = object()
#: Parsed expressions kept at most (the simulation uses a handful; the bound only guards a runaway).
_MEMO_LIMIT = 4096
#: the modules that hold (import) moto's `get_filter_expression`: each call site is patched
_FILTER_MODULES = ("moto.dynamodb.comparisons", "moto.dynamodb.models", "moto.dynamodb.models.table")


#: one encoder for every key (`json.dumps` with `sort_keys` builds a new encoder per call)
_KEY_ENCODER = json.JSONEncoder(sort_keys=True)


def _expression_key(expr: Any, names: Any, values: Any) -> Any:
    """A key for an expression with its names and values (equal keys only for equal inputs); None for
    binary values (not worth a key). The usual inputs (text, names mapped to text, values that are
    one-level maps of text such as `{":now": {"N": "1732480000"}}`) are keyed as tuples of exactly those
    strings, about twice as fast as the JSON text every other input is keyed by (a 100-item
    transaction asks for a key twice per item). A tuple never equals a text key."""
    plain = _text_key(expr, names, values)
    if plain is not None:
        return plain
    try:
        return _KEY_ENCODER.encode([expr, names, values])
    except (TypeError, ValueError):
        return None


def _text_pairs(mapping: Any) -> tuple[tuple[str, str], ...] | None:
    """A dict of text to text as its sorted pairs; None for anything else (a subclass of str included)."""
    if type(mapping) is not dict:
        return None
    pairs = sorted(mapping.items())
    for key, value in pairs:
        if type(key) is not str or type(value) is not str:
            return None
    return tuple(pairs)


def _text_key(expr: Any, names: Any, values: Any) -> tuple[Any, ...] | None:
    """(expr, names, values) as nested tuples of strings when they are only text (None and {} kept apart)."""
    if type(expr) is not str:
        return None
    named = None
    if names is not None:
        named = _text_pairs(names)
        if named is None:
            return None
    valued = None
    if values is not None:
        if type(values) is not dict:
            return None
        items = []
        for key, value in sorted(values.items()):
            pairs = _text_pairs(value)
            if type(key) is not str or pairs is None:
                return None
            items.append((key, pairs))
        valued = tuple(items)
    return (expr, named, valued)


def _remember(memo: dict[Any, Any], key: Any, value: Any) -> Any:
    if len(memo) > _MEMO_LIMIT:
        memo.clear()
    memo[key] = value
    return value


class _ParsedConditions(MotoPatch):
    """DynamoDB condition expressions are parsed once per distinct (text, names, values), both where
    moto evaluates them and where request validation parses them once more."""

    replaces = tuple(Internal(m, "get_filter_expression", "0bb9e2d345c7f17f") for m in _FILTER_MODULES) + (
        Internal("moto.dynamodb.responses", "create_condition_expression_parser", "a667986752c086a5"),
    )

    @classmethod
    def _apply(cls) -> Replaced:
        import importlib

        from moto.dynamodb import comparisons, responses

        original = comparisons.__dict__["get_filter_expression"]
        parsed: dict[Any, Any] = {}

        def get_filter_expression(expr: Any, names: Any, values: Any) -> Any:
            key = _expression_key(expr, names, values)
            if key is None:
                return original(expr, names, values)
            hit = parsed.get(key, _MISSING)  # one lookup: another server's thread may clear the memo meanwhile
            return hit if hit is not _MISSING else _remember(parsed, key, original(expr, names, values))

        replaced: Replaced = []
        for name in _FILTER_MODULES:
            module = importlib.import_module(name)
            replaced.append((module, "get_filter_expression", module.__dict__["get_filter_expression"]))
            module.get_filter_expression = get_filter_expression  # type: ignore[attr-defined]

        create = responses.__dict__["create_condition_expression_parser"]
        validated: dict[Any, tuple[Any, Any]] = {}

        def create_condition_expression_parser(expr: Any, names: Any, values: Any) -> Any:
            key = _expression_key(expr, names, values)
            if key is None:
                return create(expr, names, values)
            return _ParsedOnce(key, validated, lambda: create(expr, names, values))

        replaced.append((responses, "create_condition_expression_parser", create))
        responses.create_condition_expression_parser = create_condition_expression_parser  # type: ignore[attr-defined]
        return replaced


class _ParsedOnce:
    """A condition parser whose `parse()` answer (and the names it found) is shared by equal inputs.
    Each parser hands out its own copy of the names (callers extend it). Errors are not remembered: an
    invalid expression raises from `parse()` every time, as before."""

    def __init__(self, key: Any, memo: dict[Any, tuple[Any, Any]], make: Any) -> None:
        self._key, self._memo, self._make = key, memo, make

    def parse(self) -> Any:
        found = self._memo.get(self._key)
        if found is None:
            parser = self._make()
            found = _remember(self._memo, self._key, (parser.parse(), parser.expr_attr_names_found))
        result, names = found
        # a list of its own: moto's TransactWriteItems extends it with the update expression's names
        self.expr_attr_names_found = list(names)
        return result

    def __getattr__(self, name: str) -> Any:  # anything else: a real parser, parsed
        parser = self._make()
        parser.parse()
        return getattr(parser, name)


_EXPRESSIONS = "moto.dynamodb.parsing.expressions"


class _ParsedUpdates(MotoPatch):
    """DynamoDB update expressions are parsed once per distinct text (moto parses each Update twice:
    once to validate the request, once in the backend). The parse is a function of the text alone;
    names and values are resolved later, per item, by `UpdateExpressionValidator`, which is not
    memoised. Every holder shares one tree: moto only reads the parsed tree (`find_clauses`), and
    `Validator.__init__` deep-copies it before its processors rewrite nodes (a copy per parse would cost
    as much as the parse). Those readers are fingerprinted, so a moto that starts mutating the tree fails
    the install. Invalid expressions are not remembered: they raise from moto's parser every time."""

    replaces = (Internal(_EXPRESSIONS, "UpdateExpressionParser.make", "2c00ed96d6e191f2"),)
    relies_on = (
        Internal("moto.dynamodb.parsing.validators", "Validator.__init__", "9489b532dd0fb359"),
        Internal("moto.dynamodb.models", "DynamoDBBackend.update_item", "218984588dd689a5"),
        Internal("moto.dynamodb.responses", "DynamoHandler.update_item", "638893af1afd43d2"),
        Internal("moto.dynamodb.responses", "DynamoHandler.transact_write_items", "61c163fff213f33a"),
    )

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]

        original = UpdateExpressionParser.__dict__["make"]
        parsed: dict[str, Any] = {}

        def make(parser: Any, expression_str: Any) -> Any:
            if not isinstance(expression_str, str) or parser is not UpdateExpressionParser:
                return original.__get__(None, parser)(expression_str)
            hit = parsed.get(expression_str, _MISSING)  # one lookup: another server's thread may clear the memo
            if hit is not _MISSING:
                return hit
            return _remember(parsed, expression_str, original.__get__(None, parser)(expression_str))

        UpdateExpressionParser.make = classmethod(make)  # type: ignore[method-assign,assignment]
        return [(UpdateExpressionParser, "make", original)]


class _ModuleListOnce(MotoPatch):
    """The server's list of service modules (a directory listing per request) is read once."""

    replaces = (Internal("moto.backends", "list_of_moto_modules", "4f741a10b06500e8"),)

    @classmethod
    def _apply(cls) -> Replaced:
        from moto import backends

        original = backends.__dict__["list_of_moto_modules"]
        names = tuple(original())
        backends.list_of_moto_modules = lambda: names  # type: ignore[assignment]
        return [(backends, "list_of_moto_modules", original)]


#: what `copy.deepcopy` hands back as it is (its `_deepcopy_atomic` types that a message's fields hold)
_ATOMIC = frozenset({str, int, float, bool, type(None), bytes})


class _CheapMessageCopies(MotoPatch):
    """ReceiveMessage deep-copies each message it hands out (so filtering its attributes leaves the
    stored one alone). For a `Message` the copy is made as `deepcopy` makes it for a plain object
    (`cls.__new__`, the copy registered in the memo, then each field deep-copied with that memo) minus
    the reduce and reconstruct machinery, and fields holding strings, numbers, None or bytes taken as
    they are, which is what `deepcopy` does with them: the same object, ~2x cheaper. Only while
    `Message` copies like a plain object (no `__deepcopy__`, `__reduce_ex__`, state hooks or slots of
    its own); anything else, and every other value, goes to `deepcopy` itself."""

    replaces = (Internal(_SQS, "deepcopy", "1aa3f74c774282a7"),)
    relies_on = (Internal("moto.core.common_models", "BaseModel.__new__", "08cf0ef20e88029a"),)

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.sqs import models

        message = models.Message
        hooks = ("__deepcopy__", "__reduce_ex__", "__reduce__", "__getstate__", "__setstate__", "__slots__")
        custom = [h for h in hooks if any(h in vars(k) for k in message.__mro__ if k is not object)]
        if custom:
            raise MotoInternalChanged(f"{cls.__name__}: moto's Message defines {', '.join(custom)}; "
                                      "review the copy against copy.deepcopy")
        original = models.__dict__["deepcopy"]

        def deepcopy(x: Any, memo: dict[int, Any] | None = None, _nil: Any = None) -> Any:
            if type(x) is not message or memo is not None:
                return original(x, memo) if _nil is None else original(x, memo, _nil)
            memo = {}
            copied = message.__new__(message)
            memo[id(x)] = copied
            copied.__dict__.update({k: v if type(v) in _ATOMIC else original(v, memo) for k, v in x.__dict__.items()})
            return copied

        models.deepcopy = deepcopy  # type: ignore[attr-defined]
        return [(models, "deepcopy", original)]


class _RequestIdsWhereWritten(MotoPatch):
    """Every answer gets a request id, which moto also writes into the body with a regular expression
    (`(?<=<RequestId>).*(?=</RequestId>)`) that tries its look-behind at every character: a JSON answer
    of claims listing their pods (half a megabyte) is scanned to change nothing. A text body without
    `<RequestId>` cannot match, so it is returned as it is; the status is cast and the id drawn (in the
    same order from moto's random source) exactly as moto does. Anything else takes moto's own code."""

    replaces = (Internal("moto.core.responses", "BaseResponse._enrich_response", "86cd4a4051dd20e8"),)

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.core import responses

        original = responses.BaseResponse.__dict__["_enrich_response"]

        def _enrich_response(headers: dict[str, str], body: Any) -> tuple[dict[str, str], Any]:
            if not isinstance(body, str) or "<RequestId>" in body:
                return original.__func__(headers, body)
            if "status" in headers:
                headers["status"] = str(headers["status"])
            responses.gen_amzn_requestid_long(headers)
            return headers, body

        responses.BaseResponse._enrich_response = staticmethod(_enrich_response)  # type: ignore[assignment,method-assign]
        return [(responses.BaseResponse, "_enrich_response", original)]


class _MethodNamesOnce(MotoPatch):
    """The dispatcher's list of a response class's method names (`inspect.getmembers` over the class,
    hundreds of attributes, on every request) is computed once per class while installed. The names are
    a pure function of the class: the patches installed alongside replace methods, they add none."""

    replaces = (Internal("moto.core.responses", "method_names_from_class", "9dbac89d082b655f"),)

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.core import responses

        original = responses.__dict__["method_names_from_class"]
        known: dict[type, list[str]] = {}

        def method_names_from_class(clazz: type) -> list[str]:
            names = known.get(clazz)
            if names is None:
                names = known[clazz] = original(clazz)
            return list(names)  # a fresh list each call, as moto's

        responses.method_names_from_class = method_names_from_class  # type: ignore[assignment]
        return [(responses, "method_names_from_class", original)]


#: installed in this order, removed in the reverse one
PATCHES: tuple[type[MotoPatch], ...] = (_CheapCounts, _LazyReceive, _OnePassDeleteBatch, _MemoisedNames,
                                        _FastReceiptHandles, _ParsedJsonPaths, _WireFormItems, moto_partitions.WritesCounted,
                                        _PartitionQueries, _ParsedConditions,
                                        _ParsedUpdates, _ModuleListOnce, DirectSqsDelivery,
                                        _WireFormRequests, _MethodNamesOnce, _CheapMessageCopies,
                                        _RequestIdsWhereWritten, moto_checks.EmptyKeysChecked,
                                        moto_checks.DuplicateKeysHashed, moto_errors.ServiceNamesOnce)


@contextlib.contextmanager
def faster_moto() -> Iterator[None]:
    """Install the patches for the duration of the block (nested and concurrent uses share one
    installation). Raises `MotoInternalChanged` when an internal a patch replaces has changed."""
    with installed(*PATCHES):
        yield
