"""Local AWS's own sessions read botocore's data once and answer as separate sessions do (`carpool.sim.localaws.shared_models`)."""

from __future__ import annotations

import threading
from typing import Any

import boto3
import botocore.session
import pytest

from carpool.sim.localaws import shared_models
from carpool.sim.localaws.moto_patches import installed
from carpool.sim.localaws.shared_models import LocalSession, SharedLoadersWhileImporting, SharedRegionsSession


def _loader(session: Any) -> Any:
    return session._session.get_component("data_loader")


def test_local_sessions_share_one_loader_without_repeating_its_search_paths() -> None:
    first, second = LocalSession(), LocalSession()
    assert _loader(first) is _loader(second)
    paths = _loader(first).search_paths
    assert len(paths) == len(set(paths))
    assert _loader(boto3.Session()) is not _loader(first)  # anybody else's session keeps its own


def test_a_local_session_answers_as_a_session_of_its_own() -> None:
    local, own = LocalSession(), boto3.Session()
    for partition in ("aws", "aws-us-gov", "aws-cn"):
        assert local.get_available_regions("ec2", partition) == own.get_available_regions("ec2", partition)
    assert local.get_available_partitions() == own.get_available_partitions()
    made, reference = (s.client("dynamodb", region_name="us-east-1") for s in (local, own))
    assert made.meta.service_model.operation_names == reference.meta.service_model.operation_names
    assert made.meta.endpoint_url == reference.meta.endpoint_url


@pytest.fixture
def sharing_free() -> None:
    if SharedLoadersWhileImporting.installed():
        pytest.skip("held by a running LocalAws")


def test_sessions_share_the_loader_only_on_the_importing_thread_inside_the_block(sharing_free: None) -> None:
    shared = shared_models.shared_loader(botocore.session.get_session().get_config_variable("data_path"))
    elsewhere: list[Any] = []
    with installed(SharedLoadersWhileImporting):
        outside = _loader(boto3.Session())
        with SharedLoadersWhileImporting.importing():
            inside = [_loader(boto3.Session()) for _ in range(3)]
            thread = threading.Thread(target=lambda: elsewhere.append(_loader(boto3.Session())))
            thread.start()
            thread.join()
        after = _loader(boto3.Session())
    assert all(loader is shared for loader in inside)
    assert outside is not shared and after is not shared and elsewhere[0] is not shared
    assert len(shared.search_paths) == len(set(shared.search_paths))  # boto3's path added once, not per session


@pytest.fixture
def regions_free() -> None:
    if SharedRegionsSession.installed():
        pytest.skip("held by a running LocalAws")


def test_moto_s_backends_list_the_same_regions_through_a_local_session(regions_free: None) -> None:
    from moto.core.base_backend import AccountSpecificBackend

    def regions(service: str) -> list[str]:
        return AccountSpecificBackend._generate_regions.__wrapped__(None, service)  # type: ignore[attr-defined]

    services = ("ec2", "dynamodb", "sqs", "events", "ssm", "sts")
    original = {s: regions(s) for s in services}
    with installed(SharedRegionsSession):
        session = AccountSpecificBackend.get_session()
        patched = {s: regions(s) for s in services}
        assert AccountSpecificBackend.get_session() is session
    assert isinstance(session, LocalSession)
    assert patched == original
    assert "us-east-1" in original["ec2"] and "cn-north-1" in original["ec2"]
