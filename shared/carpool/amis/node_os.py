"""The operating system a node runs is the AMI family's, not the instance type's.

The catalog labels every type `kubernetes.io/os=linux`, which is what every Linux family boots. A Windows
node class changes that for all of its types, as Karpenter's instance-type provider does (`getOS`,
`computeRequirements`): an amd64 type becomes `kubernetes.io/os=windows` with the family's
`node.kubernetes.io/windows-build`, and an arm64 type has no OS at all (no Windows image boots it, so
a pod selecting an OS can never land there). Pods that select `kubernetes.io/os: windows` or a Windows build
then match the Windows pool's types and no Linux pool's.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from carpool import labels as L
from carpool.amifamily import AmiFamily, find_family
from carpool.catalog.instance_type import AMD64, InstanceType, instance_requirements

#: (id of the catalog type, family) -> (that type, its view): views are rebuilt only when the catalog changes
_VIEWS: dict[tuple[int, str], tuple[InstanceType, InstanceType]] = {}
_MAX_VIEWS: Final = 20_000


def compatible(it: InstanceType, family: str) -> bool:
    """Whether `family` boots on `it` at all (AL2023 not on the first-generation Graviton a1 types: the
    family's `unsupported_types`); a name that is no family rules nothing out."""
    known = find_family(family)
    return known is None or not it.name.startswith(known.unsupported_types)


def windows_build(family: str) -> str | None:
    """The Windows Server build a family's nodes report, or None for a Linux (or custom) family."""
    known = find_family(family)
    return known.windows_build if known is not None else None


def for_family(it: InstanceType, family: str) -> InstanceType:
    """`it` as a node of `family` would be labelled: unchanged for Linux families, Windows labels otherwise."""
    known = find_family(family)
    if known is None or known.windows_build is None:
        return it
    build = known.windows_build
    key = (id(it), build)
    hit = _VIEWS.get(key)
    if hit is not None and hit[0] is it:
        return hit[1]
    if len(_VIEWS) >= _MAX_VIEWS:
        _VIEWS.clear()
    view = _windows_view(it, known, build)
    _VIEWS[key] = (it, view)
    return view


def _windows_view(it: InstanceType, family: AmiFamily, build: str) -> InstanceType:
    labels = dict(it.labels)
    if it.arch == AMD64:
        labels[L.OS] = family.node_os
        labels[L.WINDOWS_BUILD] = build
    else:
        labels.pop(L.OS, None)
    return replace(it, labels=labels, os=labels.get(L.OS, ""),
                   requirements=instance_requirements(labels, it.offerings))
