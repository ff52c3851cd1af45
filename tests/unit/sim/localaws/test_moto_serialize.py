"""Answers rendered with the remembered attribute names are byte-identical to moto's own (`carpool.sim.localaws.moto_serialize`)."""

from __future__ import annotations

import functools
import re
from typing import Any

import boto3
import pytest
from moto.core import serialize

from carpool.sim.localaws import moto_serialize
from carpool.sim.localaws.moto_patches import installed
from carpool.sim.localaws.moto_serialize import _RememberedAliases

REGION = "us-east-1"


@pytest.fixture(autouse=True)
def unpatched() -> None:
    """Each test compares moto's original with the patch, so neither may be held by a running LocalAws."""
    held = [p.__name__ for p in moto_serialize.PATCHES if p.installed()]
    if held:
        pytest.skip(f"held by a running LocalAws: {held}")


@pytest.fixture
def aws(moto_in_process: None) -> dict[str, Any]:
    return {name: boto3.client(name, region_name=REGION) for name in ("ec2", "dynamodb", "sqs", "ssm")}


def _seed(clients: dict[str, Any]) -> None:
    ec2 = clients["ec2"]
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/20", AvailabilityZone=f"{REGION}a")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="nodes", Description="nodes", VpcId=vpc)["GroupId"]
    # its own image: whether moto loads its default AMIs depends on what ran before in the process
    image = ec2.register_image(Name="nodes", Architecture="x86_64", RootDeviceName="/dev/xvda",
                               BlockDeviceMappings=[{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 20}}])["ImageId"]
    template = ec2.create_launch_template(LaunchTemplateName="nodes-lt", LaunchTemplateData={
        "ImageId": image, "UserData": "dXNlcmRhdGE=", "SecurityGroupIds": [group],
        "MetadataOptions": {"HttpTokens": "required", "HttpPutResponseHopLimit": 1},
        "BlockDeviceMappings": [{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 20, "VolumeType": "gp3"}}]})
    for i in range(3):
        ec2.run_instances(ImageId=image, MinCount=2, MaxCount=2, InstanceType=("m5.large", "c6g.xlarge")[i % 2],
                          SubnetId=subnet, SecurityGroupIds=[group],
                          TagSpecifications=[{"ResourceType": "instance", "Tags": [
                              {"Key": "karpenter.sh/nodepool", "Value": "default"}, {"Key": "Name", "Value": f"n{i}"}]}])
    ec2.create_fleet(Type="instant", TargetCapacitySpecification={"TotalTargetCapacity": 2,
                                                                   "DefaultTargetCapacityType": "on-demand"},
                     LaunchTemplateConfigs=[{"LaunchTemplateSpecification": {
                         "LaunchTemplateId": template["LaunchTemplate"]["LaunchTemplateId"], "Version": "$Latest"},
                         "Overrides": [{"InstanceType": "m5.large", "SubnetId": subnet}]}])
    ddb = clients["dynamodb"]
    ddb.create_table(TableName="t", BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in ("pk", "sk", "g")],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                     GlobalSecondaryIndexes=[{"IndexName": "gsi", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                                              "Projection": {"ProjectionType": "ALL"}}])
    clients["sqs"].create_queue(QueueName="q", Attributes={"VisibilityTimeout": "45"})
    clients["ssm"].put_parameter(Name="/p", Value="v", Type="String")


#: (service, operation, arguments): answers of many shapes, XML and JSON, nested structures and lists
ASKED: list[tuple[str, str, dict[str, Any]]] = [
    ("ec2", "describe_instances", {}),
    ("ec2", "describe_instances", {"Filters": [{"Name": "tag:karpenter.sh/nodepool", "Values": ["default"]}]}),
    ("ec2", "describe_launch_template_versions", {"LaunchTemplateName": "nodes-lt"}),
    ("ec2", "describe_subnets", {}),
    ("ec2", "describe_security_groups", {}),
    ("ec2", "describe_vpcs", {}),
    ("ec2", "describe_availability_zones", {}),
    ("ec2", "describe_instance_types", {"InstanceTypes": ["m5.large", "c6g.xlarge", "p4d.24xlarge"]}),
    ("ec2", "describe_images", {"Owners": ["amazon"]}),
    ("ec2", "describe_fleets", {}),
    ("dynamodb", "describe_table", {"TableName": "t"}),
    ("dynamodb", "list_tables", {}),
    ("sqs", "list_queues", {}),
    ("ssm", "get_parameters", {"Names": ["/p", "/missing"]}),
]
#: what moto draws anew for every answer
_REQUEST_ID = re.compile(rb"<(requestId|RequestId)>[^<]*</\1>")


def _bodies(clients: dict[str, Any]) -> list[bytes]:
    bodies: list[bytes] = []
    for client in clients.values():
        client.meta.events.register("after-call", lambda http_response, **_: bodies.append(http_response.content))
    for service, operation, kwargs in ASKED:
        getattr(clients[service], operation)(**kwargs)
    for client in clients.values():
        client.meta.events.unregister("after-call")
    return [_REQUEST_ID.sub(rb"<\1>id</\1>", b) for b in bodies]


def test_answers_are_byte_identical_to_moto_s_rendering(aws: dict[str, Any]) -> None:
    _seed(aws)
    original = _bodies(aws)
    with installed(_RememberedAliases):
        first, again = _bodies(aws), _bodies(aws)  # the second pass answers from the remembered names
    assert len(original) == len(ASKED)
    assert first == original
    assert again == original
    assert b"<instanceId>i-" in original[0] and b"karpenter.sh/nodepool" in original[1]


class _Aliased:
    """A model object answering a member under another name (moto's `Meta.serialization_aliases`)."""

    class Meta:
        serialization_aliases = {"VolumeId": "ident"}

    def __init__(self, ident: str) -> None:
        self.ident = ident
        self.volume_id = "not this one"


class _Realiased(_Aliased):
    class Meta:
        serialization_aliases: dict[str, str] = {}


@functools.cache
def _volume_id_shape() -> Any:
    """One shape object, as a serializer holds its operation's shapes (botocore builds new ones per lookup)."""
    from moto.core.utils import get_service_model

    return get_service_model("ec2").shape_for("Volume").members["VolumeId"]


def _picked(obj: Any) -> Any:
    context = serialize.AttributePickerContext(obj=obj, key="VolumeId", shape=_volume_id_shape())
    return serialize.XFormedAttributePicker()(context)


def test_names_are_remembered_per_class_and_aliases() -> None:
    objects = [_Aliased("vol-1"), _Realiased("vol-2"), {"VolumeId": "vol-3"}, {"volume_id": "vol-4"}, {}]
    original = [_picked(o) for o in objects]
    with installed(_RememberedAliases):
        patched = [_picked(o) for o in objects] + [_picked(o) for o in reversed(objects)]
    assert original == ["vol-1", "not this one", "vol-3", "vol-4", None]
    assert patched == original + original[::-1]


def test_a_picker_with_other_providers_takes_moto_s_code() -> None:
    class Upper(serialize.NoAlias):
        def get_alias(self, key: str) -> str:
            return key.upper()

    picker = serialize.AttributePicker(alias_providers=[Upper])
    context = serialize.AttributePickerContext(obj={"VOLUMEID": "vol-9"}, key="VolumeId", shape=None)  # type: ignore[arg-type]
    with installed(_RememberedAliases):
        assert picker(context) == "vol-9"
