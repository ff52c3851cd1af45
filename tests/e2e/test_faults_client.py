"""The capacity-fault hooks on a real boto3 EC2 client (moto in-process): what CreateFleet answers."""

import boto3
import pytest

from carpool.sim.localaws.in_process import moto_in_process
from carpool.sim.run.faults import CapacityFaults
from carpool.sim.run.scenario import CapacityFailure


@pytest.fixture
def ec2():
    with moto_in_process():
        client = boto3.client("ec2", region_name="us-east-1")
        image = client.register_image(Name="img", Architecture="x86_64", RootDeviceName="/dev/xvda")["ImageId"]
        client.create_launch_template(LaunchTemplateName="carpool-test", LaunchTemplateData={"ImageId": image})
        vpc = client.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnets = {z: client.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=z)["Subnet"]["SubnetId"]
                   for i, z in enumerate(("us-east-1a", "us-east-1b"))}
        yield client, subnets


def fleet(client, subnets, types):
    return client.create_fleet(
        Type="instant",
        TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "spot"},
        SpotOptions={"AllocationStrategy": "price-capacity-optimized"},
        LaunchTemplateConfigs=[{
            "LaunchTemplateSpecification": {"LaunchTemplateName": "carpool-test", "Version": "$Latest"},
            "Overrides": [{"InstanceType": t, "SubnetId": s} for t in types for s in subnets.values()],
        }],
    )


def test_all_failing_overrides_give_errors_and_no_instances(ec2):
    client, subnets = ec2
    zones = {v: k for k, v in subnets.items()}
    faults = CapacityFaults([CapacityFailure(instance_type="c7i-flex.*")], lambda: 0.0, zones.get)
    faults.register(client)
    answer = fleet(client, subnets, ["c7i-flex.large"])
    assert answer["Instances"] == []
    assert [e["ErrorCode"] for e in answer["Errors"]] == ["InsufficientInstanceCapacity"] * 2
    assert {e["LaunchTemplateAndOverrides"]["Overrides"]["AvailabilityZone"] for e in answer["Errors"]} == set(subnets)
    assert client.describe_instances()["Reservations"] == []


def test_partly_failing_request_launches_the_rest(ec2):
    client, subnets = ec2
    zones = {v: k for k, v in subnets.items()}
    faults = CapacityFaults([CapacityFailure(instance_type="c7i-flex.*")], lambda: 0.0, zones.get)
    faults.register(client)
    answer = fleet(client, subnets, ["c7i-flex.large", "m7i.large"])
    assert [i["InstanceType"] for i in answer["Instances"]] == ["m7i.large"]
    assert len(answer["Errors"]) == 2


def test_outside_the_window_nothing_is_injected(ec2):
    client, subnets = ec2
    faults = CapacityFaults([CapacityFailure(instance_type="*", until=60)], lambda: 61.0)
    faults.register(client)
    answer = fleet(client, subnets, ["c7i-flex.large"])
    assert answer["Instances"] and not answer.get("Errors")
    faults.unregister(client)
