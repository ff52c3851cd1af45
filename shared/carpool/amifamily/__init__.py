"""AMI families: one module per family (`al2023`, `al2`, `bottlerocket`, `windows`, `custom`) holding what
carpool knows about it, behind one `AmiFamily` value (`family`), as Karpenter's
pkg/providers/amifamily/ keeps a file per family behind its `AMIFamily` interface. `lookup` lists them and
finds one by name. See `family` for what a family knows.
"""

from carpool.amifamily.al2 import AL2
from carpool.amifamily.al2023 import AL2023
from carpool.amifamily.bottlerocket import BOTTLEROCKET
from carpool.amifamily.custom import CUSTOM
from carpool.amifamily.family import AliasPath, AmiFamily, DefaultVolume
from carpool.amifamily.lookup import (
    ALIAS_FAMILIES,
    FAMILIES,
    KINDS,
    UnknownAmiFamily,
    family_named,
    family_of_kind,
    find_family,
)
from carpool.amifamily.windows import WINDOWS2019, WINDOWS2022, WINDOWS2025

__all__ = [
    "AL2",
    "AL2023",
    "ALIAS_FAMILIES",
    "BOTTLEROCKET",
    "CUSTOM",
    "FAMILIES",
    "KINDS",
    "WINDOWS2019",
    "WINDOWS2022",
    "WINDOWS2025",
    "AliasPath",
    "AmiFamily",
    "DefaultVolume",
    "UnknownAmiFamily",
    "family_named",
    "family_of_kind",
    "find_family",
]
