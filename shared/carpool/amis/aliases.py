"""`amiSelectorTerms[].alias` (`family@version`) to the SSM parameters that name each image variant.

An alias is not one image: it is a family of images published side by side (per architecture, plain and
accelerated). We enumerate every path the family publishes and record, per path, which architecture
and variant(s) it stands for, because DescribeImages alone cannot tell an nvidia build from a plain one.
Paths follow reference.md section 4 and aws/karpenter-provider-aws pkg/providers/amifamily/*.go.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from carpool import amifamily, labels
from carpool.amifamily import AliasPath, family_named
from carpool.amifamily.family import LATEST
from carpool.amis.model import AmiSelectionError
from carpool.requirements import IN, Requirement

#: the family names as aliases spell them (each family's own module in `carpool.amifamily` says the rest)
AL2023: Final = amifamily.AL2023.name
BOTTLEROCKET: Final = amifamily.BOTTLEROCKET.name
AL2: Final = amifamily.AL2.name
WINDOWS2019: Final = amifamily.WINDOWS2019.name
WINDOWS2022: Final = amifamily.WINDOWS2022.name
WINDOWS2025: Final = amifamily.WINDOWS2025.name
WINDOWS: Final = tuple(f.name for f in amifamily.FAMILIES if f.windows)
CUSTOM: Final = amifamily.CUSTOM.name
FAMILIES: Final = tuple(f.name for f in amifamily.ALIAS_FAMILIES)
#: Windows Server build of each Windows family: the `node.kubernetes.io/windows-build` value its kubelet
#: reports, which pods select Windows versions by.
WINDOWS_BUILDS: Final = {f.name: f.windows_build for f in amifamily.FAMILIES if f.windows_build is not None}


@dataclass(frozen=True)
class Alias:
    family: str
    version: str  # "latest" or a pinned version as written (Bottlerocket's leading "v" still there)

    @property
    def pinned(self) -> bool:
        return self.version != LATEST

    def __str__(self) -> str:
        return f"{self.family}@{self.version}"


def windows_requirements(family: str) -> tuple[Requirement, ...]:
    """What a Windows family's images add to their arch/variant requirements: `kubernetes.io/os In [windows]`
    and the family's `node.kubernetes.io/windows-build` (Karpenter's KnownRequirements for Windows aliases).
    Empty for every other family."""
    build = WINDOWS_BUILDS.get(family)
    if build is None:
        return ()
    return (Requirement.of(labels.OS, IN, [family_named(family).node_os]),
            Requirement.of(labels.WINDOWS_BUILD, IN, [build]))


def parse_alias(text: str) -> Alias:
    """`al2023@latest`, `bottlerocket@v1.32.0`, `al2@v20240807` -> Alias; a clear error otherwise."""
    family, sep, version = text.strip().partition("@")
    family = family.lower()
    if not sep or not family or not version:
        raise AmiSelectionError(f"alias {text!r}: expected 'family@version', e.g. 'al2023@latest'")
    if family not in FAMILIES:
        raise AmiSelectionError(f"alias {text!r}: unknown family {family!r} (expected one of {', '.join(FAMILIES)})")
    if family_named(family).latest_only and version != LATEST:
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
    return family_named(alias.family).alias_paths(cluster_version, alias.version)


def _minor(cluster_version: str) -> int | None:
    parts = cluster_version.strip().lstrip("v").split(".")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def _check_version(alias: Alias, cluster_version: str) -> None:
    minor = _minor(cluster_version)
    if minor is None:
        return
    problem = family_named(alias.family).version_problem(str(alias), cluster_version, minor)
    if problem is not None:
        raise AmiSelectionError(problem)
