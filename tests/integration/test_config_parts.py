"""A config well past one SSM parameter (200 NodePools) stored in parts and read back by the functions'
reader against local AWS (moto's SSM): whole, within a minute of a change, and safe against a deploy
caught half-way."""

from __future__ import annotations

from typing import Any

import pytest
from carpool_env import CLUSTER, manifests, nodeclass, nodepool

from carpool import config_parts
from carpool.adapters.aws.config import DEFAULT_MAX_AGE_SECONDS, SsmConfigText
from carpool.api.loader import load
from carpool.sim.localaws.config_store import write_config_text
from carpool.sim.localaws.server import LocalAws


class Clock:
    def __init__(self) -> None:
        from datetime import UTC, datetime

        self.now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> Any:
        return self.now

    def advance(self, seconds: float) -> None:
        from datetime import timedelta

        self.now += timedelta(seconds=seconds)


def big_config(pools: int = 200, marker: str = "a") -> str:
    docs = [
        nodepool(f"team-{marker}-{i:03d}", nodeclass=f"class-{i % 10}",
                 requirements={"karpenter.k8s.aws/instance-category": ["c", "m", "r"],
                               "karpenter.sh/capacity-type": ["spot", "on-demand"],
                               "topology.kubernetes.io/zone": ["us-east-1a", "us-east-1b"]},
                 limits={"cpu": str(100 + i), "memory": f"{400 + i}Gi"},
                 disruption={"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": f"{i % 7 + 1}m"})
        for i in range(pools)
    ]
    return manifests(*docs, *[nodeclass(f"class-{i}", cluster=CLUSTER) for i in range(10)])


def test_200_nodepools_are_stored_in_parts_and_read_back_whole(local_aws: LocalAws) -> None:
    text = big_config()
    assert len(text.encode()) > 10 * config_parts.INLINE_MAX_BYTES  # well past one parameter
    name = local_aws.put_config(text)
    ssm: Any = local_aws.client("ssm")
    pointer = config_parts.pointer_of(ssm.get_parameter(Name=name)["Parameter"]["Value"])
    assert pointer is not None and 1 < pointer.parts < 20  # compressed: a handful of parameters
    reader = SsmConfigText(name)
    assert reader.read() == text
    assert len(load(reader.read()).nodepools) == 200


def test_a_change_reaches_the_reader_within_a_minute_and_smaller_configs_shrink_back(local_aws: LocalAws) -> None:
    clock = Clock()
    name = local_aws.put_config(big_config(marker="a"))
    reader = SsmConfigText(name, clock=clock)
    assert "team-a-000" in reader.read()
    local_aws.put_config(big_config(marker="b"))
    clock.advance(DEFAULT_MAX_AGE_SECONDS - 1)
    assert "team-a-000" in reader.read()  # still cached
    clock.advance(1)
    assert "team-b-000" in reader.read()  # a minute after the change
    small = big_config(pools=2, marker="c")
    local_aws.put_config(small)
    clock.advance(DEFAULT_MAX_AGE_SECONDS)
    assert reader.read() == small  # back in the index itself
    ssm: Any = local_aws.client("ssm")
    with pytest.raises(ssm.exceptions.ParameterNotFound):
        ssm.get_parameter(Name=config_parts.part_name(name, 0))  # the old parts are gone


def test_a_deploy_caught_half_way_keeps_the_last_good_config(local_aws: LocalAws) -> None:
    clock = Clock()
    name = local_aws.put_config(big_config(marker="a"))
    reader = SsmConfigText(name, clock=clock)
    before = reader.read()
    index, parts = config_parts.encode(big_config(marker="b"))
    ssm: Any = local_aws.client("ssm")
    ssm.put_parameter(Name=name, Value=index, Type="String", Overwrite=True)  # the index is new, a part is old
    ssm.put_parameter(Name=config_parts.part_name(name, 1), Value=parts[1], Type="String", Overwrite=True)
    clock.advance(DEFAULT_MAX_AGE_SECONDS)
    assert reader.read() == before
    write_config_text(ssm, name, big_config(marker="b"))  # the deploy completes
    assert "team-b-000" in reader.read()  # read again at once: the half-way answer was not cached


def test_a_reader_that_never_read_a_whole_config_says_why(local_aws: LocalAws) -> None:
    name = local_aws.put_config(big_config())
    ssm: Any = local_aws.client("ssm")
    ssm.delete_parameter(Name=config_parts.part_name(name, 0))
    with pytest.raises(config_parts.ConfigPartsError, match="config parts missing"):
        SsmConfigText(name).read()


def test_a_part_not_yet_allowed_keeps_the_last_good_config(local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch) -> None:
    """A deploy that adds a part updates the index before every function's policy names the new part."""
    from botocore.exceptions import ClientError

    clock = Clock()
    name = local_aws.put_config(big_config(marker="a"))
    reader = SsmConfigText(name, clock=clock)
    before = reader.read()
    local_aws.put_config(big_config(pools=400, marker="b"))
    client = reader.provider.client

    def denied(**_: Any) -> Any:
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not authorized"}}, "GetParameters")

    monkeypatch.setattr(client, "get_parameters", denied)
    clock.advance(DEFAULT_MAX_AGE_SECONDS)
    assert reader.read() == before
    monkeypatch.undo()  # the policy now names it
    assert "team-b-399" in reader.read()
