"""Python values <-> DynamoDB attribute values, for every item carpool stores.

One module so that every item is written by the same rules: times as exact epoch seconds (a float would
round), TTLs rounded up (so DynamoDB never deletes early), floats as the Decimal they print as, and
numbers read back as int when integral. `attribute_value` builds the plain JSON types directly, as boto3's
`TypeSerializer` would, because the serializer was a third of the client's time for a burst's
transactions; anything else goes through boto3's own rules, so the bytes sent are boto3's either way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import DYNAMODB_CONTEXT, TypeDeserializer, TypeSerializer

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def utc(dt: datetime) -> datetime:
    """Naive datetimes are taken as UTC (the app injects aware ones; tests sometimes do not)."""
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)


def epoch(dt: datetime) -> Decimal:
    """Exact epoch seconds (microsecond precision) as a DynamoDB number; float would round."""
    micros = (utc(dt) - _EPOCH) // timedelta(microseconds=1)
    return Decimal(micros) / Decimal(1_000_000)


def from_epoch(value: Decimal | int | float) -> datetime:
    return _EPOCH + timedelta(microseconds=int(Decimal(value) * 1_000_000))


def ttl_epoch(dt: datetime) -> int:
    """Whole epoch seconds for DynamoDB's TTL attribute, rounded up so TTL never deletes early."""
    return math.ceil(epoch(dt))


def to_dynamo(value: Any) -> Any:
    """Python value -> something TypeSerializer accepts (floats become Decimals, exactly as printed)."""
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, Mapping):
        return {str(k): to_dynamo(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_dynamo(v) for v in value]
    return value


def from_dynamo(value: Any) -> Any:
    """Deserialized value -> plain Python (Decimals become int when integral, else float)."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, Mapping):
        return {k: from_dynamo(v) for k, v in value.items()}
    if isinstance(value, list | set | tuple):
        return [from_dynamo(v) for v in value]
    return value


def attribute_value(value: Any) -> dict[str, Any]:
    """`TypeSerializer().serialize(to_dynamo(value))`, the same answer for every value, with the plain JSON
    types (what a claim or a nomination is made of) built directly: boto3's serializer tries each type in
    turn for every value, which was a third of the client's time for a batch's 1,400 transaction items.
    Anything else (sets, bytes, str subclasses...) goes through boto3's own rules."""
    kind = type(value)
    if kind is str:
        return {"S": value}
    if kind is bool:
        return {"BOOL": value}
    if kind is int or kind is Decimal:
        return {"N": _number(value)}
    if kind is float:
        return {"N": _number(Decimal(repr(value)))}
    if kind is dict:
        return {"M": {str(k): attribute_value(v) for k, v in value.items()}}
    if kind is list or kind is tuple:
        return {"L": [attribute_value(v) for v in value]}
    if value is None:
        return {"NULL": True}
    return dict(_serializer.serialize(to_dynamo(value)))


def _number(value: int | Decimal) -> str:
    """A DynamoDB number as boto3 writes it (its 38-digit context; infinities and NaN refused)."""
    text = str(DYNAMODB_CONTEXT.create_decimal(value))
    if text in ("Infinity", "NaN"):
        raise TypeError("Infinity and NaN not supported")
    return text


def serialize(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: attribute_value(v) for k, v in item.items() if v is not None}


def deserialize(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _deserializer.deserialize(v) for k, v in item.items()}


def values(**kv: Any) -> dict[str, Any]:
    """ExpressionAttributeValues from keyword arguments (`values(now=...)` -> `{":now": {...}}`)."""
    return {f":{k}": attribute_value(v) for k, v in kv.items()}
