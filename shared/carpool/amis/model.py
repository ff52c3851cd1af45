"""What an AMI is to carpool: an image id plus the requirement set an instance type must meet to run it.

The requirement set is the whole point. One alias (say `bottlerocket@latest`) resolves to several images
(x86_64, arm64, nvidia x86_64, nvidia arm64), and the only safe way to choose among them per instance type
is to compare each image's requirements with the instance type's own labels, strictly (see `mapping`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Protocol

from carpool import labels
from carpool.amifamily.family import NEURON, NVIDIA, STANDARD, VARIANTS
from carpool.requirements import DOES_NOT_EXIST, EXISTS, IN, Requirement, Requirements

AMD64: Final = "amd64"
ARM64: Final = "arm64"

#: EC2 `Architecture` values to Kubernetes `kubernetes.io/arch` values. Mac and i386 images are not
#: EKS node images, so they are deliberately absent (an image with such an architecture is skipped).
EC2_TO_KUBE_ARCH: Final = {"x86_64": AMD64, "arm64": ARM64}
KUBE_TO_EC2_ARCH: Final = {v: k for k, v in EC2_TO_KUBE_ARCH.items()}


class AmiSelectionError(ValueError):
    """An amiSelectorTerm carpool cannot act on (unknown alias family, pinned Windows version...)."""


class AmiNotFound(AmiSelectionError):
    """Well-formed terms that select no image: no AMI published for an alias at the cluster's version
    (Karpenter's EC2NodeClass AMIsReady=False, reason AMINotFound)."""


class AmiSource(Protocol):
    """The two AWS reads AMI resolution needs; boto3 SSM/EC2 adapters and test fakes implement it.

    `get_parameter` returns None when the parameter does not exist: for aliases a missing parameter
    just means that variant is not published (e.g. no neuron build for arm64), not an error.
    `describe_images` answers in boto3 `DescribeImages()["Images"]` shape, including deprecated images.
    """

    def get_parameter(self, path: str) -> str | None: ...

    def describe_images(
        self,
        image_ids: list[str] | None = None,
        filters: list[dict[str, Any]] | None = None,
        owners: list[str] | None = None,
    ) -> list[dict[str, Any]]: ...


def parameters(source: AmiSource, paths: Iterable[str]) -> dict[str, str | None]:
    """`source.get_parameter` of each path, in one request when the source can read several at once
    (an optional `get_parameters(paths)`: SSM's GetParameters); None for a parameter that does not exist."""
    many: Callable[[Iterable[str]], dict[str, str | None]] | None = getattr(source, "get_parameters", None)
    wanted = list(dict.fromkeys(paths))
    if many is not None:
        found = many(wanted)
        return {path: found.get(path) for path in wanted}
    return {path: source.get_parameter(path) for path in wanted}


def variant_requirements(variant: str) -> list[Requirement]:
    """The accelerator requirements an image variant imposes (reference.md section 4).

    Standard images must land only on types with neither GPUs nor accelerators: an nvidia or neuron
    instance booted from a standard image has no drivers and its devices never register.
    """
    if variant == STANDARD:
        return [
            Requirement.of(labels.INSTANCE_GPU_COUNT, DOES_NOT_EXIST),
            Requirement.of(labels.INSTANCE_ACCELERATOR_COUNT, DOES_NOT_EXIST),
        ]
    if variant == NVIDIA:
        return [Requirement.of(labels.INSTANCE_GPU_COUNT, EXISTS)]
    if variant == NEURON:
        return [Requirement.of(labels.INSTANCE_ACCELERATOR_COUNT, EXISTS)]
    raise AmiSelectionError(f"unknown AMI variant {variant!r} (expected one of {', '.join(VARIANTS)})")


def ami_requirements(arch: str, variant: str, extra: tuple[Requirement, ...] = ()) -> Requirements:
    """`kubernetes.io/arch In [arch]` plus the variant's accelerator requirements (plus `extra`)."""
    return Requirements([Requirement.of(labels.ARCH, IN, [arch]), *variant_requirements(variant), *extra])


def variant_from_name(name: str) -> str:
    """Guess the variant of an image found by id/name/tags/ssmParameter from its name.

    Those images come without the knowledge an alias's SSM path gives, and EC2 has no "GPU image" flag.
    Karpenter gives them only an arch requirement, so a custom non-GPU image can land on a GPU type and
    vice versa; carpool instead reads the name the way AWS and most teams name images:
    contains `nvidia` or `gpu` -> nvidia; contains `neuron` -> neuron; otherwise standard.
    An image named against this convention should be selected by an alias or renamed.
    """
    lowered = name.lower()
    if "nvidia" in lowered or "gpu" in lowered:
        return NVIDIA
    if "neuron" in lowered:
        return NEURON
    return STANDARD


def parse_time(value: str | None) -> datetime | None:
    """EC2 timestamps (`2024-05-01T12:00:00.000Z`) to aware datetimes; None for missing/garbled values."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class ResolvedAmi:
    """One image together with the instance types it may run on (its `requirements`).

    The same image id may appear twice with different variants (the AL2 GPU image serves both nvidia and
    neuron types; the Bottlerocket x86_64 image carries the neuron driver too), because the requirement
    set, not the id, is the unit of choice.
    """

    id: str
    name: str
    arch: str
    variant: str
    requirements: Requirements = field(compare=False)
    creation_date: str = ""
    deprecated: bool = False
    #: Where it came from (an SSM path or a description of the selector term), for explanations.
    source: str = field(default="", compare=False)

    @property
    def created(self) -> datetime:
        return parse_time(self.creation_date) or _EPOCH

    def describe(self) -> str:
        flag = ", deprecated" if self.deprecated else ""
        return f"{self.id} ({self.name}; {self.arch} {self.variant}{flag})"


def preference_key(ami: ResolvedAmi) -> tuple[bool, float, str]:
    """Sort key, best first: non-deprecated, then newest CreationDate, then id (a stable tie-break)."""
    return (ami.deprecated, -ami.created.timestamp(), ami.id)
