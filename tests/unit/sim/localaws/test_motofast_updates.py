"""Update expressions parsed once per distinct text must update items exactly as moto's own parse does,
and invalid expressions must fail exactly as they do in moto."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.dynamodb.parsing import tokens
from moto.dynamodb.parsing.ast_nodes import Node  # type: ignore[attr-defined]
from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]

from carpool.sim.localaws.motofast import faster_moto

from .conftest import create_dynamo_table

NAMES = {"#until": "until", "#ttl": "expiresAt", "#claim": "claim", "#pods": "pods"}


@pytest.fixture
def fresh() -> Iterator[Callable[[], Any]]:
    """A new in-process moto with one table per call (the plain and the memoised run start alike)."""
    mocks: list[Any] = []

    def make() -> Any:
        while mocks:
            mocks.pop().stop()
        mock = mock_aws()
        mock.start()
        mocks.append(mock)
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_dynamo_table(client, "t")
        for i in range(6):
            client.put_item(TableName="t", Item={"pk": {"S": f"NOM#p{i}"}, "sk": {"S": "NOM"},
                                                 "claim": {"S": f"c{i % 2}"}, "until": {"N": "2000000000"},
                                                 "pods": {"L": [{"S": "a"}]}, "gone": {"S": "x"}})
        return client

    yield make
    for mock in reversed(mocks):
        mock.stop()


def _updates(c: Any) -> list[Any]:
    """carpool's nomination updates (one expression, values differing per item) and other update forms,
    through UpdateItem and TransactWriteItems; answers and the stored table."""
    answers: list[Any] = []
    for i in range(4):  # same text, other values: the memo must not carry one item's values to the next
        answers.append(c.update_item(
            TableName="t", Key={"pk": {"S": f"NOM#p{i}"}, "sk": {"S": "NOM"}},
            UpdateExpression="SET #until = :until, #ttl = :ttl REMOVE gone", ConditionExpression="#claim = :claim",
            ExpressionAttributeNames={k: NAMES[k] for k in ("#until", "#ttl", "#claim")},
            ExpressionAttributeValues={":until": {"N": str(1900000000 + i)}, ":ttl": {"N": str(1900000600 + i)},
                                       ":claim": {"S": f"c{i % 2}"}},
            ReturnValues="ALL_NEW")["Attributes"])
    answers.append(c.update_item(
        TableName="t", Key={"pk": {"S": "NOM#new"}, "sk": {"S": "NOM"}},
        UpdateExpression="SET #pods = list_append(if_not_exists(#pods, :empty), :p) ADD n :one",
        ExpressionAttributeNames={"#pods": "pods"},
        ExpressionAttributeValues={":empty": {"L": []}, ":p": {"L": [{"S": "b"}]}, ":one": {"N": "1"}},
        ReturnValues="UPDATED_NEW")["Attributes"])
    for c_ in range(2):
        c.transact_write_items(TransactItems=[{"Update": {
            "TableName": "t", "Key": {"pk": {"S": f"NOM#p{i}"}, "sk": {"S": "NOM"}},
            "UpdateExpression": "SET #until = :until, #ttl = :ttl, #pods = list_append(#pods, :p)",
            "ConditionExpression": "#claim = :claim AND #until > :until",
            "ExpressionAttributeNames": NAMES,
            "ExpressionAttributeValues": {":claim": {"S": f"c{i % 2}"}, ":until": {"N": str(1800000000 + c_)},
                                          ":ttl": {"N": str(1800000600 + i)}, ":p": {"L": [{"S": f"t{c_}"}]}}}}
            for i in range(c_, 6, 2)])
    answers.append(sorted(c.scan(TableName="t")["Items"], key=lambda item: item["pk"]["S"]))
    return answers


def test_memoised_updates_store_the_same_items_as_moto(fresh: Callable[[], Any]) -> None:
    plain = _updates(fresh())
    with faster_moto():
        fast = _updates(fresh())
    assert fast == plain
    stored = {item["pk"]["S"]: item for item in fast[-1]}
    assert stored["NOM#p1"]["until"] == {"N": "1800000001"} and "gone" not in stored["NOM#p1"]
    assert stored["NOM#p5"]["pods"] == {"L": [{"S": "a"}, {"S": "t1"}]}
    assert stored["NOM#new"]["pods"] == {"L": [{"S": "b"}]}


def test_each_distinct_update_text_is_parsed_once(fresh: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> None:
    client = fresh()
    tokenized: list[str] = []
    make_list = tokens.ExpressionTokenizer.make_list

    def counting(text: str) -> Any:
        tokenized.append(text)
        return make_list(text)

    monkeypatch.setattr(tokens.ExpressionTokenizer, "make_list", staticmethod(counting))
    with faster_moto():
        _updates(client)
    updates = [t for t in tokenized if t.lstrip().upper().startswith(("SET", "ADD", "REMOVE"))]
    assert len(updates) == len(set(updates)) == 3  # moto alone parses each Update twice: 2 * (4 + 1 + 6)


def _shape(node: Any) -> Any:
    if isinstance(node, Node):
        return node.type, [_shape(child) for child in node.children or []]
    return repr(node)


def test_the_shared_tree_is_not_changed_by_the_updates_that_use_it(fresh: Callable[[], Any]) -> None:
    client = fresh()
    text = "SET #until = :until, #ttl = :ttl, #pods = list_append(#pods, :p)"
    with faster_moto():
        tree = UpdateExpressionParser.make(text)
        before = _shape(tree)
        _updates(client)
        assert UpdateExpressionParser.make(text) is tree
    assert _shape(tree) == before == _shape(UpdateExpressionParser.make(text))


INVALID = [
    "SET",
    "SET #until = ",
    "SET #until = :until,",
    "SET #until = :until REMOVE",
    "DELETE #until",
    "SET #until = :until SET #ttl = :ttl",
    "SET #until = :until, #until = :ttl",
    "SET #until = :nope",
    "SET #unknown = :until",
]


def _error(call: Callable[[], Any]) -> tuple[str, str]:
    with pytest.raises(ClientError) as raised:
        call()
    return raised.value.response["Error"]["Code"], raised.value.response["Error"]["Message"]


def _failures(c: Any) -> list[tuple[str, str]]:
    found = []
    for text in INVALID:
        update = {"Key": {"pk": {"S": "NOM#p0"}, "sk": {"S": "NOM"}}, "UpdateExpression": text,
                  "ExpressionAttributeNames": {"#until": "until", "#ttl": "ttl"},
                  "ExpressionAttributeValues": {":until": {"N": "1"}, ":ttl": {"N": "2"}}}

        def single(u: dict[str, Any] = update) -> Any:
            return c.update_item(TableName="t", **u)

        def transacted(u: dict[str, Any] = update) -> Any:
            return c.transact_write_items(TransactItems=[{"Update": {"TableName": "t", **u}}])

        for _ in range(2):  # a failure is not remembered: the second attempt fails the same way
            found += [_error(single), _error(transacted)]
    return found


def test_invalid_update_expressions_fail_as_in_moto(fresh: Callable[[], Any]) -> None:
    plain = _failures(fresh())
    with faster_moto():
        fast = _failures(fresh())
    assert fast == plain
    assert all(code in ("ValidationException", "TransactionCanceledException") for code, _ in fast)
    assert any("Invalid UpdateExpression" in message for _, message in fast)


def test_condition_parsers_of_equal_inputs_hand_out_their_own_names() -> None:
    """moto's TransactWriteItems extends a condition parser's names with the update expression's: one
    request must not leak its names into the next request's check for unused names."""
    from moto.dynamodb import responses

    args = ("#claim = :claim", {"#claim": "claim", "#ttl": "ttl"}, {":claim": {"S": "c"}})
    with faster_moto():
        first = responses.create_condition_expression_parser(*args)
        first.parse()
        first.expr_attr_names_found += ["#ttl"]
        second = responses.create_condition_expression_parser(*args)
        second.parse()
    assert second.expr_attr_names_found == ["#claim"]


def test_expression_keys_are_equal_only_for_equal_inputs() -> None:
    from carpool.sim.localaws.motofast import _expression_key

    now = {":now": {"N": "1732480000"}}
    text = "attribute_not_exists(pk) OR #until <= :now"
    same = [_expression_key(text, {"#until": "until"}, dict(now)),
            _expression_key(text, {"#until": "until"}, {":now": {"N": "1732480000"}})]
    different = [
        _expression_key(text, {"#until": "until"}, {":now": {"N": "1732480001"}}),
        _expression_key(text, {"#until": "until"}, {":now": {"S": "1732480000"}}),
        _expression_key(text, {"#until": "until"}, None),
        _expression_key(text, {"#until": "until"}, {}),
        _expression_key(text, None, now),
        _expression_key(text, {}, now),
        _expression_key(text + " ", {"#until": "until"}, now),
        _expression_key(text, {"#until": "untiL"}, now),
        # not one-level text: keyed by the JSON text instead, still apart from the rest
        _expression_key(text, {"#until": "until"}, {":now": {"L": [{"N": "1732480000"}]}}),
        _expression_key(text, {"#until": "until"}, {":now": {"BOOL": True}}),
        _expression_key(text, {"#until": "until"}, {":now": {"BOOL": 1}}),
    ]
    assert same[0] == same[1] and isinstance(same[0], tuple)
    assert all(k is not None for k in different)
    assert len({same[0], *different}) == 1 + len(different)
    # the order names and values were written in does not matter
    assert _expression_key(text, {"#a": "a", "#b": "b"}, None) == _expression_key(text, {"#b": "b", "#a": "a"}, None)
    assert _expression_key(text, None, {":b": {"B": b"\x00"}}) is None  # binary: not worth a key
