"""Inputs to node sizing: the cluster's network mode, the node class's kubelet settings, the AMI family's
behaviour, and capacity learned from registered nodes.

All plain frozen values, so sizing stays a pure function of them. `network_settings` turns what the
cluster and the EC2NodeClass say (aws-node env, carpool annotations) into `NetworkSettings`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from carpool import labels as L

#: aws-node (VPC CNI) environment variables that change how many pods a node can hold.
CNI_PREFIX_DELEGATION = "ENABLE_PREFIX_DELEGATION"
CNI_CUSTOM_NETWORKING = "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG"

_TRUE = frozenset({"1", "t", "true"})
_FALSE = frozenset({"0", "f", "false"})


@dataclass(frozen=True, slots=True)
class NetworkSettings:
    """How the VPC CNI hands out pod IPs on the nodes carpool launches.

    - `prefix_delegation`: each secondary IP slot holds a /28 prefix (16 IPs) - Nitro instances only.
    - `custom_networking`: pods use secondary ENIs in other subnets, so the primary ENI carries none.
    - `reserved_enis`: ENIs kept for something other than pods (e.g. another CNI, trunk ENIs).
    """

    prefix_delegation: bool = False
    custom_networking: bool = False
    reserved_enis: int = 0

    def __post_init__(self) -> None:
        if self.reserved_enis < 0:
            raise ValueError(f"reserved_enis must be >= 0, got {self.reserved_enis}")


@dataclass(frozen=True, slots=True)
class KubeletSettings:
    """The EC2NodeClass `spec.kubelet` fields that change node size, as the user wrote them.

    Quantities stay raw strings (`"1Gi"`, `"10%"`); sizing parses them and names the field on error.
    """

    max_pods: int | None = None
    pods_per_core: int | None = None
    kube_reserved: Mapping[str, str] = field(default_factory=dict)
    system_reserved: Mapping[str, str] = field(default_factory=dict)
    eviction_hard: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, value in (("maxPods", self.max_pods), ("podsPerCore", self.pods_per_core)):
            if value is not None and value < 0:
                raise ValueError(f"kubelet.{name} must be >= 0, got {value}")

    @classmethod
    def from_spec(cls, kubelet: Any | None) -> KubeletSettings:
        """From an `EC2NodeClass.spec.kubelet` model (or anything with those attributes); None -> defaults."""
        if kubelet is None:
            return cls()
        return cls(
            max_pods=getattr(kubelet, "max_pods", None),
            pods_per_core=getattr(kubelet, "pods_per_core", None),
            kube_reserved=dict(getattr(kubelet, "kube_reserved", None) or {}),
            system_reserved=dict(getattr(kubelet, "system_reserved", None) or {}),
            eviction_hard=dict(getattr(kubelet, "eviction_hard", None) or {}),
        )


@dataclass(frozen=True, slots=True)
class LearnedCapacity:
    """Capacity a registered node of this type actually reported (see `carpool.capacity`).

    Replaces the estimate: the VM-overhead guess is only a guess, the node's own report is not.
    """

    memory_bytes: int
    cpu_millis: int | None = None
    pods: int | None = None
    ephemeral_storage_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class AmiProfile:
    """How an AMI family's bootstrap sizes the kubelet (mirrors Karpenter's per-family feature flags).

    - `carpool_user_data`: carpool renders this family's user data, stating max pods and kube-reserved
      (custom AMIs get the user's user data verbatim).
    - `pods_per_core`: `kubelet.podsPerCore` is honoured (Bottlerocket has no such setting).
    - `eni_pod_density`: max pods follows the ENI/IP limits; otherwise it is the kubelet default 110.
    """

    name: str
    carpool_user_data: bool
    pods_per_core: bool
    eni_pod_density: bool
    default_ephemeral_gib: int = 20

    @property
    def windows(self) -> bool:
        return self.name.startswith("windows")


AL2023 = AmiProfile("al2023", carpool_user_data=True, pods_per_core=True, eni_pod_density=True)
AL2 = AmiProfile("al2", carpool_user_data=True, pods_per_core=True, eni_pod_density=True)
BOTTLEROCKET = AmiProfile("bottlerocket", carpool_user_data=True, pods_per_core=False, eni_pod_density=True)
CUSTOM = AmiProfile("custom", carpool_user_data=False, pods_per_core=True, eni_pod_density=True)
WINDOWS = AmiProfile(
    "windows", carpool_user_data=True, pods_per_core=True, eni_pod_density=False, default_ephemeral_gib=50
)

_PROFILES = {p.name: p for p in (AL2023, AL2, BOTTLEROCKET, CUSTOM, WINDOWS)}


def ami_profile(ami_family: str | AmiProfile) -> AmiProfile:
    """The profile for an AMI family name as EC2NodeClass spells it (`windows2022` -> windows)."""
    if isinstance(ami_family, AmiProfile):
        return ami_family
    key = ami_family.strip().lower()
    if key.startswith("windows"):
        key = "windows"
    profile = _PROFILES.get(key)
    if profile is None:
        raise ValueError(f"unknown AMI family {ami_family!r} (expected one of {', '.join(sorted(_PROFILES))})")
    return profile


# -- detection ---------------------------------------------------------------------------------------
def network_settings(
    cni_env: Mapping[str, str], nodeclass_annotations: Mapping[str, str], reserved_enis: int = 0
) -> NetworkSettings:
    """Network mode from the cluster's aws-node env and the EC2NodeClass annotations.

    An annotation (`carpool.dev/prefix-delegation`, `carpool.dev/custom-networking`) set to true/false
    wins over the CNI env: it lets a node class opt out (or in) when the DaemonSet env is not the whole
    story, e.g. during a CNI migration. Env values are read as the CNI reads them (Go `ParseBool`;
    anything unparsable counts as false); an unparsable annotation is an error naming the annotation.
    """
    return NetworkSettings(
        prefix_delegation=_decide(nodeclass_annotations, L.PREFIX_DELEGATION, cni_env, CNI_PREFIX_DELEGATION),
        custom_networking=_decide(nodeclass_annotations, L.CUSTOM_NETWORKING, cni_env, CNI_CUSTOM_NETWORKING),
        reserved_enis=reserved_enis,
    )


def _decide(annotations: Mapping[str, str], annotation: str, env: Mapping[str, str], variable: str) -> bool:
    if annotation in annotations:
        value = _parse_bool(annotations[annotation])
        if value is None:
            raise ValueError(f"annotation {annotation}: expected \"true\" or \"false\", got {annotations[annotation]!r}")
        return value
    return bool(_parse_bool(env.get(variable, "")))


def _parse_bool(raw: str) -> bool | None:
    value = str(raw).strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    return None
