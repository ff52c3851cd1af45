"""LocalAws's journaled DynamoDB transactions answer and store exactly what moto does."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from carpool.sim.localaws.server import _JournaledTransactions

from .conftest import create_dynamo_table


@contextmanager
def journaled() -> Iterator[None]:
    _JournaledTransactions.install()
    try:
        yield
    finally:
        _JournaledTransactions.uninstall()


@pytest.fixture
def table() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_dynamo_table(client, "t")
        for i in range(3):
            client.put_item(TableName="t", Item={"pk": {"S": f"p{i}"}, "sk": {"S": "x"}, "n": {"N": str(i)}})
        yield client


def _items(client: Any) -> dict[str, dict[str, Any]]:
    return {i["pk"]["S"]: i for i in client.scan(TableName="t")["Items"]}


def _failing_transaction() -> list[dict[str, Any]]:
    """Writes three items, then a condition fails: the three writes must be undone."""
    return [
        {"Put": {"TableName": "t", "Item": {"pk": {"S": "new"}, "sk": {"S": "x"}}}},
        {"Update": {"TableName": "t", "Key": {"pk": {"S": "p0"}, "sk": {"S": "x"}},
                    "UpdateExpression": "SET n = :n", "ExpressionAttributeValues": {":n": {"N": "99"}}}},
        {"Delete": {"TableName": "t", "Key": {"pk": {"S": "p1"}, "sk": {"S": "x"}}}},
        {"ConditionCheck": {"TableName": "t", "Key": {"pk": {"S": "p2"}, "sk": {"S": "x"}},
                            "ConditionExpression": "n = :n", "ExpressionAttributeValues": {":n": {"N": "7"}}}},
    ]


@pytest.mark.parametrize("fast", [False, True], ids=["moto", "journaled"])
def test_a_cancelled_transaction_leaves_every_item_as_it_was(table: Any, fast: bool) -> None:
    before = _items(table)
    with journaled() if fast else nullcontext(), pytest.raises(ClientError) as err:
        table.transact_write_items(TransactItems=_failing_transaction())
    assert err.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert _items(table) == before


def test_a_successful_transaction_is_applied(table: Any) -> None:
    with journaled():
        table.transact_write_items(TransactItems=_failing_transaction()[:3])
    after = _items(table)
    assert set(after) == {"new", "p0", "p2"}
    assert after["p0"]["n"] == {"N": "99"}


def test_the_patch_is_removed_when_the_block_ends(table: Any) -> None:
    from moto.dynamodb import models

    original = models.DynamoDBBackend.transact_write_items
    with journaled():
        assert models.DynamoDBBackend.transact_write_items is not original
    assert models.DynamoDBBackend.transact_write_items is original
    assert models.copy.deepcopy is __import__("copy").deepcopy

