"""Windows Server 2019, 2022 and 2025 (Karpenter pkg/providers/amifamily/windows.go): PowerShell user data,
a 50Gi root volume, amd64 images only, published only as "latest".

The three versions differ only in their name, the build their kubelet reports and the EKS versions they are
published for; they size alike (the kubelet default max pods: Windows pods take their IPs from the VPC
resource controller, not the ENI limits).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from carpool.amifamily.family import POWERSHELL, STANDARD, WINDOWS, AliasPath, AmiFamily, DefaultVolume
from carpool.catalog.instance_type import AMD64

ROOT_DEVICE: Final = "/dev/sda1"
ROOT_GIB: Final = 50


@dataclass(frozen=True)
class Windows(AmiFamily):
    #: the Windows Server version (`2022`), as its SSM parameter names it
    version: str = ""
    #: the first Kubernetes minor version EKS publishes its images for (None: every supported one)
    first_minor: int | None = None

    def alias_paths(self, k8s_version: str, version: str) -> list[AliasPath]:
        path = f"{self.ssm_root}Windows_Server-{self.version}-English-Core-EKS_Optimized-{k8s_version}/image_id"
        return [AliasPath(path, AMD64, (STANDARD,))]

    def version_problem(self, alias: str, cluster_version: str, minor: int) -> str | None:
        if self.first_minor is not None and minor < self.first_minor:
            return (f"alias {alias}: Windows Server {self.version} requires EKS version 1.{self.first_minor} "
                    f"or higher, current version: {cluster_version}")
        return None


def _windows(version: str, build: str, first_minor: int | None = None) -> Windows:
    """Windows Server `version`, whose kubelet reports `build` as `node.kubernetes.io/windows-build`
    (Karpenter's Windows2019Build/2022Build/2025Build), which pods select Windows versions by."""
    return Windows(
        name=f"windows{version}", api_name=f"Windows{version}", kind=WINDOWS, user_data=POWERSHELL,
        volumes=(DefaultVolume(ROOT_DEVICE, ROOT_GIB),), ephemeral_device=ROOT_DEVICE,
        node_os=WINDOWS, windows_build=build, eni_pod_density=False, many_cluster_dns=False,
        instance_store_raid0=False, ssm_root="/aws/service/ami-windows-latest/", version=version,
        first_minor=first_minor,
    )  # fmt: skip


WINDOWS2019: Final = _windows("2019", "10.0.17763")
WINDOWS2022: Final = _windows("2022", "10.0.20348")
#: EKS publishes Windows Server 2025 images from Kubernetes 1.35 on.
WINDOWS2025: Final = _windows("2025", "10.0.26100", first_minor=35)
