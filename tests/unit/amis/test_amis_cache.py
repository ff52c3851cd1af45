from __future__ import annotations

from typing import Any

import pytest

from carpool.amis import CachedAmiSource, TtlCache


class CountingSource:
    """Stands in for AWS: answers from dicts and counts the calls a cache should save."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.params = {"/p": "ami-1"}
        self.images = [{"ImageId": "ami-1", "Name": "one", "Architecture": "x86_64"}]

    def get_parameter(self, path: str) -> str | None:
        self.calls.append(("ssm", path))
        return self.params.get(path)

    def describe_images(self, image_ids=None, filters=None, owners=None) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
        self.calls.append(("ec2", (image_ids, filters, owners)))
        return [dict(i) for i in self.images if image_ids is None or i["ImageId"] in image_ids]


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_ttl_is_honoured_with_an_injected_clock() -> None:
    src, clock = CountingSource(), Clock()
    cached = CachedAmiSource(src, ttl_seconds=300, clock=clock)
    assert cached.get_parameter("/p") == "ami-1"
    src.params["/p"] = "ami-2"  # AWS publishes a new image
    clock.t += 299
    assert cached.get_parameter("/p") == "ami-1"  # still within the TTL
    assert len(src.calls) == 1
    clock.t += 1
    assert cached.get_parameter("/p") == "ami-2"  # expired exactly at the TTL
    assert len(src.calls) == 2


def test_missing_parameters_are_cached_too() -> None:
    src, clock = CountingSource(), Clock()
    cached = CachedAmiSource(src, ttl_seconds=60, clock=clock)
    assert cached.get_parameter("/nope") is None
    assert cached.get_parameter("/nope") is None
    assert src.calls == [("ssm", "/nope")]


def test_describe_images_keyed_by_arguments_and_copied_out() -> None:
    src, clock = CountingSource(), Clock()
    cached = CachedAmiSource(src, ttl_seconds=60, clock=clock)
    first = cached.describe_images(image_ids=["ami-1"])
    first[0]["Name"] = "poisoned"
    again = cached.describe_images(image_ids=["ami-1"])
    assert again[0]["Name"] == "one"
    assert len(src.calls) == 1
    cached.describe_images(filters=[{"Name": "name", "Values": ["o*"]}], owners=["self"])
    assert len(src.calls) == 2


def test_ttl_must_be_positive() -> None:
    with pytest.raises(ValueError, match="ttl"):
        TtlCache(0)
