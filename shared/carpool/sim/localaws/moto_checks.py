"""Cheaper request checks of local DynamoDB, with the same outcomes.

moto checks each item of a write for empty key values, and each batch for duplicate keys, in ways
written for a handful of items: a 100-item TransactWriteItems lists the table's key attributes 100
times to look for empty strings no item has, and a 100-key BatchGetItem compares every key with every
key before it (4,950 comparisons of nested dicts). These patches reach moto's answer (and raise moto's
own error, from moto's own code) without that work:

- an item none of whose attributes is an empty string or binary value cannot fail moto's empty-key
  check, which only looks at such attributes; any other item, or anything not in plain wire form, takes
  moto's check;
- keys in wire form (maps of text to AttributeValues of text, booleans, lists and maps) are equal
  exactly when their (name, type, text) triples are (members holding one text each) or else their JSON
  texts with sorted member names are, so duplicates are found through a set of those; anything else
  takes moto's comparison.
"""

from __future__ import annotations

import json
from typing import Any

from carpool.sim.localaws.moto_patches import Internal, MotoPatch, Replaced

_RESPONSES = "moto.dynamodb.responses"
#: one encoder for every key (`json.dumps` with `sort_keys` builds a new encoder per call)
_KEYS = json.JSONEncoder(sort_keys=True)
#: wire-form AttributeValue types whose value is text (`B` is bytes once parsed: left to moto)
_TEXT_TYPES = frozenset({"S", "N"})
_EMPTY_CHECKED = ("S", "B")


def _may_have_empty_value(field_updates: Any) -> bool:
    """Whether moto's empty-key check could find (or fail on) something: an attribute that is not a
    one-member map, or one holding an empty string or binary value."""
    if type(field_updates) is not dict:
        return True
    for value in field_updates.values():
        if type(value) is not dict or len(value) != 1:
            return True
        (kind, inner), = value.items()
        if kind in _EMPTY_CHECKED and inner == "":
            return True
    return False


class EmptyKeysChecked(MotoPatch):
    """`validate_put_has_empty_keys` runs only for items that could fail it (see the module)."""

    replaces = (Internal(_RESPONSES, "validate_put_has_empty_keys", "e45d7ced392361f4"),)

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.dynamodb import responses

        original = responses.__dict__["validate_put_has_empty_keys"]

        def validate_put_has_empty_keys(field_updates: Any, table: Any, custom_error_msg: str | None = None) -> None:
            if _may_have_empty_value(field_updates):
                original(field_updates, table, custom_error_msg)

        responses.validate_put_has_empty_keys = validate_put_has_empty_keys  # type: ignore[attr-defined]
        return [(responses, "validate_put_has_empty_keys", original)]


def _wire_form(value: Any) -> bool:
    """An AttributeValue of text, booleans, lists and maps of those, in wire form."""
    if type(value) is not dict or len(value) != 1:
        return False
    (kind, inner), = value.items()
    if kind in _TEXT_TYPES:
        return type(inner) is str
    if kind == "BOOL" or kind == "NULL":
        return type(inner) is bool
    if kind == "L":
        return type(inner) is list and all(_wire_form(v) for v in inner)
    if kind == "M":
        return type(inner) is dict and all(type(k) is str and _wire_form(v) for k, v in inner.items())
    if kind == "SS" or kind == "NS":
        return type(inner) is list and all(type(v) is str for v in inner)
    return False


def _canonical(key: Any) -> tuple[str, Any] | None:
    """A value equal for equal keys only, tagged by its form (a text key never equals a map); None when
    not plain. A map whose members each hold one text (`{"pk": {"S": "POD#a"}}`, every key of carpool's
    tables) is the set of its (name, type, text) triples: names are unique, so the sets are equal exactly
    when the maps are. Other wire-form maps are their JSON texts with sorted member names."""
    if type(key) is str:
        return ("text", key)
    if type(key) is not dict:
        return None
    triples = []
    for name, value in key.items():
        if type(value) is not dict or len(value) != 1:
            break
        (kind, inner), = value.items()
        if type(name) is not str or type(kind) is not str or type(inner) is not str:
            break
        triples.append((name, kind, inner))
    else:
        return ("flat", frozenset(triples))
    if all(type(name) is str and _wire_form(v) for name, v in key.items()):
        return ("map", _KEYS.encode(key))
    return None


class DuplicateKeysHashed(MotoPatch):
    """`DynamoHandler._contains_duplicates` through a set of canonical texts (see the module)."""

    replaces = (Internal(_RESPONSES, "DynamoHandler._contains_duplicates", "a273c7e0abe7ae03"),)

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.dynamodb import responses

        handler = responses.DynamoHandler
        original = handler.__dict__["_contains_duplicates"]

        def _contains_duplicates(self: Any, keys: list[Any]) -> bool:
            seen: set[tuple[str, Any]] = set()
            for key in keys:
                text = _canonical(key)
                if text is None:
                    return bool(original(self, keys))
                if text in seen:
                    return True
                seen.add(text)
            return False

        handler._contains_duplicates = _contains_duplicates  # type: ignore[method-assign]
        return [(handler, "_contains_duplicates", original)]
