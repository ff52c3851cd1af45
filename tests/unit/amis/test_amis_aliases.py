from __future__ import annotations

import pytest

from carpool.amifamily.family import NEURON, NVIDIA, STANDARD
from carpool.amis import AmiSelectionError, alias_paths, parse_alias


def paths(alias: str, k: str = "1.32") -> list[str]:
    return [p.path for p in alias_paths(parse_alias(alias), k)]


def test_al2023_latest_enumerates_every_variant() -> None:
    base = "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023"
    assert paths("al2023@latest") == [
        f"{base}/x86_64/standard/recommended/image_id",
        f"{base}/x86_64/nvidia/recommended/image_id",
        f"{base}/x86_64/neuron/recommended/image_id",
        f"{base}/arm64/standard/recommended/image_id",
        f"{base}/arm64/nvidia/recommended/image_id",
    ]


def test_al2023_pinned_replaces_recommended() -> None:
    got = paths("al2023@v20250203")
    assert got[0] == (
        "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/"
        "amazon-eks-node-al2023-x86_64-standard-1.32-v20250203/image_id"
    )
    assert got[4].endswith("/arm64/nvidia/amazon-eks-node-al2023-arm64-nvidia-1.32-v20250203/image_id")


def test_bottlerocket_latest_and_pinned_trim_the_v() -> None:
    assert paths("bottlerocket@latest") == [
        "/aws/service/bottlerocket/aws-k8s-1.32/x86_64/latest/image_id",
        "/aws/service/bottlerocket/aws-k8s-1.32/arm64/latest/image_id",
        "/aws/service/bottlerocket/aws-k8s-1.32-nvidia/x86_64/latest/image_id",
        "/aws/service/bottlerocket/aws-k8s-1.32-nvidia/arm64/latest/image_id",
    ]
    assert paths("bottlerocket@v1.32.0") == paths("bottlerocket@1.32.0")
    assert paths("bottlerocket@v1.32.0")[2] == "/aws/service/bottlerocket/aws-k8s-1.32-nvidia/x86_64/1.32.0/image_id"


def test_bottlerocket_variants_per_path() -> None:
    got = {(p.arch, p.variants) for p in alias_paths(parse_alias("bottlerocket@latest"), "1.32")}
    assert got == {("amd64", (STANDARD, NEURON)), ("arm64", (STANDARD,)), ("amd64", (NVIDIA,)), ("arm64", (NVIDIA,))}


def test_al2_paths_latest_and_pinned() -> None:
    base = "/aws/service/eks/optimized-ami/1.29"
    assert paths("al2@latest", "1.29") == [
        f"{base}/amazon-linux-2/recommended/image_id",
        f"{base}/amazon-linux-2-arm64/recommended/image_id",
        f"{base}/amazon-linux-2-gpu/recommended/image_id",
    ]
    assert paths("al2@v20240807", "1.29") == [
        f"{base}/amazon-linux-2/amazon-eks-node-1.29-v20240807/image_id",
        f"{base}/amazon-linux-2-arm64/amazon-eks-arm64-node-1.29-v20240807/image_id",
        f"{base}/amazon-linux-2-gpu/amazon-eks-gpu-node-1.29-v20240807/image_id",
    ]


def test_windows_latest_only() -> None:
    assert paths("windows2022@latest") == [
        "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.32/image_id"
    ]
    assert paths("windows2019@latest", "1.31") == [
        "/aws/service/ami-windows-latest/Windows_Server-2019-English-Core-EKS_Optimized-1.31/image_id"
    ]
    with pytest.raises(AmiSelectionError, match="only @latest"):
        parse_alias("windows2022@v1")


@pytest.mark.parametrize("bad", ["al2023", "ubuntu@latest", "@latest", "al2023@"])
def test_bad_aliases_are_named(bad: str) -> None:
    with pytest.raises(AmiSelectionError, match="alias"):
        parse_alias(bad)
