"""Amazon Linux 2023 (Karpenter pkg/providers/amifamily/al2023.go): nodeadm user data, images per
architecture and accelerator under /aws/service/eks/optimized-ami/."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from carpool.amifamily.family import (
    EKS_SSM_ROOT,
    LATEST,
    LINUX_ROOT,
    LINUX_ROOT_DEVICE,
    NEURON,
    NODEADM,
    NVIDIA,
    STANDARD,
    AliasPath,
    AmiFamily,
)
from carpool.catalog.instance_type import AMD64, ARM64


@dataclass(frozen=True)
class Al2023(AmiFamily):
    def alias_paths(self, k8s_version: str, version: str) -> list[AliasPath]:
        out = []
        for ec2_arch, arch, variants in (
            ("x86_64", AMD64, (STANDARD, NVIDIA, NEURON)),
            ("arm64", ARM64, (STANDARD, NVIDIA)),
        ):
            for variant in variants:
                leaf = ("recommended" if version == LATEST
                        else f"amazon-eks-node-al2023-{ec2_arch}-{variant}-{k8s_version}-{version}")
                path = f"{self.ssm_root}optimized-ami/{k8s_version}/amazon-linux-2023/{ec2_arch}/{variant}/{leaf}/image_id"
                out.append(AliasPath(path, arch, (variant,)))
        return out


AL2023: Final = Al2023(
    name="al2023", api_name="AL2023", kind="al2023", user_data=NODEADM,
    volumes=(LINUX_ROOT,), ephemeral_device=LINUX_ROOT_DEVICE,
    # AL2023 does not support the first-generation Graviton a1 types (AL2023 system requirements;
    # Karpenter's amiFamilyCompatibility drops them too).
    unsupported_types=("a1.",), ssm_root=EKS_SSM_ROOT,
)  # fmt: skip
