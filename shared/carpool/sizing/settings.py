"""Inputs to node sizing: the cluster's network mode, the node class's kubelet settings, the AMI family a
node sizes as (its facts are in `carpool.amifamily`), and capacity learned from registered nodes.

All plain frozen values, so sizing stays a pure function of them. `network_settings` turns what the
cluster and the EC2NodeClass say (aws-node env, carpool annotations) into `NetworkSettings`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from carpool import labels as L
from carpool.amifamily import KINDS, AmiFamily, family_of_kind
from carpool.amifamily.family import WINDOWS

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


def sizing_family(ami_family: str | AmiFamily) -> AmiFamily:
    """The family a node of `ami_family` sizes as (its feature flags are Karpenter's per-family ones).

    Every Windows Server version sizes alike, so any `windows...` name, the CLI's bare `windows` too, is
    Windows; otherwise a family's name in either spelling (`windows2022`, `AL2023`).
    """
    if isinstance(ami_family, AmiFamily):
        return ami_family
    key = ami_family.strip().lower()
    if key.startswith(WINDOWS):
        key = WINDOWS
    family = family_of_kind(key)
    if family is None:
        raise ValueError(f"unknown AMI family {ami_family!r} (expected one of {', '.join(KINDS)})")
    return family


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
