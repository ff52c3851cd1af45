"""A nomination's Put is built from parts converted once per transaction (`Nominations`): every Put must
be exactly, byte for byte on the wire, the one written pod by pod with boto3's TypeSerializer."""

from __future__ import annotations

import json
import math
from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.types import TypeSerializer

from carpool.adapters.aws.dynamodb.nominations import Nominations

_boto3 = TypeSerializer()
NOW = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
UNTIL = NOW + timedelta(seconds=900)


def _epoch(dt: datetime) -> Decimal:
    micros = (dt - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    return Decimal(micros) / Decimal(1_000_000)


def _reference(pod: str, claim: str, replacing: Collection[str]) -> dict[str, Any]:
    """The Put as DynamoDB's documentation spells it, serialized value by value by boto3."""
    item = {"pk": f"POD#{pod}", "sk": "NOMINATION", "gsi1pk": "NOMINATIONS", "gsi1sk": pod,
            "claim": claim, "until": _epoch(UNTIL), "expiresAt": math.ceil(_epoch(UNTIL + timedelta(hours=1)))}
    names = {"#until": "until"}
    replaced = {f"r{i}": name for i, name in enumerate(sorted(replacing))}
    condition = "attribute_not_exists(pk) OR #until <= :now"
    if replaced:
        names["#claim"] = "claim"
        condition += " OR #claim IN (" + ", ".join(":" + k for k in replaced) + ")"
    expression_values = {":now": _boto3.serialize(_epoch(NOW))}
    expression_values.update({f":{k}": _boto3.serialize(v) for k, v in replaced.items()})
    return {"Put": {"TableName": "state", "Item": {k: _boto3.serialize(v) for k, v in item.items()},
                    "ConditionExpression": condition, "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": expression_values,
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}


@pytest.mark.parametrize("replacing", [(), ("old-claim",), ("b-claim", "a-claim"), {"x"}])
def test_each_put_is_the_one_written_pod_by_pod(replacing: Collection[str]) -> None:
    nominations = Nominations("state", "default-0123456789", NOW, UNTIL)
    for pod in ("default/web-0", "kube-system/coredns-7d8f-abcde", "ns/ünïcode"):
        op = nominations.op(pod, replacing)
        want = _reference(pod, "default-0123456789", replacing)
        assert op.request == want
        assert json.dumps(op.request) == json.dumps(want)  # same attributes in the same order
        assert (op.what, op.subject) == ("pod", pod)


def test_puts_of_one_transaction_with_different_takeovers_keep_their_own_conditions() -> None:
    nominations = Nominations("state", "c", NOW, UNTIL)
    plain, taken = nominations.op("ns/a"), nominations.op("ns/b", {"lapsed"})
    again = nominations.op("ns/c")
    assert plain.request == _reference("ns/a", "c", ())
    assert taken.request == _reference("ns/b", "c", {"lapsed"})
    assert again.request == _reference("ns/c", "c", ())
    # one Put's condition maps are its own: changing one leaves the others as they were
    taken.request["Put"]["ExpressionAttributeNames"]["#extra"] = "x"
    assert "#extra" not in nominations.op("ns/d", {"lapsed"}).request["Put"]["ExpressionAttributeNames"]


def test_no_two_puts_share_a_mutable_part() -> None:
    """A request is the caller's to keep (a cancellation reports its ops): changing one Put's item or
    values must not change another's."""
    nominations = Nominations("state", "c", NOW, UNTIL)
    first, second = nominations.op("ns/a", {"old"}), nominations.op("ns/b", {"old"})
    for part in ("Item", "ExpressionAttributeValues"):
        for name, value in first.request["Put"][part].items():
            value["S" if "S" in value else "N"] = "changed"
            assert second.request["Put"][part][name] != {"S": "changed"}
            assert second.request["Put"][part][name] != {"N": "changed"}
    assert nominations.op("ns/c", {"old"}).request == _reference("ns/c", "c", {"old"})
