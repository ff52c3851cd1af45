"""The cut-down service models carpool's session builds EC2, SSM and DynamoDB clients from."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path

import botocore.loaders
import botocore.session
from botocore import xform_name

from carpool.adapters.aws import service_models, session

LIBRARY = Path(service_models.__file__).resolve().parents[2]
#: the simulation builds its own boto3 clients (full models) and never uses carpool's session
NOT_ON_THE_SESSION = ("sim",)
#: operation names that are also names of carpool's own methods (the Cluster port's `list_nodes`)
SAME_NAME_NOT_A_CALL = {"ssm": {"ListNodes"}}


def test_shipped_models_are_the_installed_botocore_models_trimmed():
    for relative, text in service_models.expected().items():
        shipped = service_models.DATA_PATH / relative
        assert shipped.is_file(), f"{relative} missing: run python -m carpool.adapters.aws.service_models"
        assert shipped.read_text() == text, f"{relative} is stale: run python -m carpool.adapters.aws.service_models"


def _calls_in_library() -> set[str]:
    """Every `.name(` and `get_paginator("name")` in the library code that builds clients from the session."""
    names: set[str] = set()
    for file in LIBRARY.rglob("*.py"):
        if file.relative_to(LIBRARY).parts[0] in NOT_ON_THE_SESSION:
            continue
        text = file.read_text()
        names.update(re.findall(r"\.([a-z][a-z0-9_]*)\(", text))
        names.update(re.findall(r"get_paginator\(\s*[\"']([a-z0-9_]+)[\"']", text))
    return names


def test_every_operation_the_library_calls_is_in_the_trimmed_model():
    loader = botocore.loaders.create_loader()
    calls = _calls_in_library()
    for service, kept in service_models.OPERATIONS.items():
        full = loader.load_service_model(service, "service-2")
        called = {op for op in full["operations"] if xform_name(op) in calls}
        assert called - set(kept) - SAME_NAME_NOT_A_CALL.get(service, set()) == set(), f"{service}: add these to service_models.OPERATIONS"


def test_every_service_the_library_makes_a_client_of_keeps_its_endpoint_data():
    made = set()
    for file in LIBRARY.rglob("*.py"):
        if file.relative_to(LIBRARY).parts[0] not in NOT_ON_THE_SESSION:
            made.update(re.findall(r"session\.client\(\s*[\"']([a-z0-9-]+)[\"']", file.read_text()))
    assert {"ec2", "ssm", "dynamodb", "pricing"} <= made  # the search above finds them, line breaks included
    assert made <= set(service_models.ENDPOINT_SERVICES)
    shipped = json.loads((service_models.DATA_PATH / "endpoints.json").read_text())
    aws = next(p for p in shipped["partitions"] if p["partition"] == "aws")
    assert set(aws["services"]) == {*service_models.ENDPOINT_SERVICES, "api.pricing"} - {"pricing"}
    assert "us-east-1" in aws["regions"]


def test_the_check_above_sees_the_calls_it_must():
    calls = _calls_in_library()
    assert {"create_fleet", "describe_subnets", "transact_write_items", "get_parameter"} <= calls


def test_session_clients_use_the_trimmed_models_and_other_services_the_full_ones(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    session.reset()
    try:
        for service, kept in service_models.OPERATIONS.items():
            model = session.client(service, region="us-east-1").meta.service_model
            assert sorted(model.operation_names) == sorted(kept)
            for name in kept:  # every shape an operation reaches resolves
                op = model.operation_model(name)
                _walk(op.input_shape)
                _walk(op.output_shape)
        assert "ListQueues" in session.client("sqs", region="us-east-1").meta.service_model.operation_names
    finally:
        session.reset()


def test_trimmed_client_builds_the_same_request_as_a_full_one():
    kwargs = {"Type": "instant", "ClientToken": "token",
              "TargetCapacitySpecification": {"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "on-demand"},
              "LaunchTemplateConfigs": [{"LaunchTemplateSpecification": {"LaunchTemplateName": "carpool/lt",
                                                                         "Version": "$Latest"},
                                         "Overrides": [{"InstanceType": "m5.large", "SubnetId": "subnet-1"}]}]}
    trimmed, full = _sent_body("ec2", "create_fleet", kwargs, trimmed=True), _sent_body("ec2", "create_fleet", kwargs)
    assert trimmed == full
    assert "Action=CreateFleet" in str(trimmed)


def _sent_body(service: str, method: str, kwargs: dict, trimmed: bool = False) -> object:
    """The body a client of `service` would send for `method(**kwargs)` (stopped before it is sent)."""
    core = botocore.session.Session()
    if trimmed:
        core.get_component("data_loader").search_paths.insert(0, str(service_models.DATA_PATH))
    client = core.create_client(service, region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b")
    sent: list[object] = []

    def capture(request, **_):
        sent.append(request.body)
        raise _Sent

    client.meta.events.register(f"before-send.{service}", capture)
    with contextlib.suppress(_Sent):
        getattr(client, method)(**kwargs)
    return sent[0]


class _Sent(Exception):
    pass


def _walk(shape, seen=None):
    seen = set() if seen is None else seen
    if shape is None or shape.name in seen:
        return
    seen.add(shape.name)
    for member in getattr(shape, "members", {}).values():
        _walk(member, seen)
    for attr in ("member", "key", "value"):
        _walk(getattr(shape, attr, None), seen)
