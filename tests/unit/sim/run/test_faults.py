"""Capacity-error injection: which overrides fail when, and what CreateFleet then answers."""

import pytest

from carpool.sim.run.faults import CapacityFaults
from carpool.sim.run.scenario import CapacityFailure

SUBNETS = {"subnet-a": "us-east-1a", "subnet-b": "us-east-1b"}


def faults(failures, at=0.0):
    now = {"t": at}
    f = CapacityFaults([CapacityFailure.model_validate(x) for x in failures], lambda: now["t"], SUBNETS.get)
    return f, now


def request(types, capacity_type="spot"):
    return {
        "Type": "instant",
        "TargetCapacitySpecification": {"TotalTargetCapacity": 1, "DefaultTargetCapacityType": capacity_type},
        "LaunchTemplateConfigs": [{"LaunchTemplateSpecification": {"LaunchTemplateName": "lt-1", "Version": "$Latest"},
                                   "Overrides": [{"InstanceType": t, "SubnetId": s} for t in types for s in SUBNETS]}],
    }


@pytest.mark.parametrize(("pattern", "itype", "hit"), [
    ("c7i-flex.*", "c7i-flex.large", True),
    ("c7i-flex*", "c7i-flex.2xlarge", True),
    ("c7i-flex.*", "c7i.large", False),
    ("m5.large", "m5.large", True),
    ("*", "anything.large", True),
])
def test_glob_matching(pattern, itype, hit):
    f, _ = faults([{"instanceType": pattern}])
    assert (f.failure_for(itype, "us-east-1a", "spot") is not None) is hit


def test_time_window_is_half_open():
    f, now = faults([{"instanceType": "c7i-flex.*", "from": 60, "until": 180}])
    for t, hit in [(0, False), (59.9, False), (60, True), (179, True), (180, False), (1000, False)]:
        now["t"] = t
        assert (f.failure_for("c7i-flex.large", None, "spot") is not None) is hit, t


def test_zone_and_capacity_type_narrow_the_failure():
    f, _ = faults([{"instanceType": "m5.*", "zone": "us-east-1a", "capacityType": "spot"}])
    assert f.failure_for("m5.large", "us-east-1a", "spot")
    assert not f.failure_for("m5.large", "us-east-1b", "spot")
    assert not f.failure_for("m5.large", "us-east-1a", "on-demand")


def test_all_overrides_failing_answers_with_errors_only():
    f, _ = faults([{"instanceType": "c7i-flex.*"}])
    params, context = request(["c7i-flex.large", "c7i-flex.xlarge"]), {}
    f.before_parameter_build(params=params, context=context)
    http, parsed = f.before_call(context=context)
    assert http.status_code == 200
    assert parsed["Instances"] == []
    assert len(parsed["Errors"]) == 4
    err = parsed["Errors"][0]
    assert err["ErrorCode"] == "InsufficientInstanceCapacity"
    assert err["Lifecycle"] == "spot"
    assert err["LaunchTemplateAndOverrides"]["Overrides"] == {
        "InstanceType": "c7i-flex.large", "SubnetId": "subnet-a", "AvailabilityZone": "us-east-1a"}
    assert err["LaunchTemplateAndOverrides"]["LaunchTemplateSpecification"]["LaunchTemplateName"] == "lt-1"
    assert len(f.injected) == 4


def test_partly_failing_request_is_stripped_and_errors_added_to_the_answer():
    f, _ = faults([{"instanceType": "c7i-flex.*", "zone": "us-east-1a"}])
    params, context = request(["c7i-flex.large", "m7i.large"]), {}
    f.before_parameter_build(params=params, context=context)
    kept = params["LaunchTemplateConfigs"][0]["Overrides"]
    assert {(o["InstanceType"], o["SubnetId"]) for o in kept} == {
        ("c7i-flex.large", "subnet-b"), ("m7i.large", "subnet-a"), ("m7i.large", "subnet-b")}
    assert f.before_call(context=context) is None  # the real (stripped) request goes to EC2
    parsed = {"Instances": [{"InstanceIds": ["i-1"]}]}
    f.after_call(parsed=parsed, context=context)
    assert [e["ErrorCode"] for e in parsed["Errors"]] == ["InsufficientInstanceCapacity"]


def test_requests_without_failures_are_untouched():
    f, _ = faults([{"instanceType": "c7i-flex.*", "until": 10}], at=20)
    params, context = request(["c7i-flex.large"]), {}
    before = repr(params)
    f.before_parameter_build(params=params, context=context)
    assert repr(params) == before and context == {}
    parsed = {"Instances": []}
    f.after_call(parsed=parsed, context=context)
    assert "Errors" not in parsed


def test_on_demand_lifecycle_comes_from_the_request():
    f, _ = faults([{"instanceType": "*"}])
    params, context = request(["m5.large"], capacity_type="on-demand"), {}
    f.before_parameter_build(params=params, context=context)
    assert {e["Lifecycle"] for e in f.before_call(context=context)[1]["Errors"]} == {"on-demand"}
