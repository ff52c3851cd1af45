"""Two of moto's per-request costs made linear in the size of the request, answers unchanged.

- **Query-protocol parsing** (EC2's CreateFleet, SQS, ...): moto's `QueryParser` decides whether a
  structure is present by scanning every key of the request for one starting with the structure's
  prefix, once per structure and per list element it tries. A CreateFleet with ~180 launch-template
  overrides has ~1,000 keys and ~1,100 structures: a million prefix tests, ~0.5 s of one request.
  `_IndexedQueryKeys` sorts the keys once per request and answers each test with a binary search (the
  keys starting with a prefix are contiguous in sorted order, beginning where the prefix would be
  inserted), so a structure is found present or absent exactly as by the scan.
- **DynamoDB's item-size limit**: moto stores an item's attributes one by one in a `LimitedSizeDict`
  whose `__setitem__` re-measures every attribute already stored, so writing an item of n attributes
  measures n²/2 of them. `_ItemsMeasuredOnce` builds a new item measuring each attribute once, keeping
  the running total moto's check recomputes, and refuses it (`ItemSizeTooLarge`) at the same attribute
  with the same limit. Attributes set later by an update still go through moto's check: an update may
  have changed stored values in place (a nested SET, an ADD to a set), which a kept total would miss.
"""

from __future__ import annotations

import bisect
from typing import Any

from carpool.sim.moto_patches import Internal, MotoPatch, Replaced

#: moto's item limit, written in `LimitedSizeDict.__setitem__` (fingerprinted in `relies_on`)
_MOTO_ITEM_LIMIT = 405000


class _SortedKeys:
    """The keys of one request's parameters, sorted, and the mapping they were taken from (kept, so a
    parser reused for another request, or this one's mapping replaced, sorts again)."""

    __slots__ = ("keys", "source")

    def __init__(self, source: Any) -> None:
        self.source = source
        self.keys = sorted(source)

    def any_startswith(self, prefix: str) -> bool:
        i = bisect.bisect_left(self.keys, prefix)
        return i < len(self.keys) and self.keys[i].startswith(prefix)


class _IndexedQueryKeys(MotoPatch):
    """`QueryParser._gonna_recurse` (is no key of the request under this prefix?) by binary search over
    the request's keys, sorted once per parse, instead of a scan of every key per structure."""

    replaces = (Internal("moto.core.parse", "QueryParser._gonna_recurse", "53f7e65e0f99a7ce"),)
    #: its caller passes the same request mapping, unchanged, to every test of one parse
    relies_on = (Internal("moto.core.parse", "QueryParser._parse_structure", "b5e5fb772eb38236"),)

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.core.parse import QueryParser

        original = QueryParser.__dict__["_gonna_recurse"]

        def _gonna_recurse(self: Any, query_params: Any, prefix: str) -> bool:
            if prefix == "":
                return False
            index = self.__dict__.get("_carpool_sorted_keys")
            if index is None or index.source is not query_params:
                index = self._carpool_sorted_keys = _SortedKeys(query_params)
            return not index.any_startswith(prefix)

        QueryParser._gonna_recurse = _gonna_recurse  # type: ignore[method-assign]
        return [(QueryParser, "_gonna_recurse", original)]


class _ItemsMeasuredOnce(MotoPatch):
    """`Item.__init__` measuring each attribute once, refusing an item over moto's limit at the same
    attribute as `LimitedSizeDict.__setitem__` would."""

    replaces = (Internal("moto.dynamodb.models.dynamo_type", "Item.__init__", "d9c12b62cb921831"),)
    #: the check it reproduces (limit, and how keys and values are measured) and the measures it calls
    relies_on = (Internal("moto.dynamodb.models.dynamo_type", "LimitedSizeDict.__setitem__", "d979580fdbe14f79"),
                 Internal("moto.dynamodb.models.dynamo_type", "DynamoType.size", "f7c111fca25b4c5e"),
                 Internal("moto.dynamodb.models.utilities", "bytesize", "b0dce378c1ce66af"))

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.dynamodb.exceptions import ItemSizeTooLarge
        from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict
        from moto.dynamodb.models.utilities import bytesize

        original = Item.__dict__["__init__"]

        def __init__(self: Any, hash_key: Any, range_key: Any, attrs: dict[str, Any]) -> None:
            self.hash_key = hash_key
            self.range_key = range_key
            self.attrs = stored = LimitedSizeDict()
            total = 0  # what moto's check sums over the attributes stored so far
            for key, value in attrs.items():
                typed = DynamoType(value)
                size = typed.size()
                if total + bytesize(key) + size > _MOTO_ITEM_LIMIT:
                    raise ItemSizeTooLarge
                dict.__setitem__(stored, key, typed)
                total += bytesize(str(key)) + size

        Item.__init__ = __init__  # type: ignore[method-assign]
        return [(Item, "__init__", original)]


#: the patches of this module, installed by every running `LocalAws`
PATCHES: tuple[type[MotoPatch], ...] = (_IndexedQueryKeys, _ItemsMeasuredOnce)
