"""The linear query parsing and item measuring answer exactly as moto's originals (`carpool.sim.localaws.moto_linear`)."""

from __future__ import annotations

from typing import Any

import boto3
import botocore.session
import pytest
from botocore.exceptions import ClientError
from botocore.serialize import create_serializer
from moto.core.parse import EC2QueryParser, QueryParser
from moto.core.utils import get_service_model
from moto.dynamodb.exceptions import ItemSizeTooLarge
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from werkzeug.datastructures import MultiDict

from carpool.sim.localaws import moto_linear
from carpool.sim.localaws.moto_linear import _IndexedQueryKeys, _ItemsMeasuredOnce, _SortedKeys
from carpool.sim.localaws.moto_patches import installed


@pytest.fixture(autouse=True)
def unpatched() -> None:
    """Each test compares moto's original with the patch, so neither may be held by a running LocalAws."""
    held = [p.__name__ for p in moto_linear.PATCHES if p.installed()]
    if held:
        pytest.skip(f"held by a running LocalAws: {held}")


# -- query parsing ------------------------------------------------------------------------------------
def _fleet_request(overrides: int, tags: int) -> dict[str, Any]:
    types = ["m5.large", "c5.large", "r5.large", "m6i.xlarge", "c6g.2xlarge", "r7a.large"]
    return {
        "Type": "instant",
        "ClientToken": "token-1",
        "TargetCapacitySpecification": {"TotalTargetCapacity": 3, "DefaultTargetCapacityType": "spot",
                                        "OnDemandTargetCapacity": 0, "SpotTargetCapacity": 3},
        "SpotOptions": {"AllocationStrategy": "price-capacity-optimized", "MinTargetCapacity": 1},
        "OnDemandOptions": {"AllocationStrategy": "lowest-price"},
        "LaunchTemplateConfigs": [
            {"LaunchTemplateSpecification": {"LaunchTemplateId": f"lt-{c:017x}", "Version": "$Latest"},
             "Overrides": [{"InstanceType": types[i % len(types)], "SubnetId": f"subnet-{i % 3}",
                            "AvailabilityZone": f"us-east-1{'abc'[i % 3]}", "Priority": float(i),
                            "WeightedCapacity": 1.0 + i % 4,
                            "InstanceRequirements": {"VCpuCount": {"Min": 2}, "MemoryMiB": {"Min": 1024}}}
                           for i in range(overrides)]}
            for c in range(2)],
        "TagSpecifications": [
            {"ResourceType": kind, "Tags": [{"Key": f"karpenter.sh/key-{i}", "Value": f"value-{i}"} for i in range(tags)]}
            for kind in ("fleet", "instance", "volume")],
    }


def _query_values(operation: str, params: dict[str, Any]) -> MultiDict[str, str]:
    """The form fields botocore sends for the call (the request moto's parser reads)."""
    model = botocore.session.get_session().get_service_model("ec2")
    body = create_serializer("ec2").serialize_to_request(params, model.operation_model(operation))["body"]
    return MultiDict(body.items())


def _parse(operation: str, values: MultiDict[str, str]) -> Any:
    parser = EC2QueryParser(get_service_model("ec2").operation_model(operation))
    return parser.parse({"method": "POST", "values": values, "headers": {}, "body": b"", "url_path": "/",
                         "url_params": {}})


@pytest.mark.parametrize("overrides,tags", [(1, 0), (9, 2), (11, 10), (180, 40)])
def test_a_fleet_request_parses_as_moto_parses_it(overrides: int, tags: int) -> None:
    values = _query_values("CreateFleet", _fleet_request(overrides, tags))
    original = _parse("CreateFleet", values)
    with installed(_IndexedQueryKeys):
        patched = _parse("CreateFleet", values)
    assert patched == original
    assert len(patched["LaunchTemplateConfigs"][1]["Overrides"]) == overrides
    assert len(patched["TagSpecifications"][2].get("Tags", [])) == tags


def test_one_parser_reused_for_another_request_reads_that_request() -> None:
    parser = EC2QueryParser(get_service_model("ec2").operation_model("CreateFleet"))
    requests = [_query_values("CreateFleet", _fleet_request(n, 1)) for n in (12, 3)]
    with installed(_IndexedQueryKeys):
        answers = [parser.parse({"method": "POST", "values": v, "headers": {}, "body": b"", "url_path": "/",
                                 "url_params": {}}) for v in requests]
    assert [len(a["LaunchTemplateConfigs"][0]["Overrides"]) for a in answers] == [12, 3]


def test_a_prefix_is_found_exactly_when_a_key_starts_with_it() -> None:
    keys = ["A.1.B", "A.10.C", "A.2", "Ab", "B.1.Name", "B.1.Value", "a.1", "A.1"]
    index = _SortedKeys(dict.fromkeys(keys))
    prefixes = {k[:n] for k in keys for n in range(1, len(k) + 1)} | {"A.3", "A.1.C", "A.100", "C", "B.2", "Ac", "@"}
    scan = QueryParser.__dict__["_gonna_recurse"]
    for prefix in sorted(prefixes):
        assert index.any_startswith(prefix) == any(k.startswith(prefix) for k in keys), prefix
        assert index.any_startswith(prefix) is not scan(None, keys, prefix)


# -- item size --------------------------------------------------------------------------------------------
def _build(attrs: dict[str, Any]) -> Item | type[Exception]:
    try:
        return Item(DynamoType({"S": "pk"}), None, attrs)
    except ItemSizeTooLarge as e:
        return type(e)


def _both(attrs: dict[str, Any]) -> tuple[Any, Any]:
    original = _build(attrs)
    with installed(_ItemsMeasuredOnce):
        patched = _build(attrs)
    return original, patched


def _at_limit(extra: int) -> dict[str, Any]:
    """101 attributes of 4,004 bytes (404,404), then one whose size brings the item to 405,000 + extra."""
    attrs: dict[str, Any] = {f"a{i:03d}": {"S": "x" * 4000} for i in range(101)}
    attrs["z"] = {"S": "y" * (405000 - 404404 - 1 + extra)}
    return attrs


def test_an_item_at_moto_s_limit_is_stored_and_one_byte_more_refused_as_moto_does() -> None:
    original, patched = _both(_at_limit(0))
    assert isinstance(original, Item) and isinstance(patched, Item)
    assert patched == original and list(patched.attrs) == list(original.attrs)
    assert _both(_at_limit(1)) == (ItemSizeTooLarge, ItemSizeTooLarge)


def test_items_of_every_attribute_type_are_stored_identically() -> None:
    attrs = {"n": {"N": "123.45"}, "s": {"S": "é" * 50}, "b": {"B": b"\x00\x01"}, "bool": {"BOOL": True},
             "null": {"NULL": True}, "ss": {"SS": ["a", "bb"]}, "ns": {"NS": ["1", "22"]},
             "l": {"L": [{"S": "x"}, {"N": "1"}, {"M": {"k": {"S": "v"}}}]},
             "m": {"M": {f"k{i}": {"S": "v" * i} for i in range(200)}}}
    original, patched = _both(attrs)
    assert isinstance(patched, Item) and patched == original
    assert patched.to_json() == original.to_json() and patched.size() == original.size()
    huge = {**attrs, "big": {"L": [{"S": "z" * 1000} for _ in range(405)]}}
    assert _both(huge) == (ItemSizeTooLarge, ItemSizeTooLarge)


@pytest.fixture
def table(moto_in_process: None) -> Any:
    client = boto3.client("dynamodb", region_name="us-east-1")
    client.create_table(TableName="t", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                        BillingMode="PAY_PER_REQUEST")
    return client


def _writes(client: Any, pk: str) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """A large put, an update of many of its attributes, then an update and a put taking it over the limit."""
    item = {"pk": {"S": pk}, **{f"a{i:03d}": {"S": "x" * 1000} for i in range(300)}}
    client.put_item(TableName="t", Item=item)
    sets = ", ".join(f"#a{i} = :v{i}" for i in range(0, 300, 3))
    client.update_item(TableName="t", Key={"pk": {"S": pk}}, UpdateExpression=f"SET {sets}",
                       ExpressionAttributeNames={f"#a{i}": f"a{i:03d}" for i in range(0, 300, 3)},
                       ExpressionAttributeValues={f":v{i}": {"N": str(i)} for i in range(0, 300, 3)})
    errors: list[dict[str, str]] = []
    try:
        client.update_item(TableName="t", Key={"pk": {"S": pk}}, UpdateExpression="SET #big = :big",
                           ExpressionAttributeNames={"#big": "big"},
                           ExpressionAttributeValues={":big": {"S": "y" * 250_000}})
    except ClientError as e:
        errors.append(e.response["Error"])
    try:
        client.put_item(TableName="t", Item={**item, "big": {"S": "y" * 250_000}})
    except ClientError as e:
        errors.append(e.response["Error"])
    stored = client.get_item(TableName="t", Key={"pk": {"S": pk}})["Item"]
    return {k: v for k, v in stored.items() if k != "pk"}, errors


def test_a_large_item_is_written_updated_and_refused_over_the_limit_as_moto_does(table: Any) -> None:
    original = _writes(table, "original")
    with installed(_ItemsMeasuredOnce):
        patched = _writes(table, "patched")
    assert patched == original
    stored, errors = patched
    assert len(stored) == 300 and stored["a003"] == {"N": "3"} and stored["a004"] == {"S": "x" * 1000}
    assert [e["Code"] for e in errors] == ["ValidationException", "ValidationException"]
