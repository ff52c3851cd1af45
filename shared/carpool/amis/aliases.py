"""`amiSelectorTerms[].alias` (`family@version`) to the SSM parameters that name each image variant.

An alias is not one image: it is a family of images published side by side (per architecture, plain and
accelerated). We enumerate every path the family publishes and record, per path, which architecture
and variant(s) it stands for, because DescribeImages alone cannot tell an nvidia build from a plain one.
Paths follow reference.md section 4 and aws/karpenter-provider-aws pkg/providers/amifamily/*.go.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from carpool.amis.model import AMD64, ARM64, NEURON, NVIDIA, STANDARD, AmiSelectionError

AL2023: Final = "al2023"
BOTTLEROCKET: Final = "bottlerocket"
AL2: Final = "al2"
WINDOWS2019: Final = "windows2019"
WINDOWS2022: Final = "windows2022"
WINDOWS: Final = (WINDOWS2019, WINDOWS2022)
CUSTOM: Final = "custom"
FAMILIES: Final = (AL2023, BOTTLEROCKET, AL2, WINDOWS2019, WINDOWS2022)
LATEST: Final = "latest"


@dataclass(frozen=True)
class Alias:
    family: str
    version: str  # "latest" or a pinned version as written (Bottlerocket's leading "v" still there)

    @property
    def pinned(self) -> bool:
        return self.version != LATEST

    def __str__(self) -> str:
        return f"{self.family}@{self.version}"


@dataclass(frozen=True)
class AliasPath:
    """One SSM parameter of an alias and what the image behind it is for.

    `variants` has more than one entry when one image serves several accelerator kinds (AL2's GPU image
    bundles nvidia and neuron drivers; Bottlerocket's x86_64 image ships the neuron driver).
    """

    path: str
    arch: str  # Kubernetes arch: amd64 | arm64
    variants: tuple[str, ...]


def parse_alias(text: str) -> Alias:
    """`al2023@latest`, `bottlerocket@v1.32.0`, `al2@v20240807` -> Alias; a clear error otherwise."""
    family, sep, version = text.strip().partition("@")
    family = family.lower()
    if not sep or not family or not version:
        raise AmiSelectionError(f"alias {text!r}: expected 'family@version', e.g. 'al2023@latest'")
    if family not in FAMILIES:
        raise AmiSelectionError(f"alias {text!r}: unknown family {family!r} (expected one of {', '.join(FAMILIES)})")
    if family in WINDOWS and version != LATEST:
        # AWS publishes only a "latest" parameter for the Windows EKS images.
        raise AmiSelectionError(f"alias {text!r}: {family} supports only @latest")
    return Alias(family, version)


def alias_paths(alias: Alias, cluster_version: str) -> list[AliasPath]:
    """Every SSM path the alias may resolve through, in a fixed order (x86_64 first, plain first)."""
    if alias.family in WINDOWS:
        return _windows(alias.family.removeprefix("windows"), cluster_version)
    builders = {AL2023: _al2023, BOTTLEROCKET: _bottlerocket, AL2: _al2}
    return builders[alias.family](cluster_version, alias.version)


def _al2023(k: str, version: str) -> list[AliasPath]:
    out = []
    for ec2_arch, arch, variants in (
        ("x86_64", AMD64, (STANDARD, NVIDIA, NEURON)),
        ("arm64", ARM64, (STANDARD, NVIDIA)),
    ):
        for variant in variants:
            leaf = "recommended" if version == LATEST else f"amazon-eks-node-al2023-{ec2_arch}-{variant}-{k}-{version}"
            path = f"/aws/service/eks/optimized-ami/{k}/amazon-linux-2023/{ec2_arch}/{variant}/{leaf}/image_id"
            out.append(AliasPath(path, arch, (variant,)))
    return out


def _bottlerocket(k: str, version: str) -> list[AliasPath]:
    # GitHub release tags carry a leading "v" (v1.32.0); the SSM path does not. Accept both.
    v = version.lstrip("v")
    return [
        AliasPath(f"/aws/service/bottlerocket/aws-k8s-{k}/x86_64/{v}/image_id", AMD64, (STANDARD, NEURON)),
        AliasPath(f"/aws/service/bottlerocket/aws-k8s-{k}/arm64/{v}/image_id", ARM64, (STANDARD,)),
        AliasPath(f"/aws/service/bottlerocket/aws-k8s-{k}-nvidia/x86_64/{v}/image_id", AMD64, (NVIDIA,)),
        AliasPath(f"/aws/service/bottlerocket/aws-k8s-{k}-nvidia/arm64/{v}/image_id", ARM64, (NVIDIA,)),
    ]


def _al2(k: str, version: str) -> list[AliasPath]:
    def leaf(kind: str) -> str:
        if version == LATEST:
            return "recommended"
        return f"amazon-eks-{kind}node-{k}-{version}"

    base = f"/aws/service/eks/optimized-ami/{k}"
    return [
        AliasPath(f"{base}/amazon-linux-2/{leaf('')}/image_id", AMD64, (STANDARD,)),
        AliasPath(f"{base}/amazon-linux-2-arm64/{leaf('arm64-')}/image_id", ARM64, (STANDARD,)),
        AliasPath(f"{base}/amazon-linux-2-gpu/{leaf('gpu-')}/image_id", AMD64, (NVIDIA, NEURON)),
    ]


def _windows(year: str, k: str) -> list[AliasPath]:
    path = f"/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k}/image_id"
    return [AliasPath(path, AMD64, (STANDARD,))]
