"""DynamoDB requests parse to the same parameters with `_WireFormRequests` as with moto's own parser.

Requests are serialized by botocore exactly as the SDK sends them (blobs base64-encoded), then parsed by
moto's JSON parser with and without the patch.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import botocore.session
import pytest
from botocore.serialize import create_serializer

from carpool.adapters.aws.dynamodb.claims import new_claim_put
from carpool.adapters.aws.dynamodb.nominations import Nominations
from carpool.adapters.aws.dynamodb.pool_usage import reserve_usage
from carpool.sim.localaws.moto_patches import installed
from carpool.sim.localaws.motofast import _WireFormRequests
from carpool.state.models import Claim

MODEL = botocore.session.get_session().get_service_model("dynamodb")
NOW = datetime(2026, 1, 1, tzinfo=UTC)
#: the state table the transaction is written to
TABLE = "state"
EVERY_TYPE = {"pk": {"S": "CLAIM#a"}, "sk": {"S": "CLAIM"}, "n": {"N": "1.5"}, "ok": {"BOOL": False},
              "none": {"NULL": True}, "empty": {"S": ""}, "uni": {"S": "é✓\"\\"},
              "pods": {"L": [{"S": f"default/p{i}"} for i in range(5)] + [{"M": {"x": {"N": "1"}}}]},
              "requested": {"M": {"cpu": {"N": "100"}, "nested": {"M": {"x": {"L": [{"N": "1"}]}}}}},
              "tags": {"SS": ["a", "b"]}, "nums": {"NS": ["1", "2"]}, "blob": {"B": b"\x00\x01"},
              "blobs": {"BS": [b"\x02", b"\x03"]}, "listed_blob": {"L": [{"B": b"\x04"}, {"S": "x"}]}}


def _reservation() -> list[dict[str, Any]]:
    """The provisioner's reservation transaction as carpool builds it: claim, usage and 98 nominations."""
    claim = Claim(name="c1", nodepool="default", nodeclass="default", created_at=NOW, instance_types=["m6i.large"],
                  pods=[f"default/p{i}" for i in range(98)], reserved={"cpu": 2000, "nodes": 1},
                  requested={"cpu": 9800})
    until = NOW.replace(hour=1)
    return [op.request for op in [new_claim_put(TABLE, claim), reserve_usage(TABLE, claim, {"cpu": 100_000}),
                                  *_nominations(claim, until)]]


def _nominations(claim: Claim, until: Any) -> list[Any]:
    """The claim's nomination Puts, each taking over from a claim being replaced, as the ledger builds them."""
    nominations = Nominations(TABLE, claim.name, NOW, until)
    return [nominations.op(p, ("old",)) for p in claim.pods]


REQUESTS = [
    ("TransactWriteItems", {"TransactItems": _reservation()}),
    ("PutItem", {"TableName": "t", "Item": EVERY_TYPE, "ConditionExpression": "attribute_not_exists(pk)"}),
    ("UpdateItem", {"TableName": "t", "Key": {"pk": {"S": "a"}, "sk": {"S": "b"}}, "UpdateExpression": "SET #a = :v",
                    "ExpressionAttributeNames": {"#a": "a"},
                    "ExpressionAttributeValues": {":v": {"B": b"\x05"}, ":w": {"L": []}, ":m": {"M": {}}}}),
    ("BatchWriteItem", {"RequestItems": {"t": [{"PutRequest": {"Item": EVERY_TYPE}},
                                               {"DeleteRequest": {"Key": {"pk": {"S": "a"}, "sk": {"S": "b"}}}}]}}),
    ("Query", {"TableName": "t", "KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "x"}},
               "ExclusiveStartKey": {"pk": {"S": "x"}, "sk": {"S": "y"}}}),
    ("Query", {"TableName": "t", "KeyConditions": {"pk": {"ComparisonOperator": "EQ",
                                                          "AttributeValueList": [{"S": "x"}, {"B": b"\x06"}]}}}),
]


def _parse(operation: str, params: dict[str, Any]) -> dict[str, Any]:
    from moto.core.parse import JSONParser

    model = MODEL.operation_model(operation)
    request = create_serializer("json").serialize_to_request(params, model)
    return dict(JSONParser(model).parse({"method": "POST", "values": {}, "headers": request["headers"],
                                         "body": request["body"], "url_path": "/", "url_params": {}}))


@pytest.mark.parametrize(("operation", "params"), REQUESTS, ids=[f"{o}-{i}" for i, (o, _) in enumerate(REQUESTS)])
def test_requests_parse_to_the_parameters_moto_parses(operation: str, params: dict[str, Any]) -> None:
    plain = _parse(operation, params)
    with installed(_WireFormRequests):
        fast = _parse(operation, params)
    assert fast == plain
    assert json.dumps(fast, sort_keys=True, default=repr) == json.dumps(plain, sort_keys=True, default=repr)


def test_blobs_are_still_decoded() -> None:
    with installed(_WireFormRequests):
        item = _parse("PutItem", {"TableName": "t", "Item": EVERY_TYPE})["Item"]
    assert item["blob"] == {"B": b"\x00\x01"}
    assert item["blobs"] == {"BS": [b"\x02", b"\x03"]}
    assert item["listed_blob"] == {"L": [{"B": b"\x04"}, {"S": "x"}]}
    assert item["uni"] == {"S": "é✓\"\\"}


def test_a_reservation_s_items_skip_the_shape_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.core.parse import RequestParser

    walked: list[str] = []
    original = RequestParser._parse_shape

    def counting(self: Any, shape: Any, node: Any) -> Any:
        walked.append(shape.name)
        return original(self, shape, node)

    monkeypatch.setattr(RequestParser, "_parse_shape", counting)
    _parse("TransactWriteItems", {"TransactItems": _reservation()})
    plain = walked.count("AttributeValue")
    walked.clear()
    with installed(_WireFormRequests):
        _parse("TransactWriteItems", {"TransactItems": _reservation()})
    assert plain > 500 and walked.count("AttributeValue") == 0
