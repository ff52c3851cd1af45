"""Index partitions kept between writes (`carpool.sim.localaws.moto_partitions`) answer index Queries exactly as
moto's scan of the table does, whatever wrote in between."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from carpool.sim.localaws import moto_partitions
from carpool.sim.localaws.motofast import faster_moto

from .conftest import create_dynamo_table


@pytest.fixture
def client() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("dynamodb", region_name="us-east-1")


def _seed(c: Any) -> None:
    create_dynamo_table(c, "s", gsi1=True)
    for i in range(12):
        c.put_item(TableName="s", Item={"pk": {"S": f"CLAIM#{i}"}, "sk": {"S": "-"}, "gsi1pk": {"S": "CLAIMS"},
                                        "gsi1sk": {"S": f"c{i % 5}"}, "instanceId": {"S": f"i-{i}"}})
        c.put_item(TableName="s", Item={"pk": {"S": f"POD#{i}"}, "sk": {"S": "NOMINATION"},
                                        "gsi1pk": {"S": "NOMINATIONS"}, "gsi1sk": {"S": f"p{i}"}})


def _index(c: Any, pk: str, **kw: Any) -> list[Any]:
    pages = c.get_paginator("query").paginate(TableName="s", IndexName="gsi1", KeyConditionExpression="gsi1pk = :p",
                                              ExpressionAttributeValues={":p": {"S": pk}, **kw.pop("values", {})}, **kw)
    return [page["Items"] for page in pages]


def _claim(i: int) -> dict[str, Any]:
    return {"pk": {"S": f"CLAIM#{i}"}, "sk": {"S": "-"}}


def _writes(c: Any) -> list[Callable[[], Any]]:
    """One of each way an item of the index can appear, change or go, and a failed transaction."""
    def failed_transaction() -> None:
        try:
            c.transact_write_items(TransactItems=[
                {"Put": {"TableName": "s", "Item": {**_claim(30), "gsi1pk": {"S": "CLAIMS"}, "gsi1sk": {"S": "x"}}}},
                {"Delete": {"TableName": "s", "Key": _claim(1)}},
                {"ConditionCheck": {"TableName": "s", "Key": _claim(2), "ConditionExpression": "attribute_not_exists(pk)"}},
            ])
        except ClientError as e:
            assert e.response["Error"]["Code"] == "TransactionCanceledException"

    return [
        lambda: c.put_item(TableName="s", Item={**_claim(20), "gsi1pk": {"S": "CLAIMS"}, "gsi1sk": {"S": "c9"}}),
        lambda: c.update_item(TableName="s", Key=_claim(3), UpdateExpression="SET gsi1pk = :p",
                              ExpressionAttributeValues={":p": {"S": "RETIRED"}}),
        lambda: c.update_item(TableName="s", Key=_claim(4), UpdateExpression="REMOVE gsi1pk"),
        lambda: c.delete_item(TableName="s", Key=_claim(5)),
        lambda: c.transact_write_items(TransactItems=[
            {"Update": {"TableName": "s", "Key": _claim(6), "UpdateExpression": "SET instanceId = :i",
                        "ExpressionAttributeValues": {":i": {"S": "i-new"}}}},
            {"Put": {"TableName": "s", "Item": {**_claim(21), "gsi1pk": {"S": "CLAIMS"}, "gsi1sk": {"S": "c0"}}}},
            {"Delete": {"TableName": "s", "Key": _claim(7)}},
        ]),
        failed_transaction,
        lambda: c.batch_write_item(RequestItems={"s": [
            {"PutRequest": {"Item": {**_claim(22), "gsi1pk": {"S": "CLAIMS"}, "gsi1sk": {"S": "c1"}}}},
            {"DeleteRequest": {"Key": _claim(8)}},
        ]}),
        lambda: c.execute_statement(Statement="UPDATE s SET gsi1pk='POOLS' WHERE pk='CLAIM#9' AND sk='-'"),
    ]


def _session(c: Any) -> list[Any]:
    """Index Queries before and after each write (and twice in a row, which a kept partition answers)."""
    _seed(c)
    seen = [_index(c, "CLAIMS"), _index(c, "CLAIMS")]
    for write in _writes(c):
        write()
        seen += [_index(c, "CLAIMS"), _index(c, "POOLS"), _index(c, "RETIRED"),
                 _index(c, "CLAIMS", FilterExpression="instanceId = :i", values={":i": {"S": "i-new"}}),
                 _index(c, "CLAIMS", PaginationConfig={"PageSize": 3})]
    c.delete_table(TableName="s")
    return seen


def test_index_queries_between_writes_answer_as_moto_does(client: Any) -> None:
    plain = _session(client)
    with faster_moto():
        fast = _session(client)
    assert fast == plain
    claims = [i["pk"]["S"] for page in fast[-5] for i in page]
    assert "CLAIM#20" in claims and "CLAIM#3" not in claims and "CLAIM#9" not in claims and "CLAIM#30" not in claims
    assert [i["pk"]["S"] for page in fast[-4] for i in page] == ["CLAIM#9"]


def test_a_run_of_reads_scans_the_table_once(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    builds: list[str] = []
    build = moto_partitions._build
    monkeypatch.setattr(moto_partitions, "_build", lambda name, items: builds.append(name) or build(name, items))
    _seed(client)
    with faster_moto():
        first = _index(client, "CLAIMS")
        for _ in range(3):
            assert _index(client, "CLAIMS") == first
        _index(client, "NOMINATIONS")
        client.get_item(TableName="s", Key=_claim(0))
        assert builds == ["gsi1pk"]
        client.put_item(TableName="s", Item={**_claim(40), "gsi1pk": {"S": "CLAIMS"}, "gsi1sk": {"S": "c"}})
        assert len(_index(client, "CLAIMS")[0]) == len(first[0]) + 1
        assert builds == ["gsi1pk", "gsi1pk"]


def test_writes_made_on_the_backend_directly_are_seen(client: Any) -> None:
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodb.models.dynamo_type import DynamoType

    _seed(client)
    backend = dynamodb_backends["123456789012"]["us-east-1"]
    with faster_moto():
        before = _index(client, "CLAIMS")[0]
        backend.put_item("s", {**_claim(50), "gsi1pk": {"S": "CLAIMS"}, "gsi1sk": {"S": "z"}})
        assert len(_index(client, "CLAIMS")[0]) == len(before) + 1
        backend.delete_item("s", {"pk": DynamoType({"S": "CLAIM#50"}), "sk": DynamoType({"S": "-"})})
        assert _index(client, "CLAIMS")[0] == before


def test_lookups_are_forgotten_when_the_speed_ups_end(client: Any) -> None:
    _seed(client)
    with faster_moto():
        _index(client, "CLAIMS")
        assert len(moto_partitions._lookups) == 1
    assert len(moto_partitions._lookups) == 0
    client.put_item(TableName="s", Item={**_claim(60), "gsi1pk": {"S": "CLAIMS"}, "gsi1sk": {"S": "z"}})
    with faster_moto():
        assert "CLAIM#60" in [i["pk"]["S"] for i in _index(client, "CLAIMS")[0]]
