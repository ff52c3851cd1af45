"""AMI parameters read together: one request for an alias's several parameters, where the source can."""

from __future__ import annotations

from typing import Any

from carpool.adapters.aws.ssm import GET_PARAMETERS_MAX, SsmParameters
from carpool.amis import CachedAmiSource
from carpool.amis.model import parameters


class OneAtATime:
    """A source with `get_parameter` only (the protocol's minimum)."""

    def __init__(self, params: dict[str, str]) -> None:
        self.params = params
        self.calls: list[str] = []

    def get_parameter(self, path: str) -> str | None:
        self.calls.append(path)
        return self.params.get(path)

    def describe_images(self, image_ids=None, filters=None, owners=None) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
        return []


class Batched(OneAtATime):
    def __init__(self, params: dict[str, str]) -> None:
        super().__init__(params)
        self.batches: list[list[str]] = []

    def get_parameters(self, paths: list[str]) -> dict[str, str | None]:
        self.batches.append(list(paths))
        return {p: self.params[p] for p in paths if p in self.params}


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_parameters_use_one_request_when_the_source_reads_several() -> None:
    src = Batched({"/a": "ami-a", "/b": "ami-b"})
    assert parameters(src, ["/a", "/b", "/missing", "/a"]) == {"/a": "ami-a", "/b": "ami-b", "/missing": None}
    assert src.batches == [["/a", "/b", "/missing"]]
    assert src.calls == []


def test_parameters_fall_back_to_one_read_each() -> None:
    src = OneAtATime({"/a": "ami-a"})
    assert parameters(src, ["/a", "/b"]) == {"/a": "ami-a", "/b": None}
    assert src.calls == ["/a", "/b"]


def test_the_cache_asks_only_for_what_it_lacks_and_keeps_missing_ones() -> None:
    src, clock = Batched({"/a": "ami-a", "/b": "ami-b"}), Clock()
    cached = CachedAmiSource(src, ttl_seconds=300, clock=clock)
    assert cached.get_parameter("/a") == "ami-a"  # one at a time, then cached
    assert cached.get_parameters(["/a", "/b", "/none"]) == {"/a": "ami-a", "/b": "ami-b", "/none": None}
    assert src.batches == [["/b", "/none"]]
    src.params["/b"] = "ami-b2"
    assert cached.get_parameters(["/b", "/none"]) == {"/b": "ami-b", "/none": None}  # both cached, None too
    assert cached.get_parameter("/none") is None
    assert src.batches == [["/b", "/none"]] and src.calls == ["/a"]
    clock.t += 300
    assert cached.get_parameters(["/b"]) == {"/b": "ami-b2"}  # expired: asked again
    assert src.batches[-1] == ["/b"]


class FakeSsm:
    """SSM's GetParameters as documented: at most 10 names, unknown ones under InvalidParameters."""

    def __init__(self, params: dict[str, str]) -> None:
        self.params = params
        self.requests: list[list[str]] = []

    def get_parameters(self, Names: list[str]) -> dict[str, Any]:  # noqa: N803 (boto3's argument name)
        assert len(Names) <= GET_PARAMETERS_MAX
        self.requests.append(list(Names))
        return {"Parameters": [{"Name": n, "Value": self.params[n]} for n in Names if n in self.params],
                "InvalidParameters": [n for n in Names if n not in self.params]}


def test_ssm_reads_uncached_parameters_in_chunks_of_ten() -> None:
    names = [f"/p/{i}" for i in range(23)]
    ssm = FakeSsm({n: f"ami-{i}" for i, n in enumerate(names) if i % 2 == 0})
    clock = Clock()
    reader = SsmParameters(client=ssm, clock=clock)
    found = reader.get_parameters(names)
    assert found == {n: (f"ami-{i}" if i % 2 == 0 else None) for i, n in enumerate(names)}
    assert [len(r) for r in ssm.requests] == [10, 10, 3]
    assert reader.get_parameters(names[:5]) == {n: found[n] for n in names[:5]}  # cached, None included
    assert reader.get_parameter(names[1]) is None
    assert len(ssm.requests) == 3
