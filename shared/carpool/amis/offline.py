"""Stand-in AMIs for planning without AWS (`carpool plan`): one placeholder image per variant the node
class's alias can resolve to, so the offline plan applies the same strict mapping as a launch (a
Bottlerocket class never offers a type no Bottlerocket variant can boot) without knowing real image ids.
"""

from __future__ import annotations

from typing import Any

from carpool.amifamily.family import NEURON, NVIDIA, STANDARD
from carpool.amis.aliases import alias_paths, windows_requirements
from carpool.amis.model import ResolvedAmi, ami_requirements
from carpool.amis.selectors import alias_of

_ANY_ARCH_VARIANTS = [(arch, v) for arch in ("amd64", "arm64") for v in (STANDARD, NVIDIA, NEURON)]


def placeholder_amis(nodeclass: Any, cluster_version: str = "1.32") -> list[ResolvedAmi]:
    """Alias classes: the alias's variants. Other selector terms: every arch x variant (unknown offline)."""
    alias = alias_of(nodeclass)
    pairs = (
        [(p.arch, v) for p in alias_paths(alias, cluster_version, check_version=False) for v in p.variants]
        if alias is not None else _ANY_ARCH_VARIANTS
    )
    extra = windows_requirements(alias.family) if alias is not None else ()
    return [
        ResolvedAmi(id=f"offline-{arch}-{variant}", name=f"{alias or 'selected'} ({arch} {variant})", arch=arch,
                    variant=variant, requirements=ami_requirements(arch, variant, extra), source="offline placeholder")
        for arch, variant in dict.fromkeys(pairs)
    ]
