"""DynamoDB item sizes and plain answers computed without moto's intermediate objects answer exactly as
moto's originals on the same values (`carpool.sim.localaws.moto_linear`)."""

from __future__ import annotations

import copy
import datetime
from decimal import Decimal
from typing import Any

import pytest
from moto.dynamodb import responses
from moto.dynamodb.models import utilities
from moto.dynamodb.models.dynamo_type import DynamoType, Item

from carpool.sim.localaws import moto_linear
from carpool.sim.localaws.moto_linear import _ItemsMeasuredOnce, _MeasuredSizes, _PlainAnswers
from carpool.sim.localaws.moto_patches import installed


@pytest.fixture(autouse=True)
def unpatched() -> None:
    """Each test compares moto's original with the patch, so neither may be held by a running LocalAws."""
    held = [p.__name__ for p in moto_linear.PATCHES if p.installed()]
    if held:
        pytest.skip(f"held by a running LocalAws: {held}")


def _claim(pods: int) -> dict[str, Any]:
    """A claim as carpool stores it: scalars, a map of pods each a map with a list, sets, nested lists."""
    return {
        "pk": {"S": "claim#abc"}, "sk": {"S": "claim"}, "cpu": {"N": "3.75"}, "spot": {"BOOL": True},
        "gone": {"NULL": True}, "blob": {"B": b"\x00\xffraw"}, "wire": {"B": "AAEC"},
        "zones": {"SS": ["us-east-1a", "us-east-1b", "ünïcode"]}, "ports": {"NS": ["80", "443", "-1.5e3"]},
        "keys": {"BS": [b"\x01", "AQI="]}, "empty_l": {"L": []}, "empty_m": {"M": {}},
        "pods": {"M": {f"default/pod-{i}": {"M": {"cpu": {"N": str(i)}, "uid": {"S": f"uid-{i}-é"},
                                                  "ports": {"L": [{"N": "8080"}, {"M": {"p": {"SS": ["x"]}}}]},
                                                  "ready": {"BOOL": i % 2 == 0}}}
                       for i in range(pods)}},
        "deep": {"L": [{"L": [{"M": {"a": {"M": {"b": {"L": [{"S": "leaf"}, {"NULL": True}]}}}}}]}]},
    }


def _values() -> list[Any]:
    """Stored values of every type, and values moto's measure answers oddly for or refuses."""
    values = [DynamoType(v) for v in _claim(20).values()]
    raw_member = DynamoType({"M": {"a": {"S": "x"}}})
    raw_member.value["raw"] = {"L": [{"S": "abc"}, {"M": {"k": {"N": "1"}}}]}  # a plain dict inside a map
    in_list = DynamoType({"L": [{"S": "a"}]})
    in_list.value.append({"S": "plain"})  # a plain dict inside a list: moto's measure raises
    odd_number = DynamoType({"N": "1"})
    odd_number.value = Decimal("12.50")
    not_text = DynamoType({"S": "x"})
    not_text.value = 17  # moto's measure raises
    empty_in_map = DynamoType({"M": {}})
    empty_in_map.value["e"] = {}  # moto's measure raises (IndexError)
    return [*values, raw_member, in_list, odd_number, not_text, empty_in_map]


def _outcome(measure: Any) -> Any:
    try:
        return measure()
    except Exception as e:  # noqa: BLE001 - the outcome compared is the exception's type
        return type(e)


def test_every_value_measures_as_moto_measures_it() -> None:
    values = _values()
    original = DynamoType.__dict__["size"]
    theirs = [_outcome(v.size) for v in values]
    with installed(_MeasuredSizes):
        assert DynamoType.__dict__["size"] is not original
        ours = [_outcome(v.size) for v in values]
    assert ours == theirs
    assert AttributeError in theirs and IndexError in theirs and all(isinstance(n, int) for n in theirs[:14])


def test_items_measure_as_moto_measures_them_before_and_after_changes_in_place() -> None:
    item = Item(DynamoType({"S": "claim#abc"}), DynamoType({"S": "claim"}), _claim(300))

    def changes() -> list[Any]:
        sizes = [item.size()]
        item.attrs["pods"].value["default/pod-1"].value["uid"].value = "a much longer uid than before"
        sizes.append(item.size())
        item.attrs["zones"].value.append("us-east-1c")  # ADD to a set: in place
        sizes.append(item.size())
        del item.attrs["pods"].value["default/pod-2"]  # REMOVE of a nested key: in place
        sizes.append(item.size())
        return sizes

    theirs = changes()
    item = Item(DynamoType({"S": "claim#abc"}), DynamoType({"S": "claim"}), _claim(300))
    with installed(_MeasuredSizes):
        ours = changes()
    assert ours == theirs and len(set(theirs)) == 4


def test_items_measured_once_install_over_the_measured_sizes_in_either_order() -> None:
    """`_ItemsMeasuredOnce` relies on `DynamoType.size`, which `_MeasuredSizes` replaces: its check reads
    the original that patch holds."""
    for order in ((_MeasuredSizes, _ItemsMeasuredOnce), (_ItemsMeasuredOnce, _MeasuredSizes)):
        with installed(*order):
            _ItemsMeasuredOnce.verify()
            _MeasuredSizes.verify()
            assert Item(DynamoType({"S": "k"}), None, _claim(5)).size() > 0


def _answers() -> list[Any]:
    item = Item(DynamoType({"S": "claim#abc"}), DynamoType({"S": "claim"}), _claim(30))
    stamp = datetime.datetime(2026, 11, 24, 12, 0, tzinfo=datetime.UTC)
    return [
        {"Items": [item.attrs, item.attrs], "Count": 2, "ScannedCount": 2, "LastEvaluatedKey": None},
        {"Responses": {"t": [item.describe_attrs(None)["Item"]]}, "UnprocessedKeys": {}},
        {"Item": item, "When": stamp, "Number": Decimal("1.5"), "Ratio": 0.5, "Flag": False},
        [DynamoType({"B": b"\x00"}), DynamoType({"B": "AAE="}), DynamoType({"BS": [b"\x01", "AQI="]})],
        "text", 3, None,
    ]


def test_answers_turn_into_the_plain_values_moto_makes() -> None:
    original = utilities.dynamo_to_dict
    theirs = [original(a) for a in _answers()]
    with installed(_PlainAnswers):
        assert responses.dynamo_to_dict is utilities.dynamo_to_dict is not original
        ours = [responses.dynamo_to_dict(a) for a in _answers()]
    assert ours == theirs
    assert responses.dynamo_to_dict is utilities.dynamo_to_dict is original


def test_answers_share_no_container_with_the_stored_item() -> None:
    item = Item(DynamoType({"S": "k"}), None, _claim(3))
    before = copy.deepcopy(item.to_json())
    with installed(_PlainAnswers):
        answer: Any = responses.DynamoResult({"Items": [item.attrs]}).result
    found = answer["Items"][0]
    found["zones"]["SS"].append("changed")
    found["pods"]["M"]["default/pod-0"]["M"]["ports"]["L"].clear()
    found["pods"]["M"].clear()
    assert item.to_json() == before
