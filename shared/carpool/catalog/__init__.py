"""Instance-type catalog: hardware facts, Karpenter-compatible labels, offerings and prices.

`Catalog.snapshot()` gives the offline us-east-1 catalog; `builder.from_ec2` builds one from live EC2
responses.
"""

from carpool.catalog.builder import build_catalog, from_ec2
from carpool.catalog.catalog import Catalog, UnknownInstanceType
from carpool.catalog.instance_type import InstanceType, Offering, instance_requirements
from carpool.catalog.snapshot import SnapshotNotFound

__all__ = [
    "Catalog",
    "InstanceType",
    "Offering",
    "SnapshotNotFound",
    "UnknownInstanceType",
    "build_catalog",
    "from_ec2",
    "instance_requirements",
]
