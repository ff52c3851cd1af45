"""Every AMI family carpool knows, and finding one by name."""

from __future__ import annotations

from typing import Final

from carpool.amifamily.al2 import AL2
from carpool.amifamily.al2023 import AL2023
from carpool.amifamily.bottlerocket import BOTTLEROCKET
from carpool.amifamily.custom import CUSTOM
from carpool.amifamily.family import AmiFamily
from carpool.amifamily.windows import WINDOWS2019, WINDOWS2022, WINDOWS2025

#: every family, in the order messages list them (AL2023, the default, first; Custom, which has no alias, last)
FAMILIES: Final = (AL2023, AL2, BOTTLEROCKET, WINDOWS2019, WINDOWS2022, WINDOWS2025, CUSTOM)
#: the families an `amiSelectorTerms[].alias` may name
ALIAS_FAMILIES: Final = tuple(f for f in FAMILIES if f.alias)
#: sizing's kinds (`windows` for every Windows Server version), sorted
KINDS: Final = tuple(sorted({f.kind for f in FAMILIES}))
_BY_NAME: Final = {f.name: f for f in FAMILIES}
_BY_KIND: Final = {f.kind: f for f in reversed(FAMILIES)}  # the first family of each kind


class UnknownAmiFamily(ValueError):
    """A name that is no AMI family carpool knows."""


def find_family(name: str) -> AmiFamily | None:
    """The family named `name` in either spelling (`al2023`, `AL2023`), or None."""
    return _BY_NAME.get(name.lower())


def family_named(name: str) -> AmiFamily:
    """The family named `name` in either spelling (`al2023`, `AL2023`); `UnknownAmiFamily` otherwise."""
    family = find_family(name)
    if family is None:
        raise UnknownAmiFamily(f"unknown AMI family {name!r} (expected one of {', '.join(_BY_NAME)})")
    return family


def family_of_kind(kind: str) -> AmiFamily | None:
    """A family of sizing kind `kind` (`al2023`, `windows`, ...): they all size alike, or None."""
    return _BY_KIND.get(kind)
