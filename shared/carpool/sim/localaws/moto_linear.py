"""Some of moto's per-request costs made linear in the size of the request, answers unchanged.

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
- **DynamoDB's measures and answers**: moto measures an attribute value (`DynamoType.size`, twice per
  Query result, once per BatchGetItem result) by building a `DynamoType` per set and map member, and
  for a map member a copy of its whole subtree at every level; it turns answers into plain values
  through five type tests per value. `_MeasuredSizes` and `_PlainAnswers` compute the same numbers and
  values directly. Neither keeps anything between calls: stored items change in place.
- **DynamoDB's keys**: items are stored in dicts keyed by `DynamoType`, whose hash and equality go
  through `cast_value` (five type tests) for every lookup. `_DirectAttributeValues` hashes and compares
  strings and binary values, and builds values from one-entry dicts, directly, with the same results.
"""

from __future__ import annotations

import bisect
from typing import Any

from carpool.sim.localaws.moto_patches import Internal, MotoInternalChanged, MotoPatch, Replaced

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


_DYNAMO_TYPE = "moto.dynamodb.models.dynamo_type"
_SET_TYPES = frozenset({"SS", "NS", "BS"})


class _Unusual(Exception):
    """A value outside the shapes the measure mirrors: moto's own `size` answers (or raises) instead."""


def _sizes(dynamo_type: Any, bytesize: Any, original: Any) -> Any:
    """`DynamoType.size` with moto's arithmetic, without the `DynamoType` objects moto builds to measure
    (one per set member and per map member, and for a map member holding a list or map a copy of its
    whole subtree, again at every level below: a claim holding 500 pods built ~1,200 objects per
    measure). Every number is the one moto's code computes for the same value; any value outside the
    shapes below is measured by moto's own `size` (which then answers or raises as it always did)."""

    def leaf(kind: str, value: Any) -> int:
        # `size` of a value of a type that is not a set, list or map (a set member too: `DynamoType({"S": v})`)
        if kind == "N":
            return len(str(value))
        if type(value) is str:  # `bytesize` of a string (not a bool)
            return len(value.encode("utf-8"))
        return 1 if isinstance(value, bool) else int(bytesize(value))

    def listed(value: Any) -> int:
        # `sum(v.size() for v in value)`: the members of a stored list (strings, the common case, inline)
        total = 0
        for v in value:
            if type(v) is not dynamo_type:
                total += v.size()
            elif v.type == "S" and type(v.value) is str:
                total += len(v.value.encode("utf-8"))
            else:
                total += measure(v.type, v.value)
        return total

    def measure(kind: Any, value: Any) -> int:
        # `size` of a DynamoType holding (kind, value) as stored
        if kind in _SET_TYPES:
            sub = kind[0]
            return sum([leaf(sub, v) for v in value])
        if kind == "L":
            return listed(value)
        if kind == "M":
            return sum([bytesize(k) + converted(v) for k, v in value.items()])
        return leaf(kind, value)

    def converted(x: Any) -> int:
        # `DynamoType(x).size()`: the constructor wraps every list and map member again
        if type(x) is dynamo_type:
            kind, value = x.type, x.value
        elif type(x) is dict and len(x) >= 1:
            kind, value = list(x)[0], list(x.values())[0]
        else:
            raise _Unusual
        if kind == "L":
            return sum([converted(v) for v in value])
        if kind == "M":
            return sum([bytesize(k) + converted(v) for k, v in value.items()])
        return measure(kind, value)

    def size(self: Any) -> int:
        try:
            return measure(self.type, self.value)
        except Exception:  # noqa: BLE001 - moto's own measure answers (or raises) for anything unusual
            return int(original(self))

    return size


class _MeasuredSizes(MotoPatch):
    """`DynamoType.size` computed from the stored values without building `DynamoType` objects (see
    `_sizes`). moto measures every item twice per Query result (the 1 MB page), once per BatchGetItem
    result (16 MB) and per attribute written; a Query returning claims of ~500 pods spent ~35 ms here."""

    replaces = (Internal(_DYNAMO_TYPE, "DynamoType.size", "f7c111fca25b4c5e"),)
    #: what the measure mirrors: the constructor's wrapping, the type tests, the byte count
    relies_on = (Internal(_DYNAMO_TYPE, "DynamoType.__init__", "7c6cde92e1149bfe"),
                 Internal(_DYNAMO_TYPE, "DynamoType.is_number", "1acd1246a6710316"),
                 Internal(_DYNAMO_TYPE, "DynamoType.is_set", "01b70f096bc58dfa"),
                 Internal(_DYNAMO_TYPE, "DynamoType.is_list", "9cc3570f1cb8448b"),
                 Internal(_DYNAMO_TYPE, "DynamoType.is_map", "6e6551375b6c2ac0"),
                 Internal("moto.dynamodb.models.utilities", "bytesize", "b0dce378c1ce66af"))

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.dynamodb.models.dynamo_type import DynamoType
        from moto.dynamodb.models.utilities import bytesize

        original = DynamoType.__dict__["size"]
        DynamoType.size = _sizes(DynamoType, bytesize, original)  # type: ignore[method-assign]
        return [(DynamoType, "size", original)]


def _plain(dynamo_type: Any, limited: Any, original: Any) -> Any:
    """moto's `dynamo_to_dict` (DynamoDB answers turned into plain values) for the shapes answers are
    made of, with one type test per value instead of five `isinstance`/`hasattr` tests: strings,
    numbers, booleans and None as they are, `DynamoType` as `{type: value}`, dicts (an item's
    attributes) and lists rebuilt member by member. New containers throughout, as moto builds them:
    stored items are never shared with an answer. Anything else (dates, objects with `to_json`, binary
    values) takes moto's function."""
    import base64

    atoms = (str, int, float, bool, type(None))

    def plain(obj: Any) -> Any:
        kind = type(obj)
        if kind in atoms:
            return obj
        if kind is dynamo_type:
            if obj.type == "B":
                return {"B": obj.value if isinstance(obj.value, bytes) else base64.b64decode(obj.value)}
            if obj.type == "BS":
                return {"BS": [v if isinstance(v, bytes) else base64.b64decode(v) for v in obj.value]}
            return {obj.type: plain(obj.value)}
        if kind is dict or (kind is limited and not hasattr(obj, "to_json")):
            return {k: plain(v) for k, v in obj.items()}
        if kind is list:
            return [plain(v) for v in obj]
        return original(obj)

    return plain


class _PlainAnswers(MotoPatch):
    """`dynamo_to_dict` (see `_plain`), where DynamoDB answers call it (`DynamoResult`) and where it
    calls itself: a Query returning claims of ~500 pods walked ~1,500 values per claim through five
    type tests each."""

    replaces = (Internal("moto.dynamodb.models.utilities", "dynamo_to_dict", "80f600124c13ddcb"),
                Internal("moto.dynamodb.responses", "dynamo_to_dict", "80f600124c13ddcb"))
    relies_on = (Internal("moto.dynamodb.responses", "DynamoResult.__init__", "e2394775cd5ef6ad"),
                 Internal(_DYNAMO_TYPE, "LimitedSizeDict", "c956079ac9554f8b"))

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.dynamodb import responses
        from moto.dynamodb.models import utilities
        from moto.dynamodb.models.dynamo_type import DynamoType, LimitedSizeDict

        original = utilities.__dict__["dynamo_to_dict"]
        answered = responses.__dict__["dynamo_to_dict"]
        plain = _plain(DynamoType, LimitedSizeDict, original)
        utilities.dynamo_to_dict = plain  # type: ignore[attr-defined]
        responses.dynamo_to_dict = plain  # type: ignore[attr-defined]
        return [(utilities, "dynamo_to_dict", original), (responses, "dynamo_to_dict", answered)]


#: the types whose `cast_value` is the stored value itself (not a number, set, list, map or NULL)
_TEXT_TYPES = frozenset({"S", "B"})


class _DirectAttributeValues(MotoPatch):
    """`DynamoType` built, hashed and compared without the generic paths for the common shapes.

    Items are stored in dicts keyed by `DynamoType` hash and range keys, so every read and write of an
    item hashes and compares its keys, each time through `cast_value` (five type tests to find that a
    string is its own value); building a `DynamoType` from a one-entry dict lists its keys and values
    twice. The shortcuts compute the same: a string or binary value hashes as `(type, value)` and equals
    another of the same type when the values are equal (what `cast_value` gives for them); a one-entry
    dict becomes that entry, lists and maps wrapped member by member as moto wraps them. Anything else
    (numbers, sets, other classes, dicts of another size) takes moto's own code."""

    replaces = (Internal(_DYNAMO_TYPE, "DynamoType.__init__", "7c6cde92e1149bfe"),
                Internal(_DYNAMO_TYPE, "DynamoType.__hash__", "4d37bb816dede322"),
                Internal(_DYNAMO_TYPE, "DynamoType.__eq__", "48f12362c49f00c1"))
    #: what `cast_value` answers for strings and binary values, and the type tests `__init__` makes
    relies_on = (Internal(_DYNAMO_TYPE, "DynamoType.cast_value", "135da387dfcc7c1c"),
                 Internal(_DYNAMO_TYPE, "DynamoType.is_number", "1acd1246a6710316"),
                 Internal(_DYNAMO_TYPE, "DynamoType.is_set", "01b70f096bc58dfa"),
                 Internal(_DYNAMO_TYPE, "DynamoType.is_list", "9cc3570f1cb8448b"),
                 Internal(_DYNAMO_TYPE, "DynamoType.is_map", "6e6551375b6c2ac0"),
                 Internal(_DYNAMO_TYPE, "DynamoType.is_null", "3f276b83b6b24669"))

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.dynamodb.models.dynamo_type import DDBType, DynamoType

        constants = (DDBType.STRING, DDBType.BINARY, DDBType.LIST, DDBType.MAP, DDBType.NUMBER, DDBType.NULL)
        if constants != ("S", "B", "L", "M", "N", "NULL") or not _TEXT_TYPES.isdisjoint(
                {DDBType.STRING_SET, DDBType.NUMBER_SET, DDBType.BINARY_SET}):
            raise MotoInternalChanged(f"{cls.__name__}: moto's DDBType names changed")
        init, hashed, equal = (DynamoType.__dict__[n] for n in ("__init__", "__hash__", "__eq__"))

        def __init__(self: Any, type_as_dict: Any) -> None:
            if type(self) is not DynamoType or type(type_as_dict) is not dict or len(type_as_dict) != 1:
                init(self, type_as_dict)
                return
            (kind, value), = type_as_dict.items()
            self.type = kind
            if kind == "L":
                value = [DynamoType(v) for v in value]
            elif kind == "M":
                value = {k: DynamoType(v) for k, v in value.items()}
            self.value = value

        def __hash__(self: Any) -> int:
            kind = self.type
            if kind in _TEXT_TYPES and type(self) is DynamoType:
                return hash((kind, self.value))
            return int(hashed(self))

        def __eq__(self: Any, other: Any) -> bool:
            kind = self.type
            if kind in _TEXT_TYPES and type(self) is DynamoType and type(other) is DynamoType and other.type == kind:
                return bool(self.value == other.value)
            return bool(equal(self, other))

        DynamoType.__init__ = __init__  # type: ignore[method-assign]
        DynamoType.__hash__ = __hash__  # type: ignore[method-assign,assignment]
        DynamoType.__eq__ = __eq__  # type: ignore[method-assign,assignment]
        return [(DynamoType, "__init__", init), (DynamoType, "__hash__", hashed), (DynamoType, "__eq__", equal)]


#: the patches of this module, installed by every running `LocalAws` (`_MeasuredSizes` before
#: `_ItemsMeasuredOnce`, which measures through it)
PATCHES: tuple[type[MotoPatch], ...] = (_IndexedQueryKeys, _MeasuredSizes, _ItemsMeasuredOnce, _PlainAnswers,
                                        _DirectAttributeValues)
