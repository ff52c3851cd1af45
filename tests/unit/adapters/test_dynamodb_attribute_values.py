"""The state adapter writes items in DynamoDB's wire form itself (`attribute_value`): for every value it
must answer exactly what boto3's TypeSerializer answers (after `to_dynamo`), and refuse what it refuses."""

from __future__ import annotations

import decimal
from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.types import Binary, TypeSerializer
from hypothesis import given
from hypothesis import strategies as st

from carpool.adapters.aws.dynamodb.claims import claim_item
from carpool.adapters.aws.dynamodb.codec import attribute_value, serialize, to_dynamo, values
from carpool.state.models import Claim

_boto3 = TypeSerializer()
scalars = st.one_of(
    st.none(), st.booleans(), st.text(max_size=12), st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.decimals(allow_nan=False, allow_infinity=False, places=4, min_value=-(10**20), max_value=10**20),
)
documents = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@given(documents)
def test_every_json_document_is_written_as_boto3_writes_it(value: Any) -> None:
    assert attribute_value(value) == _boto3.serialize(to_dynamo(value))


@pytest.mark.parametrize("value", [
    {"a", "b"}, {1, 2}, b"raw", Binary(b"raw"), (1, "x"), {"nested": ({"s"}, [Decimal("1.50")])}, True, 0,
])
def test_other_types_follow_boto3s_rules(value: Any) -> None:
    assert attribute_value(value) == _boto3.serialize(to_dynamo(value))


@pytest.mark.parametrize("value", [Decimal("Infinity"), Decimal("NaN"), object()])
def test_what_boto3_refuses_is_refused(value: Any) -> None:
    with pytest.raises(TypeError):
        _boto3.serialize(to_dynamo(value))
    with pytest.raises(TypeError):
        attribute_value(value)


def test_a_number_beyond_dynamodbs_precision_is_refused_as_boto3_refuses_it() -> None:
    huge = 10**40 + 1
    with pytest.raises(decimal.Inexact):
        _boto3.serialize(huge)
    with pytest.raises(decimal.Inexact):
        attribute_value(huge)


def test_a_claim_item_and_expression_values_are_written_as_boto3_writes_them() -> None:
    from datetime import UTC, datetime

    claim = Claim(name="c1", nodepool="default", nodeclass="default", created_at=datetime(2026, 1, 1, tzinfo=UTC),
                  instance_types=["m5.large"], pods=["default/a", "default/b"], reserved={"cpu": 2000, "nodes": 1},
                  requested={"cpu": 1500}, labels={"team": "a"}, price=0.096)
    item = claim_item(claim)
    assert serialize(item) == {k: _boto3.serialize(to_dynamo(v)) for k, v in item.items() if v is not None}
    assert values(now=Decimal("12.5"), pool="p", n=None) == {
        ":now": {"N": "12.5"}, ":pool": {"S": "p"}, ":n": {"NULL": True}}
