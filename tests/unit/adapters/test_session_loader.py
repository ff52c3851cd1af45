"""carpool's botocore loader answers "is this service available?" per service, as botocore's full listing does."""

from __future__ import annotations

import botocore.loaders
import pytest
from botocore.exceptions import UnknownServiceError

from carpool.adapters.aws import session


@pytest.fixture(scope="module")
def loader() -> botocore.loaders.Loader:
    return session._core_session().get_component("data_loader")


@pytest.mark.parametrize("type_name", ["service-2", "endpoint-rule-set-1", "paginators-1"])
def test_membership_matches_botocores_full_listing(loader: botocore.loaders.Loader, type_name: str) -> None:
    reference = botocore.loaders.Loader(extra_search_paths=list(loader.search_paths[:1]))
    everything = reference.list_available_services(type_name)
    answered = loader.list_available_services(type_name)
    assert len(everything) > 300
    assert all(name in answered for name in everything)
    for name in ("nope", "ec2x", "", "../ec2", ".", "ec2/2016-11-15"):
        assert (name in answered) is (name in everything), name
    assert list(answered) == everything and len(answered) == len(everything) and answered[0] == everything[0]


def test_a_client_is_made_without_listing_every_service(loader: botocore.loaders.Loader) -> None:
    core = session._core_session()
    core.create_client("ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    cached = core.get_component("data_loader")._cache
    assert any(key[0] == "list_api_versions" for key in cached)
    assert not any(key[0] == "list_available_services" for key in cached)


def test_an_unknown_service_is_still_refused_by_name() -> None:
    core = session._core_session()
    with pytest.raises(UnknownServiceError) as info:
        core.create_client("no-such-service", region_name="us-east-1")
    assert "no-such-service" in str(info.value) and "ec2" in str(info.value)
