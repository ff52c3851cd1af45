"""The seed bug: `bottlerocket@...` resolves to four AMIs and the first one went to every instance type."""

from __future__ import annotations

import itertools

import pytest
from stand_ins import NOW, Term, itype, nodeclass

from carpool import labels
from carpool.amifamily.family import NVIDIA, STANDARD
from carpool.amis import (
    ResolvedAmi,
    ami_requirements,
    explain_mapping,
    group_by_ami,
    map_instance_types,
    resolve,
)


@pytest.fixture
def br_amis(bottlerocket_source) -> list[ResolvedAmi]:  # type: ignore[no-untyped-def]
    return resolve(nodeclass(Term(alias="bottlerocket@latest")), "1.32", bottlerocket_source, now=NOW)


def test_four_ami_bottlerocket_mapping(br_amis, fleet_types) -> None:  # type: ignore[no-untyped-def]
    got = {k: v.id for k, v in map_instance_types(br_amis, fleet_types.values()).items()}
    assert got == {
        "m5.large": "ami-std-x86",  # non-GPU x86 -> standard x86
        "m6g.large": "ami-std-arm",  # non-GPU arm64 -> standard arm64
        "g5.xlarge": "ami-nv-x86",  # GPU x86 -> nvidia x86
        "g5g.xlarge": "ami-nv-arm",  # GPU arm64 -> nvidia arm64
        "inf2.xlarge": "ami-std-x86",  # neuron: Bottlerocket's x86_64 image carries the neuron driver
        "trn1.2xlarge": "ami-std-x86",
    }


def test_first_ami_regression_every_input_order(br_amis, fleet_types) -> None:  # type: ignore[no-untyped-def]
    """The nvidia images are the newest and, in some orders, listed first: neither position nor age may
    put an nvidia image on m5.large or a standard image on g5.xlarge."""
    distinct = {(a.arch, a.variant): a for a in br_amis}
    four = [distinct[k] for k in (("amd64", NVIDIA), ("arm64", NVIDIA), ("amd64", STANDARD), ("arm64", STANDARD))]
    assert four[0].created > four[2].created  # nvidia really is newer: a "newest wins" bug would show
    for order in itertools.permutations(four):
        mapping = map_instance_types(order, fleet_types.values())
        assert mapping["m5.large"].variant == STANDARD and mapping["m5.large"].arch == "amd64", order
        assert mapping["m6g.large"].variant == STANDARD and mapping["m6g.large"].arch == "arm64", order
        assert mapping["g5.xlarge"].variant == NVIDIA and mapping["g5.xlarge"].arch == "amd64", order
    # and what the bug did, for the record: the first AMI of this order is an nvidia one
    assert four[0].variant == NVIDIA


def test_strict_nvidia_only_leaves_non_gpu_types_unoffered(br_amis, fleet_types) -> None:  # type: ignore[no-untyped-def]
    nvidia_only = [a for a in br_amis if a.variant == NVIDIA]
    mapping = map_instance_types(nvidia_only, fleet_types.values())
    assert set(mapping) == {"g5.xlarge", "g5g.xlarge"}
    why = explain_mapping(nvidia_only, fleet_types.values())
    assert set(why) == {"m5.large", "m6g.large", "inf2.xlarge", "trn1.2xlarge"}
    reasons = {r.ami.id: r.reason for r in why["m5.large"]}
    assert "instance-gpu-count" in reasons["ami-nv-x86"] and "not defined" in reasons["ami-nv-x86"]
    # a GPU type of the other architecture is rejected on arch
    x86_nvidia = [a for a in nvidia_only if a.arch == "amd64"]
    (rejection,) = explain_mapping(x86_nvidia, [fleet_types["g5g.xlarge"]])["g5g.xlarge"]
    assert labels.ARCH in rejection.reason


def test_explain_is_empty_for_mapped_types_and_lists_every_ami(br_amis, fleet_types) -> None:  # type: ignore[no-untyped-def]
    assert explain_mapping(br_amis, fleet_types.values()) == {}
    lonely = itype("p5.48xlarge", "riscv64", gpus=8)
    why = explain_mapping(br_amis, [lonely])
    assert [r.ami.id for r in why["p5.48xlarge"]] == [a.id for a in sorted(br_amis, key=lambda a: (a.deprecated, -a.created.timestamp(), a.id))]
    assert explain_mapping([], [lonely]) == {"p5.48xlarge": []}


def _ami(ami_id: str, created: str, deprecated: bool = False, arch: str = "amd64") -> ResolvedAmi:
    return ResolvedAmi(ami_id, ami_id, arch, STANDARD, ami_requirements(arch, STANDARD), created, deprecated)


def test_newest_compatible_wins_regardless_of_order() -> None:
    old, new = _ami("ami-old", "2024-01-01T00:00:00Z"), _ami("ami-new", "2025-01-01T00:00:00Z")
    for amis in ([old, new], [new, old]):
        assert map_instance_types(amis, [itype("m5.large")])["m5.large"].id == "ami-new"


def test_live_image_beats_newer_deprecated_one() -> None:
    live, dep = _ami("ami-live", "2024-01-01T00:00:00Z"), _ami("ami-dep", "2025-01-01T00:00:00Z", deprecated=True)
    assert map_instance_types([dep, live], [itype("m5.large")])["m5.large"].id == "ami-live"
    assert map_instance_types([dep], [itype("m5.large")])["m5.large"].id == "ami-dep"


def test_group_by_ami(br_amis, fleet_types) -> None:  # type: ignore[no-untyped-def]
    groups = group_by_ami(map_instance_types(br_amis, fleet_types.values()))
    assert groups["ami-std-x86"] == ["inf2.xlarge", "m5.large", "trn1.2xlarge"]
    assert groups["ami-nv-arm"] == ["g5g.xlarge"]
