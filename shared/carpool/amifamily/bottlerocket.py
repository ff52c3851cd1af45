"""Bottlerocket (Karpenter pkg/providers/amifamily/bottlerocket.go): TOML settings as user data, a small OS
volume beside a data volume for pods, no pods-per-core setting and no pid reservations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from carpool.amifamily.family import (
    BOTTLEROCKET_TOML,
    DEFAULT_EBS_GIB,
    LINUX_ROOT_DEVICE,
    NEURON,
    NVIDIA,
    STANDARD,
    AliasPath,
    AmiFamily,
    DefaultVolume,
)
from carpool.catalog.instance_type import AMD64, ARM64

#: Bottlerocket's own OS volume; pods get the data volume beside it.
OS_GIB: Final = 4
DATA_DEVICE: Final = "/dev/xvdb"


@dataclass(frozen=True)
class Bottlerocket(AmiFamily):
    def alias_paths(self, k8s_version: str, version: str) -> list[AliasPath]:
        # GitHub release tags carry a leading "v" (v1.32.0); the SSM path does not. Accept both.
        root, k, v = self.ssm_root, k8s_version, version.lstrip("v")
        return [
            AliasPath(f"{root}aws-k8s-{k}/x86_64/{v}/image_id", AMD64, (STANDARD, NEURON)),
            AliasPath(f"{root}aws-k8s-{k}/arm64/{v}/image_id", ARM64, (STANDARD,)),
            AliasPath(f"{root}aws-k8s-{k}-nvidia/x86_64/{v}/image_id", AMD64, (NVIDIA,)),
            AliasPath(f"{root}aws-k8s-{k}-nvidia/arm64/{v}/image_id", ARM64, (NVIDIA,)),
        ]


BOTTLEROCKET: Final = Bottlerocket(
    name="bottlerocket", api_name="Bottlerocket", kind="bottlerocket", user_data=BOTTLEROCKET_TOML,
    volumes=(DefaultVolume(LINUX_ROOT_DEVICE, OS_GIB), DefaultVolume(DATA_DEVICE, DEFAULT_EBS_GIB)),
    ephemeral_device=DATA_DEVICE,
    pods_per_core=False, reserves_pids=False, ssm_root="/aws/service/bottlerocket/",
)  # fmt: skip
