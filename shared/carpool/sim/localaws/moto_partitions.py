"""Index partitions of local DynamoDB tables, kept between writes.

moto answers a Query on a global secondary index by testing every item of the table (10,000 pod
nominations) against the index's hash key, on every Query. `carpool.sim.localaws.motofast` narrows a Query to
the items of the partition it names; this module lets it look that partition up instead of scanning,
as long as nothing has written to any table since the lookup table was built.

"Nothing has written" is a process-wide count of writes (`WritesCounted`), advanced before and after
every DynamoDB request that is not a read (PutItem, UpdateItem, TransactWriteItems, PartiQL, table
changes, anything new), and by the backend's own item writers (`Table.put_item`, `Table.delete_item`,
`DynamoDBBackend.update_item`, which changes stored items in place) for code that calls moto's backend
directly. A lookup table is rebuilt, with one scan of the table as moto's query makes, when the count
moved: a run of reads (a registrar asking for the claim of each new node) scans once. Only string and
binary key values (compared by their stored value, `DynamoType.__eq__` on the same type) are looked up;
anything else is left to the scan.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from carpool.sim.localaws.moto_patches import Internal, MotoPatch, Replaced

_TABLE = "moto.dynamodb.models.table"
#: DynamoDB actions that only read items: the others advance the write count
READS = frozenset({"Query", "GetItem", "BatchGetItem", "Scan", "DescribeTable", "ListTables", "DescribeTimeToLive"})
#: AttributeValue types whose stored value is what `DynamoType.__eq__` compares (`cast_value` is the value)
PLAIN_TYPES = frozenset({"S", "B"})

_counter = itertools.count(1)
_writes = 0
#: per table (weakly: a deleted table takes its lookups with it), per attribute name: (write count, lookup)
_lookups: weakref.WeakKeyDictionary[Any, dict[str, tuple[int, dict[tuple[str, Any], list[Any]]]]] = (
    weakref.WeakKeyDictionary())
_lock = threading.Lock()


def _wrote() -> None:
    """Advance the write count (`next` on a count is atomic: servers of other accounts run concurrently)."""
    global _writes
    _writes = next(_counter)


def _counting(method: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _wrote()
        try:
            return method(*args, **kwargs)
        finally:
            _wrote()

    wrapper.__wrapped__ = method  # type: ignore[attr-defined]
    return wrapper


class WritesCounted(MotoPatch):
    """Every DynamoDB request that is not a read, and each of the backend's item writers, advance the
    write count before and after they run. Installing (and removing) forgets every lookup table: writes
    made while not installed were not counted."""

    replaces = (Internal("moto.dynamodb.responses", "DynamoHandler.call_action", "ce5f57cf83cde340"),
                Internal(_TABLE, "Table.put_item", "de23933013ef8426"),
                Internal(_TABLE, "Table.delete_item", "1594f7b07616c8cb"),
                Internal("moto.dynamodb.models", "DynamoDBBackend.update_item", "218984588dd689a5"))
    #: how the handler names its action (the header moto's DynamoDB requests carry)
    relies_on = (Internal("moto.core.responses", "BaseResponse._get_action", "6430b292c4321773"),)

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.dynamodb import models, responses
        from moto.dynamodb.models.table import Table

        _forget()
        handler = responses.DynamoHandler
        call_action = handler.__dict__["call_action"]

        def counted_call_action(self: Any) -> Any:
            try:
                read = self._get_action() in READS
            except Exception:  # an action it cannot name: counted as a write
                read = False
            if read:
                return call_action(self)
            _wrote()
            try:
                return call_action(self)
            finally:
                _wrote()

        replaced: Replaced = [(handler, "call_action", call_action)]
        handler.call_action = counted_call_action  # type: ignore[method-assign]
        for owner, name in ((Table, "put_item"), (Table, "delete_item"), (models.DynamoDBBackend, "update_item")):
            original = owner.__dict__[name]
            replaced.append((owner, name, original))
            setattr(owner, name, _counting(original))
        return replaced

    @classmethod
    def uninstall(cls) -> None:
        super().uninstall()
        if not cls.installed():
            _forget()


def _forget() -> None:
    with _lock:
        _lookups.clear()


def partition(table: Any, name: str, kind: str, value: Any, items: Callable[[], Iterable[Any]]) -> list[Any] | None:
    """The items (of `items()`, every item of `table`) whose attribute `name` is a
    `kind` equal to `value`, from the lookup table of `table` by `name`, built from `items` when
    anything wrote since. None when the lookup cannot answer (writes are not being counted, the type is
    not looked up, the value cannot be a key): the caller scans."""
    if kind not in PLAIN_TYPES or not WritesCounted.installed():
        return None
    try:
        hash(value)
    except TypeError:
        return None
    since = _writes
    by_name = _lookups.get(table)
    kept = by_name.get(name) if by_name is not None else None
    if kept is None or kept[0] != since:
        lookup = _build(name, items())
        if lookup is None:
            return None
        with _lock:
            _lookups.setdefault(table, {})[name] = kept = (since, lookup)
    return list(kept[1].get((kind, value), ()))


def _build(name: str, items: Iterable[Any]) -> dict[tuple[str, Any], list[Any]] | None:
    lookup: dict[tuple[str, Any], list[Any]] = {}
    try:
        for item in items:
            found = item.attrs.get(name)
            if found is not None and found.type in PLAIN_TYPES:
                key = (found.type, found.value)
                group = lookup.get(key)
                if group is None:
                    lookup[key] = [item]
                else:
                    group.append(item)
    except TypeError:  # a value that cannot be a key
        return None
    return lookup
