"""What IAM authorizes for a recorded request (`carpool.sim.localaws.requests.authorizations`), and the recorder's
attribution of requests to the function being invoked."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.stub import Stubber

from carpool.launch import fleet, templates
from carpool.sim.localaws.requests import AwsCall, RequestRecorder, authorizations

REGION, ACCOUNT = "us-east-1", "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/carpool-node"
TAGS = fleet.fleet_tags("demo", "default", "default-abc", "default")
OWNED = {"kubernetes.io/cluster/demo": "owned", "carpool.dev/cluster": "demo"}


def arn(rtype: str, rid: str = "*", account: str = ACCOUNT) -> str:
    return f"arn:aws:ec2:{REGION}:{account}:{rtype}/{rid}"


def fleet_call(capacity_type: str) -> AwsCall:
    """A CreateFleet as carpool builds it, with the facts the recorder reads about its launch template."""
    settings = templates.LaunchSettings(security_group_ids=("sg-1",), instance_profile="carpool-node")
    spec = templates.LaunchTemplateSpec("carpool/demo/aaaa", "ami-1", "", 29, ("m5.large",), (), {}, ("sg-1",),
                                        "carpool-node", {**settings.tags, **OWNED}, capacity_type)
    template = templates.create_launch_template_request(spec)
    request = fleet.build_fleet_request(
        "default-abc", capacity_type, [fleet.FleetOverride(spec.name, "m5.large", "subnet-1", "us-east-1a", 0.1)], TAGS
    )
    facts = {
        "launchTemplates": {spec.name: {
            "arn": arn("launch-template", "lt-1"), "tags": OWNED,
            "tagSpecifications": template["LaunchTemplateData"]["TagSpecifications"],
            "inputs": [{"arn": arn("security-group", "sg-1"), "tags": {}}, {"arn": arn("image", "ami-1", ""), "tags": {}}],
            "role": ROLE,
        }},
        "subnets": [{"arn": arn("subnet", "subnet-1"), "tags": {}}],
    }  # fmt: skip
    params = {k: request[k] for k in ("Type", "TargetCapacitySpecification", "TagSpecifications")}
    return AwsCall(function="provisioner", service="ec2", operation="CreateFleet", region=REGION, params=params,
                   facts=facts)


def by_target(call: AwsCall) -> dict[tuple[str, str], list[dict[str, list[str]]]]:
    out: dict[tuple[str, str], list[dict[str, list[str]]]] = {}
    for check in authorizations(call):
        out.setdefault((check.action, check.resource), []).append(check.context)
    return out


@pytest.mark.parametrize("capacity_type", ["spot", "on-demand"])
def test_a_launch_is_authorized_per_created_resource_with_its_own_request_tags(capacity_type: str) -> None:
    checks = by_target(fleet_call(capacity_type))
    created = {"instance", "volume", "network-interface"} | ({"spot-instances-request"} if capacity_type == "spot" else set())
    for action in ("ec2:CreateFleet", "ec2:RunInstances"):
        launched = {r.split(":")[-1].split("/")[0] for (a, r) in checks if a == action and r.endswith("/*")}
        assert launched == created | ({"fleet"} if action == "ec2:CreateFleet" else set())
        for rtype in created:
            (context,) = checks[(action, arn(rtype))]
            assert context["aws:RequestTag/carpool.dev/cluster"] == ["demo"]
            assert "karpenter.sh/nodeclaim" in context["aws:TagKeys"] or rtype in ("network-interface", SPOT)
    # tags on create are a CreateTags with the creating action
    tagging = checks[("ec2:CreateTags", arn("instance"))]
    assert sorted(c["ec2:CreateAction"][0] for c in tagging) == ["CreateFleet", "RunInstances"]


SPOT = "spot-instances-request"


def test_existing_inputs_carry_their_resource_tags_and_no_request_tags() -> None:
    checks = by_target(fleet_call("spot"))
    (template,) = checks[("ec2:RunInstances", arn("launch-template", "lt-1"))]
    assert template["aws:ResourceTag/carpool.dev/cluster"] == ["demo"]
    assert not any(k.startswith("aws:RequestTag/") for k in template)
    assert ("ec2:CreateFleet", arn("subnet", "subnet-1")) in checks
    assert ("ec2:RunInstances", f"arn:aws:ec2:{REGION}::image/ami-1") in checks
    (passing,) = checks[("iam:PassRole", ROLE)]
    assert passing["iam:PassedToService"] == ["ec2.amazonaws.com"]


def test_a_missing_tag_specification_leaves_the_resource_without_request_tags() -> None:
    call = fleet_call("spot")
    for template in call.facts["launchTemplates"].values():
        template["tagSpecifications"] = [s for s in template["tagSpecifications"] if s["ResourceType"] != SPOT]
    (context,) = by_target(call)[("ec2:RunInstances", arn(SPOT))]
    assert not any(k.startswith("aws:RequestTag/") for k in context)


def test_terminate_and_transactions() -> None:
    terminate = AwsCall(function="disruption", service="ec2", operation="TerminateInstances", region=REGION,
                        facts={"resources": [{"arn": arn("instance", "i-1"), "tags": OWNED}]})
    (check,) = authorizations(terminate)
    assert check.action == "ec2:TerminateInstances" and check.context["ec2:ResourceTag/carpool.dev/cluster"] == ["demo"]
    table = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/t"
    transact = AwsCall(function="x", service="dynamodb", operation="TransactWriteItems", region=REGION,
                       facts={"items": [("DeleteItem", table), ("UpdateItem", table)]})
    assert [c.action for c in authorizations(transact)] == ["dynamodb:DeleteItem", "dynamodb:UpdateItem"]
    unknown = AwsCall(function="x", service="ec2", operation="ModifyInstanceAttribute", region=REGION)
    assert [(c.action, c.resource) for c in authorizations(unknown)] == [("ec2:ModifyInstanceAttribute", "*")]


@pytest.fixture()
def local_env(monkeypatch: pytest.MonkeyPatch) -> Any:
    from carpool.adapters.aws import session

    for key, value in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_REGION": REGION,
                       "AWS_DEFAULT_REGION": REGION}.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    session.reset()
    yield session
    session.reset()


def test_the_recorder_attributes_requests_to_the_invoked_function_only(local_env: Any) -> None:
    recorder = RequestRecorder()
    recorder.install()
    client = local_env.client("dynamodb")
    with Stubber(client) as stub:
        for _ in range(3):
            stub.add_response("get_item", {})
        client.get_item(TableName="state", Key={"pk": {"S": "a"}})  # outside any invocation: not carpool's
        with recorder.invocation("registrar"):
            client.get_item(TableName="state", Key={"pk": {"S": "a"}})
            client.get_item(TableName="state", Key={"pk": {"S": "b"}})
    (call,) = recorder.calls.values()
    assert (call.function, call.service, call.operation, call.count) == ("registrar", "dynamodb", "GetItem", 2)
    assert [(c.action, c.resource) for c in authorizations(call)] == [
        ("dynamodb:GetItem", f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/state")
    ]
    recording = recorder.finish("s", "demo", REGION)
    assert recording.functions() == {"registrar"}
