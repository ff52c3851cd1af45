"""Local DynamoDB's cheaper request checks (`carpool.sim.localaws.moto_checks`) reach moto's own outcomes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from carpool.sim.localaws import moto_checks
from carpool.sim.localaws.motofast import faster_moto

from .conftest import create_dynamo_table

S = {"S": "x"}
#: keys lists: plain, duplicated in different member orders, nested, binary, texts (BatchWriteItem's JSON)
KEY_LISTS: list[list[Any]] = [
    [],
    [{"pk": S, "sk": {"S": "a"}}, {"pk": S, "sk": {"S": "b"}}],
    [{"pk": S, "sk": {"S": "a"}}, {"sk": {"S": "a"}, "pk": S}],
    [{"pk": {"N": "1"}}, {"pk": {"N": "1.0"}}],
    [{"pk": {"M": {"a": {"L": [S, {"BOOL": True}]}}}}, {"pk": {"M": {"a": {"L": [S, {"BOOL": True}]}}}}],
    [{"pk": {"M": {"a": {"L": [S, {"BOOL": True}]}}}}, {"pk": {"M": {"a": {"L": [{"BOOL": True}, S]}}}}],
    [{"pk": {"BOOL": True}}, {"pk": {"BOOL": 1}}],
    [{"pk": {"B": b"\x00"}}, {"pk": {"B": b"\x00"}}],
    [{"pk": {"B": b"\x00"}}, {"pk": {"B": b"\x01"}}],
    ['{"pk": {"S": "x"}}', '{"pk": {"S": "x"}}', "other"],
    ['{"pk": {"S": "x"}}', {"pk": S}],
    [{"pk": {"SS": ["a", "b"]}}, {"pk": {"SS": ["b", "a"]}}],
    [{"pk": {"S": "é"}}, {"pk": {"S": "\u00e9"}}],
    [{"pk": {"S": "1"}}, {"pk": {"N": "1"}}],
    [{"pk": S, "sk": {"S": "a"}}, {"pk": S}, {"pk": S, "sk": {"S": "a"}, "x": S}],
    [{"pk": S, "sk": {"L": [S]}}, {"sk": {"L": [S]}, "pk": S}],
    [{"pk": S, "sk": {"L": [S]}}, {"pk": S, "sk": {"S": "x"}}],
    [{"pk": {"S": "a", "N": "1"}}, {"pk": {"N": "1", "S": "a"}}],
]


@pytest.mark.parametrize("keys", KEY_LISTS)
def test_duplicates_are_found_as_moto_finds_them(keys: list[Any]) -> None:
    from moto.dynamodb.responses import DynamoHandler

    plain = DynamoHandler._contains_duplicates(None, keys)  # type: ignore[arg-type]
    with faster_moto():
        assert moto_checks.DuplicateKeysHashed.installed()
        assert DynamoHandler._contains_duplicates(None, keys) == plain  # type: ignore[arg-type]


FIELDS: list[Any] = [
    {"pk": S, "sk": S, "gsi1pk": S},
    {"pk": {"S": ""}, "sk": S},
    {"pk": S, "sk": S, "gsi1pk": {"S": ""}},
    {"pk": S, "sk": S, "other": {"S": ""}},
    {"pk": S, "sk": {"B": ""}},
    {"pk": S, "sk": {"B": b""}},
    {"pk": S, "sk": {}},
    {"pk": S, "sk": "text"},
    {"pk": S, "sk": {"S": "", "N": "1"}},
    {"pk": S, "n": {"N": ""}},
]


@pytest.fixture
def table() -> Iterator[Any]:
    from moto.dynamodb.models import dynamodb_backends

    with mock_aws():
        create_dynamo_table(boto3.client("dynamodb", region_name="us-east-1"), "s", gsi1=True)
        yield dynamodb_backends["123456789012"]["us-east-1"].get_table("s")


def _outcome(check: Any, fields: Any, table: Any, message: str | None) -> Any:
    try:
        check(fields, table, message)
    except Exception as e:  # noqa: BLE001  # the error itself is the outcome compared
        return type(e).__name__, str(e)
    return None


@pytest.mark.parametrize("fields", FIELDS)
@pytest.mark.parametrize("message", [None, "Key: {}"])
def test_empty_keys_are_reported_as_moto_reports_them(fields: Any, message: str | None, table: Any) -> None:
    from moto.dynamodb import responses

    plain = _outcome(responses.validate_put_has_empty_keys, fields, table, message)
    with faster_moto():
        assert moto_checks.EmptyKeysChecked.installed()
        assert _outcome(responses.validate_put_has_empty_keys, fields, table, message) == plain
    assert _outcome(responses.validate_put_has_empty_keys, fields, None, message) is None


def _requests(c: Any) -> list[Any]:
    """What clients see: rejected empty keys and duplicates, accepted writes."""
    seen: list[Any] = []

    def call(f: Any, **kw: Any) -> None:
        try:
            seen.append(f(**kw).get("Responses"))
        except ClientError as e:
            seen.append(e.response["Error"])

    key = {"pk": S, "sk": S}
    call(c.transact_write_items, TransactItems=[{"Put": {"TableName": "s", "Item": {**key, "gsi1pk": {"S": ""}}}}])
    call(c.transact_write_items, TransactItems=[{"Put": {"TableName": "s", "Item": {"pk": {"S": ""}, "sk": S}}}])
    call(c.transact_write_items, TransactItems=[{"Put": {"TableName": "s", "Item": {**key, "n": {"S": ""}}}}])
    call(c.put_item, TableName="s", Item={"pk": S, "sk": {"S": ""}})
    call(c.batch_get_item, RequestItems={"s": {"Keys": [key, {"sk": S, "pk": S}]}})
    call(c.batch_get_item, RequestItems={"s": {"Keys": [key, {"pk": S, "sk": {"S": "y"}}]}})
    call(c.batch_write_item, RequestItems={"s": [{"PutRequest": {"Item": key}}, {"PutRequest": {"Item": key}}]})
    return seen


def test_requests_are_answered_as_moto_answers_them() -> None:
    with mock_aws():
        c = boto3.client("dynamodb", region_name="us-east-1")
        create_dynamo_table(c, "s", gsi1=True)
        plain = _requests(c)
        with faster_moto():
            fast = _requests(c)
    assert fast == plain
    assert [s.get("Code") if isinstance(s, dict) else s for s in fast[:2]] == ["ValidationException"] * 2
    assert "duplicates" in fast[4]["Message"]
