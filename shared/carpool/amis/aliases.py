"""`amiSelectorTerms[].alias` (`family@version`) to the SSM parameters that name each image variant.

An alias is not one image: it is a family of images published side by side (per architecture, plain and
accelerated). We enumerate every path the family publishes and record, per path, which architecture
and variant(s) it stands for, because DescribeImages alone cannot tell an nvidia build from a plain one.
Paths follow reference.md section 4 and aws/karpenter-provider-aws pkg/providers/amifamily/*.go.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from carpool import labels
from carpool.amis.model import AMD64, ARM64, NEURON, NVIDIA, STANDARD, AmiSelectionError
from carpool.requirements import IN, Requirement

AL2023: Final = "al2023"
BOTTLEROCKET: Final = "bottlerocket"
AL2: Final = "al2"
WINDOWS2019: Final = "windows2019"
WINDOWS2022: Final = "windows2022"
WINDOWS2025: Final = "windows2025"
WINDOWS: Final = (WINDOWS2019, WINDOWS2022, WINDOWS2025)
CUSTOM: Final = "custom"
FAMILIES: Final = (AL2023, BOTTLEROCKET, AL2, WINDOWS2019, WINDOWS2022, WINDOWS2025)
LATEST: Final = "latest"
#: Windows Server build of each Windows family: the `node.kubernetes.io/windows-build` value its kubelet
#: reports (Karpenter's Windows2019Build/2022Build/2025Build), which pods select Windows versions by.
WINDOWS_BUILDS: Final = {WINDOWS2019: "10.0.17763", WINDOWS2022: "10.0.20348", WINDOWS2025: "10.0.26100"}
#: EKS publishes no AL2 images from Kubernetes 1.33 on, and Windows Server 2025 images from 1.35 on.
AL2_LAST_MINOR: Final = 32
WINDOWS2025_FIRST_MINOR: Final = 35


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


def windows_requirements(family: str) -> tuple[Requirement, ...]:
    """What a Windows family's images add to their arch/variant requirements: `kubernetes.io/os In [windows]`
    and the family's `node.kubernetes.io/windows-build` (Karpenter's KnownRequirements for Windows aliases).
    Empty for every other family."""
    build = WINDOWS_BUILDS.get(family)
    if build is None:
        return ()
    return (Requirement.of(labels.OS, IN, ["windows"]), Requirement.of(labels.WINDOWS_BUILD, IN, [build]))


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


def alias_paths(alias: Alias, cluster_version: str, *, check_version: bool = True) -> list[AliasPath]:
    """Every SSM path the alias may resolve through, in a fixed order (x86_64 first, plain first).

    Raises `AmiSelectionError` for a family EKS does not publish for `cluster_version` (AL2 on 1.33+,
    windows2025 below 1.35), as Karpenter refuses those aliases instead of finding no image;
    `check_version=False` skips that where the cluster version is only a stand-in (offline planning).
    """
    if check_version:
        _check_version(alias, cluster_version)
    if alias.family in WINDOWS:
        return _windows(alias.family.removeprefix("windows"), cluster_version)
    builders = {AL2023: _al2023, BOTTLEROCKET: _bottlerocket, AL2: _al2}
    return builders[alias.family](cluster_version, alias.version)


def _minor(cluster_version: str) -> int | None:
    parts = cluster_version.strip().lstrip("v").split(".")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def _check_version(alias: Alias, cluster_version: str) -> None:
    minor = _minor(cluster_version)
    if minor is None:
        return
    if alias.family == AL2 and minor > AL2_LAST_MINOR:
        raise AmiSelectionError(f"alias {alias}: AL2 aliases are no longer supported on EKS 1.33+ "
                                f"(cluster version {cluster_version}); use al2023 or bottlerocket")
    if alias.family == WINDOWS2025 and minor < WINDOWS2025_FIRST_MINOR:
        raise AmiSelectionError(f"alias {alias}: Windows Server 2025 requires EKS version 1.35 or higher, "
                                f"current version: {cluster_version}")


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
