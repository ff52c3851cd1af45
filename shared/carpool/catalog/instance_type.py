"""What carpool knows about one EC2 instance type: its hardware, its node labels, and where it can be bought.

An `InstanceType` is the unit the scheduler packs pods against and the launcher sends to CreateFleet. It
carries the labels a node of that type gets (the same keys Karpenter's AWS provider sets, so NodePool
requirements written for Karpenter match the same types) and `requirements`: those labels as single-valued
`In` requirements plus the zones and capacity types of its available offerings, so one
`Requirements.compatible` call answers "can this type satisfy that NodePool/pod?".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from carpool import labels as L
from carpool.requirements import Requirement, Requirements

AMD64 = "amd64"
ARM64 = "arm64"
LINUX = "linux"


@dataclass(frozen=True, slots=True)
class Offering:
    """One way to buy the type: a zone and a capacity type at an hourly USD price.

    `available=False` marks offerings EC2 recently refused (insufficient capacity) or that have no known
    price; they stay listed so explanations can say why they were skipped.
    """

    zone: str
    capacity_type: str
    price: float
    available: bool = True


@dataclass(frozen=True)
class InstanceType:
    """Hardware facts, node labels, requirements and offerings of one instance type.

    `max_enis` is the default network card's ENI limit (what the VPC CNI can use for pods), not the
    instance total: multi-card types such as p5.48xlarge have more ENIs than pods can use.
    `nitro` is True for the Nitro hypervisor and for bare metal (every bare-metal type runs on the Nitro
    System); VPC CNI prefix delegation needs it.
    Treat instances as read-only: they are shared by the cached catalog.
    """

    name: str
    vcpus: int
    memory_mib: int
    arch: str
    labels: dict[str, str]
    requirements: Requirements
    offerings: list[Offering]
    max_enis: int
    ipv4_per_eni: int
    nitro: bool
    hypervisor: str = ""
    bare_metal: bool = False
    gpu_count: int = 0
    gpu_name: str = ""
    gpu_manufacturer: str = ""
    accelerator_count: int = 0
    os: str = LINUX

    def __hash__(self) -> int:
        # Names are unique within a catalog; hashing the dict/list fields would fail.
        return hash(self.name)

    # -- offerings ------------------------------------------------------------------------------------
    def offering(self, zone: str, capacity_type: str) -> Offering | None:
        """The offering for (zone, capacity type), available or not; None when EC2 does not sell it."""
        for o in self.offerings:
            if o.zone == zone and o.capacity_type == capacity_type:
                return o
        return None

    def available_offerings(self) -> list[Offering]:
        return [o for o in self.offerings if o.available]

    def zones(self, available_only: bool = True) -> list[str]:
        pool = self.available_offerings() if available_only else self.offerings
        return sorted({o.zone for o in pool})

    def capacity_types(self, available_only: bool = True) -> list[str]:
        pool = self.available_offerings() if available_only else self.offerings
        return sorted({o.capacity_type for o in pool})

    def with_offerings(self, offerings: Iterable[Offering]) -> InstanceType:
        """A copy with new offerings (e.g. after marking one unavailable) and matching requirements."""
        new = list(offerings)
        return replace(self, offerings=new, requirements=instance_requirements(self.labels, new))

    # -- resources ------------------------------------------------------------------------------------
    @property
    def is_gpu(self) -> bool:
        return self.gpu_count > 0

    @property
    def is_accelerated(self) -> bool:
        return self.gpu_count > 0 or self.accelerator_count > 0


@lru_cache(maxsize=16384)
def _label_requirement(key: str, value: str) -> Requirement:
    """Shared `key In [value]` objects: catalogs repeat the same few thousand, and Requirement is immutable."""
    return Requirement(key, False, (value,))


@lru_cache(maxsize=4096)
def _set_requirement(key: str, values: tuple[str, ...]) -> Requirement:
    return Requirement(key, False, values)


def instance_requirements(labels: Mapping[str, str], offerings: Sequence[Offering]) -> Requirements:
    """Every label as a single-valued `In`, plus zone and capacity-type `In` over the available offerings.

    Only available offerings count (as in Karpenter): a type whose offerings are all unavailable gets empty
    zone/capacity-type sets, which no NodePool or pod requirement on those keys can intersect.
    """
    available = [o for o in offerings if o.available]
    zones = tuple(sorted({o.zone for o in available}))
    capacity_types = tuple(sorted({o.capacity_type for o in available}))
    reqs = [_label_requirement(k, v) for k, v in labels.items()]
    reqs.append(_set_requirement(L.ZONE, zones))
    reqs.append(_set_requirement(L.CAPACITY_TYPE, capacity_types))
    return Requirements.of_distinct(reqs)
