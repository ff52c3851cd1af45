from __future__ import annotations

from datetime import UTC, datetime

import pytest
from stand_ins import NOW, Term, image, nodeclass

from carpool import labels
from carpool.amifamily.family import NEURON, NVIDIA, STANDARD
from carpool.amis import AmiSelectionError, InMemoryAmiSource, family_of, resolve, term_filters
from carpool.requirements import DOES_NOT_EXIST, EXISTS, IN


def ops(ami) -> dict[str, tuple[str, tuple[str, ...]]]:  # type: ignore[no-untyped-def]
    return {k: (r.operator, r.order) for k, r in ami.requirements.items()}


def by_variant(amis) -> dict[tuple[str, str], str]:  # type: ignore[no-untyped-def]
    return {(a.arch, a.variant): a.id for a in amis}


# -- aliases ----------------------------------------------------------------------------------------
def test_bottlerocket_alias_resolves_every_variant_with_requirements(bottlerocket_source) -> None:  # type: ignore[no-untyped-def]
    amis = resolve(nodeclass(Term(alias="bottlerocket@latest")), "1.32", bottlerocket_source, now=NOW)
    assert by_variant(amis) == {
        ("amd64", STANDARD): "ami-std-x86",
        ("amd64", NEURON): "ami-std-x86",  # the x86_64 image ships the neuron driver
        ("arm64", STANDARD): "ami-std-arm",
        ("amd64", NVIDIA): "ami-nv-x86",
        ("arm64", NVIDIA): "ami-nv-arm",
    }
    std = next(a for a in amis if a.variant == STANDARD and a.arch == "amd64")
    assert ops(std) == {
        labels.ARCH: (IN, ("amd64",)),
        labels.INSTANCE_GPU_COUNT: (DOES_NOT_EXIST, ()),
        labels.INSTANCE_ACCELERATOR_COUNT: (DOES_NOT_EXIST, ()),
    }
    nv = next(a for a in amis if a.variant == NVIDIA and a.arch == "arm64")
    assert ops(nv) == {labels.ARCH: (IN, ("arm64",)), labels.INSTANCE_GPU_COUNT: (EXISTS, ())}
    neuron = next(a for a in amis if a.variant == NEURON)
    assert ops(neuron) == {labels.ARCH: (IN, ("amd64",)), labels.INSTANCE_ACCELERATOR_COUNT: (EXISTS, ())}
    assert std.source == "/aws/service/bottlerocket/aws-k8s-1.32/x86_64/latest/image_id"
    assert std.name == "bottlerocket-aws-k8s-1.32-x86_64-v1.32.0"


def test_missing_parameter_means_variant_absent(bottlerocket_source) -> None:  # type: ignore[no-untyped-def]
    del bottlerocket_source.parameters["/aws/service/bottlerocket/aws-k8s-1.32-nvidia/arm64/latest/image_id"]
    amis = resolve(nodeclass(Term(alias="bottlerocket@latest")), "1.32", bottlerocket_source, now=NOW)
    assert ("arm64", NVIDIA) not in by_variant(amis)
    assert len(amis) == 4


def test_bottlerocket_pinned_version_uses_trimmed_path() -> None:
    src = InMemoryAmiSource(
        images=[image("ami-old", "bottlerocket-aws-k8s-1.32-x86_64-v1.31.0")],
        parameters={"/aws/service/bottlerocket/aws-k8s-1.32/x86_64/1.31.0/image_id": "ami-old"},
    )
    amis = resolve(nodeclass(Term(alias="bottlerocket@v1.31.0")), "1.32", src, now=NOW)
    assert {a.id for a in amis} == {"ami-old"}


def test_al2023_pinned_version() -> None:
    base = "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023"
    src = InMemoryAmiSource(
        images=[
            image("ami-a", "amazon-eks-node-al2023-x86_64-standard-1.32-v20250101"),
            image("ami-n", "amazon-eks-node-al2023-x86_64-nvidia-1.32-v20250101"),
            image("ami-latest", "amazon-eks-node-al2023-x86_64-standard-1.32-v20250501"),
        ],
        parameters={
            f"{base}/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.32-v20250101/image_id": "ami-a",
            f"{base}/x86_64/nvidia/amazon-eks-node-al2023-x86_64-nvidia-1.32-v20250101/image_id": "ami-n",
            f"{base}/x86_64/standard/recommended/image_id": "ami-latest",
        },
    )
    pinned = resolve(nodeclass(Term(alias="al2023@v20250101")), "1.32", src, now=NOW)
    assert by_variant(pinned) == {("amd64", STANDARD): "ami-a", ("amd64", NVIDIA): "ami-n"}
    latest = resolve(nodeclass(Term(alias="al2023@latest")), "1.32", src, now=NOW)
    assert by_variant(latest) == {("amd64", STANDARD): "ami-latest"}


def test_al2_gpu_image_serves_nvidia_and_neuron() -> None:
    base = "/aws/service/eks/optimized-ami/1.30"
    src = InMemoryAmiSource(
        images=[image("ami-std", "amazon-eks-node-1.30-v1"), image("ami-gpu", "amazon-eks-gpu-node-1.30-v1"),
                image("ami-arm", "amazon-eks-arm64-node-1.30-v1", "arm64")],
        parameters={
            f"{base}/amazon-linux-2/recommended/image_id": "ami-std",
            f"{base}/amazon-linux-2-arm64/recommended/image_id": "ami-arm",
            f"{base}/amazon-linux-2-gpu/recommended/image_id": "ami-gpu",
        },
    )
    amis = resolve(nodeclass(Term(alias="al2@latest")), "1.30", src, now=NOW)
    assert by_variant(amis) == {
        ("amd64", STANDARD): "ami-std",
        ("arm64", STANDARD): "ami-arm",
        ("amd64", NVIDIA): "ami-gpu",
        ("amd64", NEURON): "ami-gpu",
    }


def test_windows_alias_requires_windows_os() -> None:
    path = "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.32/image_id"
    src = InMemoryAmiSource(images=[image("ami-win", "Windows_Server-2022-English-Core-EKS_Optimized-1.32")],
                            parameters={path: "ami-win"})
    (ami,) = resolve(nodeclass(Term(alias="windows2022@latest")), "1.32", src, now=NOW)
    assert ami.requirements[labels.OS].order == ("windows",)


def test_alias_with_no_published_image_is_an_error() -> None:
    with pytest.raises(AmiSelectionError, match="no AMI published"):
        resolve(nodeclass(Term(alias="al2023@latest")), "1.99", InMemoryAmiSource(), now=NOW)


def test_alias_must_be_alone() -> None:
    nc = nodeclass(Term(alias="al2023@latest"), Term(id="ami-1"))
    with pytest.raises(AmiSelectionError, match="only term"):
        resolve(nc, "1.32", InMemoryAmiSource(), now=NOW)


def test_no_terms_is_an_error() -> None:
    with pytest.raises(AmiSelectionError, match="amiSelectorTerms"):
        resolve(nodeclass(), "1.32", InMemoryAmiSource(), now=NOW)


# -- other terms ------------------------------------------------------------------------------------
def test_name_term_defaults_owners_to_self_and_amazon() -> None:
    filters, owners = term_filters(Term(name="my-ami-*"))
    assert owners == ["self", "amazon"]
    assert filters == [{"Name": "name", "Values": ["my-ami-*"]}]
    assert term_filters(Term(name="x", owner="123456789012"))[1] == ["123456789012"]
    # someone else's public image with a matching name is not picked up
    src = InMemoryAmiSource(images=[image("ami-theirs", "my-ami-1", owner_alias=None, owner_id="999")])
    assert resolve(nodeclass(Term(name="my-ami-*")), "1.32", src, now=NOW) == []


def test_tags_term_filters() -> None:
    filters, owners = term_filters(Term(tags={"team": "a, b", "golden": "*"}))
    assert owners == []
    assert filters == [{"Name": "tag-key", "Values": ["golden"]}, {"Name": "tag:team", "Values": ["a", "b"]}]
    src = InMemoryAmiSource(images=[
        image("ami-1", "golden-1", tags={"team": "b", "golden": "yes"}),
        image("ami-2", "golden-2", tags={"team": "c", "golden": "yes"}),
    ])
    assert [a.id for a in resolve(nodeclass(Term(tags={"team": "a,b", "golden": "*"})), "1.32", src, now=NOW)] == ["ami-1"]


def test_name_matches_newest_non_deprecated_per_requirement_set() -> None:
    src = InMemoryAmiSource(images=[
        image("ami-old", "team-node-1", created="2024-01-01T00:00:00Z"),
        image("ami-new", "team-node-2", created="2025-02-01T00:00:00Z"),
        image("ami-newest-deprecated", "team-node-3", created="2025-05-01T00:00:00Z",
              deprecation="2025-05-15T00:00:00Z"),
        image("ami-arm-deprecated", "team-node-arm", "arm64", deprecation="2025-01-01T00:00:00Z"),
        image("ami-future-deprecation", "team-node-gpu", created="2024-06-01T00:00:00Z",
              deprecation="2027-06-01T00:00:00Z"),
    ], account_id="137112412989")
    amis = resolve(nodeclass(Term(name="team-node-*")), "1.32", src, now=NOW)
    got = {(a.arch, a.variant): (a.id, a.deprecated) for a in amis}
    assert got == {
        ("amd64", STANDARD): ("ami-new", False),  # newer deprecated image loses to a live one
        ("arm64", STANDARD): ("ami-arm-deprecated", True),  # deprecated only because nothing else fits
        ("amd64", NVIDIA): ("ami-future-deprecation", False),  # deprecation in the future: still live
    }
    assert amis[-1].id == "ami-arm-deprecated"  # deprecated sorts last


def test_deprecation_is_judged_at_now() -> None:
    src = InMemoryAmiSource(images=[image("ami-1", "x", deprecation="2025-06-01T00:00:00Z")])
    assert resolve(nodeclass(Term(id="ami-1")), "1.32", src, now=datetime(2025, 5, 31, tzinfo=UTC))[0].deprecated is False
    assert resolve(nodeclass(Term(id="ami-1")), "1.32", src, now=NOW)[0].deprecated is True


@pytest.mark.parametrize(
    ("name", "variant"),
    [("my-gpu-image", NVIDIA), ("eks-NVIDIA-node", NVIDIA), ("eks-neuron-node", NEURON), ("plain", STANDARD)],
)
def test_variant_is_read_from_the_name_for_non_alias_terms(name: str, variant: str) -> None:
    src = InMemoryAmiSource(images=[image("ami-1", name)])
    (ami,) = resolve(nodeclass(Term(id="ami-1")), "1.32", src, now=NOW)
    assert ami.variant == variant
    assert ami.source == "id ami-1"


def test_ssm_parameter_term() -> None:
    src = InMemoryAmiSource(images=[image("ami-7", "custom-arm", "arm64")], parameters={"/my/ami": "ami-7"})
    (ami,) = resolve(nodeclass(Term(ssm_parameter="/my/ami")), "1.32", src, now=NOW)
    assert (ami.id, ami.arch) == ("ami-7", "arm64")
    assert resolve(nodeclass(Term(ssm_parameter="/missing")), "1.32", src, now=NOW) == []


def test_unsupported_architecture_is_skipped() -> None:
    src = InMemoryAmiSource(images=[image("ami-mac", "mac", "x86_64_mac"), image("ami-ok", "ok")])
    assert [a.id for a in resolve(nodeclass(Term(name="*")), "1.32", src, now=NOW)] == ["ami-ok"]


def test_terms_are_or_and_dicts_work_too() -> None:
    src = InMemoryAmiSource(images=[image("ami-1", "a"), image("ami-2", "b", "arm64")])
    nc = nodeclass({"id": "ami-1"}, {"ssmParameter": None, "name": "b"})  # type: ignore[arg-type]
    assert {a.id for a in resolve(nc, "1.32", src, now=NOW)} == {"ami-1", "ami-2"}


def test_family_of() -> None:
    assert family_of(nodeclass(Term(alias="Bottlerocket@latest"))) == "bottlerocket"
    assert family_of(nodeclass(Term(id="ami-1"), ami_family="AL2023")) == "al2023"
    with pytest.raises(AmiSelectionError, match="amiFamily"):
        family_of(nodeclass(Term(id="ami-1")))
