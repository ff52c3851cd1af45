"""The simulation's moto speed-ups must not change what moto answers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from carpool.sim.localaws.motofast import faster_moto

from .conftest import create_dynamo_table

ITEMS = [
    {"pk": {"S": "CLAIM#a"}, "sk": {"S": "-"}, "n": {"N": "1.5"}, "ok": {"BOOL": True}, "none": {"NULL": True},
     "pods": {"L": [{"S": f"default/p{i}"} for i in range(50)]},
     "requested": {"M": {"cpu": {"N": "100"}, "nested": {"M": {"x": {"L": [{"N": "1"}]}}}}},
     "tags": {"SS": ["a", "b"]}, "nums": {"NS": ["1", "2"]}},
    {"pk": {"S": "CLAIM#b"}, "sk": {"S": "-"}, "blob": {"B": b"\x00\x01binary"}},
    {"pk": {"S": "CLAIM#c"}, "sk": {"S": "-"}, "list": {"L": [{"B": b"\x02"}, {"S": "x"}]}},
]


@pytest.fixture
def client() -> Iterator[Any]:
    with mock_aws():
        c = boto3.client("dynamodb", region_name="us-east-1")
        create_dynamo_table(c, "t")
        for item in ITEMS:
            c.put_item(TableName="t", Item=item)
        yield c


def _answers(c: Any) -> list[Any]:
    keys = [{"pk": i["pk"], "sk": i["sk"]} for i in ITEMS]
    answers = [
        c.scan(TableName="t")["Items"],
        c.batch_get_item(RequestItems={"t": {"Keys": keys}})["Responses"]["t"],
        *(c.get_item(TableName="t", Key=k)["Item"] for k in keys),
        c.query(TableName="t", KeyConditionExpression="pk = :p",
                ExpressionAttributeValues={":p": {"S": "CLAIM#a"}})["Items"],
    ]
    return sorted(answers[:2][0], key=str), sorted(answers[1], key=str), *answers[2:]  # type: ignore[return-value]


def test_items_in_answers_are_identical_with_and_without_the_speed_up(client: Any) -> None:
    plain = _answers(client)
    with faster_moto():
        fast = _answers(client)
    assert fast == plain
    assert fast[2]["pods"]["L"][49] == {"S": "default/p49"}
    assert fast[3]["blob"] == {"B": b"\x00\x01binary"}  # binary still base64-encoded and decoded


def test_the_patches_are_removed_when_the_block_ends() -> None:
    from moto.core import serialize

    original = serialize.BaseJSONSerializer._serialize_type_map
    with faster_moto():
        assert serialize.BaseJSONSerializer._serialize_type_map is not original
    assert serialize.BaseJSONSerializer._serialize_type_map is original


@pytest.fixture
def indexed() -> Iterator[Any]:
    """carpool's table layout in miniature: partitions, a gsi1 over some of them, other items without it."""
    with mock_aws():
        c = boto3.client("dynamodb", region_name="us-east-1")
        create_dynamo_table(c, "s", gsi1=True)
        for i in range(30):
            c.put_item(TableName="s", Item={"pk": {"S": "CAP"}, "sk": {"S": f"t{i:02}"}, "n": {"N": str(i)}})
            c.put_item(TableName="s", Item={"pk": {"S": f"CLAIM#{i}"}, "sk": {"S": "-"}, "gsi1pk": {"S": "CLAIMS"},
                                            "gsi1sk": {"S": f"c{i % 7}"}, "n": {"N": str(i)}})
            c.put_item(TableName="s", Item={"pk": {"S": f"POD#{i}"}, "sk": {"S": "NOMINATION"},
                                            "gsi1pk": {"S": "NOMINATIONS"}, "gsi1sk": {"S": f"p{i}"}})
        yield c


def _queries(c: Any) -> list[Any]:
    def every_page(**kw: Any) -> list[Any]:
        return [page["Items"] for page in c.get_paginator("query").paginate(TableName="s", **kw)]

    cap = {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "CAP"}}}
    claims = {"IndexName": "gsi1", "KeyConditionExpression": "gsi1pk = :p",
              "ExpressionAttributeValues": {":p": {"S": "CLAIMS"}}}
    return [
        every_page(**cap),
        every_page(**cap, ScanIndexForward=False, PaginationConfig={"PageSize": 7}),
        every_page(KeyConditionExpression="pk = :p AND sk BETWEEN :a AND :b",
                   ExpressionAttributeValues={":p": {"S": "CAP"}, ":a": {"S": "t05"}, ":b": {"S": "t12"}}),
        every_page(**claims),
        every_page(**claims, PaginationConfig={"PageSize": 4}),
        every_page(IndexName="gsi1", KeyConditionExpression="gsi1pk = :p AND gsi1sk = :s",
                   FilterExpression="n > :n",
                   ExpressionAttributeValues={":p": {"S": "CLAIMS"}, ":s": {"S": "c3"}, ":n": {"N": "5"}}),
        every_page(KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "NONE"}}),
        every_page(**claims, ProjectionExpression="pk, gsi1sk"),
        [page["Count"] for page in c.get_paginator("query").paginate(TableName="s", Select="COUNT", **claims)],
        sorted(c.scan(TableName="s")["Items"], key=str),  # the stored items, after the queries
    ]


def test_queries_answer_the_same_items_in_the_same_order(indexed: Any) -> None:
    plain = _queries(indexed)
    with faster_moto():
        fast = _queries(indexed)
    assert fast == plain
    assert len(fast[0][0]) == 30 and len(fast[1]) == 5 and sum(len(p) for p in fast[4]) == 30


def test_query_results_reach_the_answer_without_copies_of_the_stored_items(
        indexed: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.dynamodb.models.dynamo_type import Item

    copies: list[Any] = []
    original = Item.__deepcopy__
    monkeypatch.setattr(Item, "__deepcopy__", lambda self, memo: copies.append(self) or original(self, memo))
    query = {"TableName": "s", "IndexName": "gsi1", "KeyConditionExpression": "gsi1pk = :p",
             "ExpressionAttributeValues": {":p": {"S": "CLAIMS"}}}
    plain = indexed.query(**query)["Items"]
    assert len(copies) == 30
    copies.clear()
    with faster_moto():
        assert indexed.query(**query)["Items"] == plain
    assert copies == []
