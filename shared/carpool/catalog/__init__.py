"""Instance-type catalog: hardware facts, Karpenter-compatible labels, offerings and prices.

`Catalog.snapshot()` gives the offline us-east-1 catalog; `builder.from_ec2` builds one from live EC2
responses; `Catalog.decode` reads the compact form (`encoding`) the state store keeps.

`build_catalog` and `from_ec2` are imported on first use: a cold start only decodes a catalog, and the
builder (with its price tables) is needed only where one is built.
"""

from typing import TYPE_CHECKING, Any

from carpool.catalog.catalog import Catalog, UnknownInstanceType
from carpool.catalog.encoding import CatalogDecodeError
from carpool.catalog.instance_type import InstanceType, Offering, instance_requirements
from carpool.catalog.snapshot import SnapshotNotFound

if TYPE_CHECKING:
    from carpool.catalog.builder import build_catalog, from_ec2

__all__ = [
    "Catalog",
    "CatalogDecodeError",
    "InstanceType",
    "Offering",
    "SnapshotNotFound",
    "UnknownInstanceType",
    "build_catalog",
    "from_ec2",
    "instance_requirements",
]


def __getattr__(name: str) -> Any:
    if name in ("build_catalog", "from_ec2"):
        from carpool.catalog import builder

        return getattr(builder, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
