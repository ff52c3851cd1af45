"""AMI selection: selector terms -> SSM paths / DescribeImages filters -> `ResolvedAmi`s with requirement
sets -> a strict per-instance-type mapping. See `docs/design.md` (where it fits) and reference.md section 4.

Modules: `model` (ResolvedAmi, AmiSource, variant requirements), `aliases` (alias -> SSM paths, asking
`carpool.amifamily` for each family's), `node_os` (the OS and labels a family gives its nodes),
`selectors` (resolution), `mapping` (strict instance-type mapping and explanations), `cache`
(TTL-cached AmiSource), `memory` (in-memory AmiSource for offline use).
"""

from carpool.amifamily import AliasPath
from carpool.amifamily.family import NEURON, NVIDIA, STANDARD
from carpool.amis.aliases import (
    AL2,
    AL2023,
    BOTTLEROCKET,
    CUSTOM,
    WINDOWS2019,
    WINDOWS2022,
    WINDOWS2025,
    WINDOWS_BUILDS,
    Alias,
    alias_paths,
    parse_alias,
)
from carpool.amis.cache import CachedAmiSource, TtlCache
from carpool.amis.mapping import AmiRejection, explain_mapping, group_by_ami, map_instance_types
from carpool.amis.memory import AmiEntry, InMemoryAmiSource, parse_entries, source_from_entries
from carpool.amis.model import (
    AmiNotFound,
    AmiSelectionError,
    AmiSource,
    ResolvedAmi,
    ami_requirements,
    variant_from_name,
)
from carpool.amis.selectors import alias_of, describe_terms, family_of, resolve, term_filters

__all__ = [
    "AL2",
    "AL2023",
    "BOTTLEROCKET",
    "CUSTOM",
    "NEURON",
    "NVIDIA",
    "STANDARD",
    "WINDOWS2019",
    "WINDOWS2022",
    "WINDOWS2025",
    "WINDOWS_BUILDS",
    "Alias",
    "AliasPath",
    "AmiEntry",
    "AmiNotFound",
    "AmiRejection",
    "AmiSelectionError",
    "AmiSource",
    "CachedAmiSource",
    "InMemoryAmiSource",
    "ResolvedAmi",
    "TtlCache",
    "alias_of",
    "alias_paths",
    "ami_requirements",
    "describe_terms",
    "explain_mapping",
    "family_of",
    "group_by_ami",
    "map_instance_types",
    "parse_alias",
    "parse_entries",
    "resolve",
    "source_from_entries",
    "term_filters",
    "variant_from_name",
]
