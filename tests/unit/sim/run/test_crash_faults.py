"""Crash injection: a Lambda invocation killed just before CreateFleet is sent or just after it returned,
played by botocore hooks on a real boto3 EC2 client (moto in-process)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from carpool.sim.localaws.in_process import moto_in_process
from carpool.sim.run.faults import CapacityFaults, CrashFaults, InvocationFailed, InvocationKilled
from carpool.sim.run.scenario import CapacityFailure, Crash, parse_scenario


@pytest.fixture
def ec2(monkeypatch: pytest.MonkeyPatch) -> Any:
    # only the image registered here exists, as in the simulation's local EC2 (no moto default AMIs)
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    with moto_in_process():
        client = boto3.client("ec2", region_name="us-east-1")
        image = client.register_image(Name="img", Architecture="x86_64", RootDeviceName="/dev/xvda")["ImageId"]
        client.create_launch_template(LaunchTemplateName="carpool-lt", LaunchTemplateData={"ImageId": image})
        vpc = client.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnet = client.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24", AvailabilityZone="us-east-1a")
        yield client, subnet["Subnet"]["SubnetId"]


def fleet(client: Any, subnet: str) -> dict[str, Any]:
    return client.create_fleet(
        Type="instant",
        TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "on-demand"},
        LaunchTemplateConfigs=[{"LaunchTemplateSpecification": {"LaunchTemplateName": "carpool-lt", "Version": "$Latest"},
                                "Overrides": [{"InstanceType": "m5.large", "SubnetId": subnet}]}],
    )


def instances(client: Any) -> list[str]:
    return [i["InstanceId"] for r in client.describe_instances()["Reservations"] for i in r["Instances"]
            if i["State"]["Name"] in ("pending", "running")]


def crashes(*specs: dict[str, Any], at: float = 0.0, running: str = "provisioner") -> CrashFaults:
    now = {"t": at, "fn": running}
    return CrashFaults([Crash.model_validate(s) for s in specs], lambda: now["t"], lambda: now["fn"])


def test_killed_after_create_fleet_the_instance_exists_and_nothing_after_the_call_runs(ec2: Any) -> None:
    client, subnet = ec2
    faults = crashes({"point": "after-create-fleet"})
    faults.register(client)
    with pytest.raises(InvocationKilled, match="after CreateFleet launched i-"):
        fleet(client, subnet)
    assert len(instances(client)) == 1
    assert faults.fired == [{"at": 0.0, "point": "after-create-fleet", "function": "provisioner"}]
    fleet(client, subnet)  # `times: 1`: the next invocation lives
    assert len(instances(client)) == 2


def test_killed_before_create_fleet_nothing_is_launched_even_when_capacity_faults_would_answer(ec2: Any) -> None:
    client, subnet = ec2
    CapacityFaults([CapacityFailure(instance_type="*")], lambda: 0.0, {subnet: "us-east-1a"}.get).register(client)
    faults = crashes({"point": "before-create-fleet", "times": 2})
    faults.register(client)
    for _ in range(2):
        with pytest.raises(InvocationKilled, match="before CreateFleet"):
            fleet(client, subnet)
    assert instances(client) == [] and len(faults.fired) == 2
    assert fleet(client, subnet)["Instances"] == []  # the capacity fault answers once the crashes are spent


def test_only_the_named_function_dies_and_only_from_its_time_on(ec2: Any) -> None:
    client, subnet = ec2
    faults = crashes({"point": "after-create-fleet", "at": 60}, at=30, running="interruption")
    faults.register(client)
    fleet(client, subnet)  # too early, and another function
    faults.elapsed = lambda: 90.0
    fleet(client, subnet)  # late enough, still another function
    faults.running = lambda: "provisioner"
    with pytest.raises(InvocationKilled):
        fleet(client, subnet)
    faults.unregister(client)
    assert len(instances(client)) == 3


def test_no_except_exception_survives_a_kill_but_the_lambda_service_sees_a_failed_invocation() -> None:
    faults = crashes({"point": "before-create-fleet"})

    def handler(event: Any, context: Any) -> dict[str, Any]:
        try:
            faults.before_call()
        except Exception:  # noqa: BLE001 - what carpool's own error handling would do
            return {"batchItemFailures": []}
        raise AssertionError("unreachable")

    with pytest.raises(InvocationKilled):
        handler({}, None)
    faults = crashes({"point": "before-create-fleet"})
    with pytest.raises(InvocationFailed, match="provisioner invocation killed before CreateFleet"):
        faults.guard(handler)({}, None)


def test_scenarios_declare_crashes_and_reject_unknown_points() -> None:
    scenario = parse_scenario({"crashes": [{"at": 0, "point": "after-create-fleet", "times": 1}]})
    assert [(c.at, c.point, c.times, c.function) for c in scenario.crashes] == [
        (0.0, "after-create-fleet", 1, "provisioner")]
    with pytest.raises(ValueError, match=r"crashes\[0\]\.point"):
        parse_scenario({"crashes": [{"point": "after-claim-write"}]}, "s.yaml")
