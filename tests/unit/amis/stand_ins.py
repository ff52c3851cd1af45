"""Stand-ins for the EC2NodeClass model and catalog InstanceType: plain dataclasses with only the
attributes `carpool.amis` reads, so its tests build node classes and instance types in a line."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from carpool import labels
from carpool.requirements import Requirements

NOW = datetime(2025, 6, 1, tzinfo=UTC)
K = "1.32"


@dataclass
class Term:
    alias: str | None = None
    id: str | None = None
    name: str | None = None
    owner: str | None = None
    tags: dict[str, str] | None = None
    ssm_parameter: str | None = None


def nodeclass(*terms: Term, name: str = "default", ami_family: str | None = None) -> Any:
    return SimpleNamespace(
        metadata=SimpleNamespace(name=name),
        spec=SimpleNamespace(ami_selector_terms=list(terms), ami_family=ami_family),
    )


@dataclass
class InstanceType:
    """Only what mapping reads: name, arch, labels and the requirements built from the labels."""

    name: str
    arch: str
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def requirements(self) -> Requirements:
        return Requirements.from_labels(self.labels)


def itype(name: str, arch: str = "amd64", gpus: int = 0, accelerators: int = 0) -> InstanceType:
    lab = {labels.INSTANCE_TYPE: name, labels.ARCH: arch, labels.OS: "linux"}
    if gpus:
        lab[labels.INSTANCE_GPU_COUNT] = str(gpus)
        lab[labels.INSTANCE_GPU_MANUFACTURER] = "nvidia"
    if accelerators:
        lab[labels.INSTANCE_ACCELERATOR_COUNT] = str(accelerators)
    return InstanceType(name, arch, lab)


def image(
    image_id: str,
    name: str,
    arch: str = "x86_64",
    created: str = "2025-01-01T00:00:00.000Z",
    deprecation: str | None = None,
    owner_alias: str | None = "amazon",
    owner_id: str = "137112412989",
    tags: dict[str, str] | None = None,
) -> dict[str, Any]:
    img: dict[str, Any] = {
        "ImageId": image_id,
        "Name": name,
        "Architecture": arch,
        "CreationDate": created,
        "State": "available",
        "OwnerId": owner_id,
        "Tags": [{"Key": k, "Value": v} for k, v in (tags or {}).items()],
    }
    if owner_alias:
        img["ImageOwnerAlias"] = owner_alias
    if deprecation:
        img["DeprecationTime"] = deprecation
    return img
