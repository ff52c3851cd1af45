"""Amazon Linux 2 (Karpenter pkg/providers/amifamily/al2.go): bootstrap.sh user data; EKS publishes no AL2
images from Kubernetes 1.33 on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from carpool.amifamily.family import (
    BOOTSTRAP_SH,
    EKS_SSM_ROOT,
    LATEST,
    LINUX_ROOT,
    LINUX_ROOT_DEVICE,
    NEURON,
    NVIDIA,
    STANDARD,
    AliasPath,
    AmiFamily,
)
from carpool.catalog.instance_type import AMD64, ARM64

#: The last Kubernetes minor version EKS publishes AL2 images for.
LAST_MINOR: Final = 32


@dataclass(frozen=True)
class Al2(AmiFamily):
    def alias_paths(self, k8s_version: str, version: str) -> list[AliasPath]:
        def leaf(kind: str) -> str:
            if version == LATEST:
                return "recommended"
            return f"amazon-eks-{kind}node-{k8s_version}-{version}"

        base = f"{self.ssm_root}optimized-ami/{k8s_version}"
        return [
            AliasPath(f"{base}/amazon-linux-2/{leaf('')}/image_id", AMD64, (STANDARD,)),
            AliasPath(f"{base}/amazon-linux-2-arm64/{leaf('arm64-')}/image_id", ARM64, (STANDARD,)),
            AliasPath(f"{base}/amazon-linux-2-gpu/{leaf('gpu-')}/image_id", AMD64, (NVIDIA, NEURON)),
        ]

    def version_problem(self, alias: str, cluster_version: str, minor: int) -> str | None:
        if minor > LAST_MINOR:
            return (f"alias {alias}: AL2 aliases are no longer supported on EKS 1.33+ "
                    f"(cluster version {cluster_version}); use al2023 or bottlerocket")
        return None


AL2: Final = Al2(
    name="al2", api_name="AL2", kind="al2", user_data=BOOTSTRAP_SH,
    volumes=(LINUX_ROOT,), ephemeral_device=LINUX_ROOT_DEVICE, ssm_root=EKS_SSM_ROOT,
)  # fmt: skip
