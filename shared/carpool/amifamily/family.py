"""`AmiFamily`: what carpool knows about one AMI family, in one value (Karpenter's `AMIFamily` interface,
pkg/providers/amifamily/resolver.go).

A family decides where its images are published (the SSM parameters behind `family@version`), how a node
of it joins (its user data format), which `spec.kubelet` fields that bootstrap can carry, how its nodes
are sized (pods per core, ENI pod density), its volumes (the default block device mappings and the device
holding pod storage) and the OS its nodes run. One module of this package per family holds those facts;
`amis`, `launch`, `sizing` and `api` ask for them instead of keeping tables of their own.

This package is pure data and rules: it imports nothing that imports it back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

#: AMI variants: what an image is built for (plain, NVIDIA GPUs, AWS Neuron accelerators).
STANDARD: Final = "standard"
NVIDIA: Final = "nvidia"
NEURON: Final = "neuron"
VARIANTS: Final = (STANDARD, NVIDIA, NEURON)

#: The alias version that follows each release (`al2023@latest`).
LATEST: Final = "latest"

#: Karpenter's default EBS volume size (its `DefaultEBS`), for the volume that holds pod storage.
DEFAULT_EBS_GIB: Final = 20
#: The root device of EKS's Linux images.
LINUX_ROOT_DEVICE: Final = "/dev/xvda"
#: Where EKS publishes its optimized Amazon Linux images (AL2023 and AL2).
EKS_SSM_ROOT: Final = "/aws/service/eks/"

#: The operating systems a family's nodes report (`kubernetes.io/os`).
LINUX: Final = "linux"
WINDOWS: Final = "windows"

#: User data formats: how a node of the family joins the cluster (`carpool.launch.userdata` renders each).
NODEADM: Final = "nodeadm"  # a MIME archive holding a nodeadm NodeConfig (AL2023)
BOTTLEROCKET_TOML: Final = "bottlerocket-toml"  # Bottlerocket's settings TOML
BOOTSTRAP_SH: Final = "bootstrap.sh"  # a bash script calling /etc/eks/bootstrap.sh (AL2)
POWERSHELL: Final = "powershell"  # a PowerShell block calling Start-EKSBootstrap.ps1 (Windows)
VERBATIM: Final = "verbatim"  # the node class's own spec.userData: carpool cannot know how a custom image joins


@dataclass(frozen=True)
class AliasPath:
    """One SSM parameter of an alias and what the image behind it is for.

    `variants` has more than one entry when one image serves several accelerator kinds (AL2's GPU image
    bundles nvidia and neuron drivers; Bottlerocket's x86_64 image ships the neuron driver).
    """

    path: str
    arch: str  # Kubernetes arch: amd64 | arm64
    variants: tuple[str, ...]


@dataclass(frozen=True)
class DefaultVolume:
    """One block device mapping a family's launch template gets when the node class names none."""

    device_name: str
    size_gib: int


#: The root volume Karpenter gives a Linux node, holding the OS and the pods' ephemeral storage.
LINUX_ROOT: Final = DefaultVolume(LINUX_ROOT_DEVICE, DEFAULT_EBS_GIB)


@dataclass(frozen=True)
class AmiFamily:
    """One AMI family. Subclasses (one per family module) say where its images are published.

    - `name`: the alias spelling (`al2023`), which carpool passes around; `api_name` the EC2NodeClass
      `spec.amiFamily` spelling (`AL2023`).
    - `kind`: what sizing calls it: the name, except `windows` for every Windows Server version, as they
      size alike (and the CLI takes a bare `windows`).
    - `user_data`: its format (`NODEADM`, ... `VERBATIM`).
    - `pods_per_core`: `kubelet.podsPerCore` is honoured (Bottlerocket has no such setting).
    - `eni_pod_density`: max pods follows the ENI/IP limits; otherwise it is the kubelet default 110.
    - `reserves_pids`: its bootstrap can reserve `pid` in kube/system-reserved (Bottlerocket's cannot).
    - `many_cluster_dns`: its bootstrap takes a list of cluster DNS addresses (Windows' takes one).
    - `instance_store_raid0`: its bootstrap can assemble the instance store (`instanceStorePolicy: RAID0`).
    - `volumes`: the default block device mappings; `ephemeral_device` the one holding the kubelet's and
      containerd's data (None: a custom image, whose layout carpool cannot know).
    - `unsupported_types`: instance type name prefixes its images do not boot.
    - `ssm_root`: the public SSM parameter tree its aliases resolve under (empty: it has no alias).
    """

    name: str
    api_name: str
    kind: str
    user_data: str
    volumes: tuple[DefaultVolume, ...]
    ephemeral_device: str | None
    node_os: str = LINUX
    windows_build: str | None = None
    alias: bool = True
    pods_per_core: bool = True
    eni_pod_density: bool = True
    reserves_pids: bool = True
    many_cluster_dns: bool = True
    instance_store_raid0: bool = True
    unsupported_types: tuple[str, ...] = ()
    ssm_root: str = ""

    @property
    def carpool_user_data(self) -> bool:
        """carpool renders this family's user data, stating max pods and kube-reserved (custom AMIs get
        the user's user data verbatim)."""
        return self.user_data != VERBATIM

    @property
    def windows(self) -> bool:
        return self.node_os == WINDOWS

    @property
    def latest_only(self) -> bool:
        """AWS publishes only a "latest" parameter for the Windows EKS images."""
        return self.windows

    @property
    def default_ephemeral_gib(self) -> int:
        """The size of the default volume that holds pod storage (the last one for a custom image)."""
        on_device = [v for v in self.volumes if v.device_name == self.ephemeral_device]
        return (on_device or list(self.volumes))[-1].size_gib

    def alias_paths(self, k8s_version: str, version: str) -> list[AliasPath]:
        """Every SSM path `name@version` may resolve through for Kubernetes `k8s_version` (`1.32`), in a
        fixed order (x86_64 first, plain first). A family without aliases has none."""
        return []

    def version_problem(self, alias: str, cluster_version: str, minor: int) -> str | None:
        """Why EKS publishes no images of this family for the cluster's minor version, or None."""
        return None
