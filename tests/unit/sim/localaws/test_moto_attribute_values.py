"""Attribute values built, hashed and compared by the shortcuts are what moto's own code makes of them
(`carpool.sim.localaws.moto_linear._DirectAttributeValues`)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto.dynamodb.models.dynamo_type import DynamoType

from carpool.sim.localaws.moto_linear import _DirectAttributeValues
from carpool.sim.localaws.moto_patches import installed

VALUES: list[Any] = [
    {"S": "a"}, {"S": ""}, {"S": "é✓"}, {"B": b"\x00\x01"}, {"B": "AAE="}, {"N": "1"}, {"N": "1.0"}, {"N": "-0"},
    {"BOOL": True}, {"BOOL": False}, {"NULL": True}, {"SS": ["a", "b"]}, {"NS": ["1", "2"]}, {"BS": [b"\x00"]},
    {"L": [{"S": "a"}, {"N": "2"}, {"L": [{"S": "x"}]}]}, {"L": []},
    {"M": {"a": {"S": "x"}, "b": {"M": {"c": {"N": "3"}}}, "d": {"L": [{"M": {}}]}}}, {"M": {}},
    {"S": "a", "N": "1"},  # more than one entry: moto takes the first
]


@pytest.fixture(autouse=True)
def unpatched() -> None:
    if _DirectAttributeValues.installed():
        pytest.skip("held by a running LocalAws")


def _shape(value: Any) -> Any:
    """A DynamoType as nested plain data, classes included (what moto stores)."""
    if isinstance(value, DynamoType):
        return (type(value).__name__, value.type, _shape(value.value), list(vars(value)))
    if isinstance(value, list):
        return [_shape(v) for v in value]
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    return value


def _facts() -> list[Any]:
    built = [DynamoType(dict(v)) for v in VALUES] + [DynamoType(DynamoType(dict(v))) for v in VALUES]
    facts: list[Any] = [_shape(b) for b in built]
    facts += [hash(b) for b in built if b.type not in ("SS", "NS", "BS", "L", "M")]  # unhashable in moto too
    facts += [[a == b for b in built] for a in built]
    facts += [[a != b for b in built] for a in built]
    return facts


def test_values_are_built_hashed_and_compared_as_moto_does() -> None:
    original = _facts()
    with installed(_DirectAttributeValues):
        patched = _facts()
    assert patched == original
    assert DynamoType({"N": "1"}) == DynamoType({"N": "1.0"})  # through moto's own comparison of numbers
    assert DynamoType({"S": "1"}) != DynamoType({"N": "1"})


def test_unhashable_values_stay_unhashable() -> None:
    with installed(_DirectAttributeValues):
        with pytest.raises(TypeError):
            hash(DynamoType({"L": [{"S": "a"}]}))
        assert DynamoType({"N": "1.50"}).cast_value == Decimal("1.5")


@pytest.fixture
def ddb(moto_in_process: None) -> Any:
    return boto3.client("dynamodb", region_name="us-east-1")


def _session(ddb: Any, table: str) -> list[Any]:
    """Writes, conditional writes, a transaction and reads, each answer (or refusal) kept."""
    ddb.create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[{"AttributeName": a, "AttributeType": t}
                                           for a, t in (("pk", "S"), ("sk", "N"), ("g", "S"))],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                     GlobalSecondaryIndexes=[{"IndexName": "gsi", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                                              "Projection": {"ProjectionType": "ALL"}}])
    answers: list[Any] = []

    def keep(call: Any, **kwargs: Any) -> None:
        try:
            whole = "TransactItems" in kwargs or "RequestItems" in kwargs  # name their tables themselves
            answer = call(**kwargs) if whole else call(TableName=table, **kwargs)
            answer.pop("ResponseMetadata", None)
            answers.append(answer)
        except ClientError as e:
            answers.append(e.response["Error"])

    for i in range(6):
        keep(ddb.put_item, Item={"pk": {"S": f"p{i % 2}"}, "sk": {"N": str(i)}, "g": {"S": "all"},
                                 "v": {"M": {"n": {"N": f"{i}.0"}, "l": {"L": [{"S": "x"}, {"B": b"\x01"}]}}}})
    keep(ddb.put_item, Item={"pk": {"S": "p0"}, "sk": {"N": "0"}}, ConditionExpression="attribute_not_exists(pk)")
    keep(ddb.get_item, Key={"pk": {"S": "p1"}, "sk": {"N": "1.0"}})
    keep(ddb.update_item, Key={"pk": {"S": "p1"}, "sk": {"N": "3"}}, UpdateExpression="SET v.n = :n",
         ConditionExpression="g = :g", ExpressionAttributeValues={":n": {"N": "7"}, ":g": {"S": "all"}},
         ReturnValues="ALL_NEW")
    keep(ddb.transact_write_items, TransactItems=[
        {"Put": {"TableName": table, "Item": {"pk": {"S": "p2"}, "sk": {"N": "1"}, "g": {"S": "all"}},
                 "ConditionExpression": "attribute_not_exists(pk)"}},
        {"Update": {"TableName": table, "Key": {"pk": {"S": "p0"}, "sk": {"N": "2"}},
                    "UpdateExpression": "SET g = :g", "ExpressionAttributeValues": {":g": {"S": "other"}}}}])
    keep(ddb.transact_write_items, TransactItems=[
        {"Put": {"TableName": table, "Item": {"pk": {"S": "p2"}, "sk": {"N": "1"}},
                 "ConditionExpression": "attribute_not_exists(pk)"}}])
    keep(ddb.query, KeyConditionExpression="pk = :p AND sk BETWEEN :a AND :b",
         ExpressionAttributeValues={":p": {"S": "p0"}, ":a": {"N": "0"}, ":b": {"N": "4"}})
    keep(ddb.query, IndexName="gsi", KeyConditionExpression="g = :g", ExpressionAttributeValues={":g": {"S": "all"}})
    keep(ddb.batch_get_item, RequestItems={table: {"Keys": [{"pk": {"S": "p1"}, "sk": {"N": "5"}},
                                                            {"pk": {"S": "p9"}, "sk": {"N": "5"}}]}})
    keep(ddb.scan, FilterExpression="v.n > :n", ExpressionAttributeValues={":n": {"N": "2"}})
    ddb.delete_table(TableName=table)
    return answers


def test_dynamodb_answers_as_moto_does(ddb: Any) -> None:
    original = _session(ddb, "t")
    with installed(_DirectAttributeValues):
        patched = _session(ddb, "t")
    assert patched == original
    assert any("ConditionalCheckFailed" in str(a) or "TransactionCanceled" in str(a) for a in original)
