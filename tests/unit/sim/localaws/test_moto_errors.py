"""Local AWS's error answers find the same service names with one table (`carpool.sim.localaws.moto_errors`)."""

from __future__ import annotations

import pkgutil
import threading
from typing import Any

import moto
import pytest
from botocore.exceptions import ClientError
from moto.core import utils

from carpool.sim.localaws import moto_errors
from carpool.sim.localaws.motofast import faster_moto

#: moto packages whose service name has hyphens moto dropped, a few plain ones, the ones carpool uses
_PACKAGES = ["ec2instanceconnect", "resourcegroupstaggingapi", "cognitoidp", "iotdata", "sagemakerruntime",
             "ec2", "dynamodb", "events", "sqs", "ssm", "iam", "s3", "nosuchservice"]


def test_moto_packages_map_to_the_services_moto_maps_them_to() -> None:
    """moto's original builds its table again for every package it was not asked about before (about
    30 ms each), so a sample: packages whose service names have hyphens, and carpool's services."""
    available = {m.name for m in pkgutil.iter_modules(moto.__path__) if m.ispkg}
    packages = [p for p in _PACKAGES if p in available or p == "nosuchservice"]
    assert len(packages) >= 10
    original = utils.service_name_from_moto_package_name
    expected = {name: original(name) for name in packages}
    with faster_moto():
        assert moto_errors.ServiceNamesOnce.installed()
        assert {name: utils.service_name_from_moto_package_name(name) for name in packages} == expected
    assert expected["resourcegroupstaggingapi"] == "resourcegroupstaggingapi"
    assert expected["ec2instanceconnect"] == "ec2-instance-connect"


def test_concurrent_first_errors_list_botocore_services_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.session import Session

    listed: list[int] = []
    available = Session.get_available_services

    def counted(self: Any) -> Any:
        listed.append(1)
        return available(self)

    monkeypatch.setattr(Session, "get_available_services", counted)
    monkeypatch.setattr(moto_errors, "_table", None)
    start = threading.Barrier(6)
    found: list[str] = []

    def first_error() -> None:
        start.wait()
        found.append(moto_errors.service_name_from_moto_package_name("ec2instanceconnect"))

    threads = [threading.Thread(target=first_error) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert found == ["ec2-instance-connect"] * 6
    assert len(listed) == 1


def test_an_error_answer_still_names_its_code(moto_in_process: None) -> None:
    import boto3

    ec2 = boto3.client("ec2", region_name="us-east-1")
    request = {"LaunchTemplateName": "t", "LaunchTemplateData": {"ImageId": "ami-12345678"}}
    with faster_moto():
        ec2.create_launch_template(**request)
        with pytest.raises(ClientError) as raised:
            ec2.create_launch_template(**request)
    assert raised.value.response["Error"]["Code"] == "InvalidLaunchTemplateName.AlreadyExistsException"
