"""What one EC2 instance's kubelet starts with, as the instance itself would give it: the machine (the
instance type's size), its identity (EC2 private DNS name, `aws:///ZONE/i-...` providerID, private IP) and
the kubelet configuration and flags its boot writes from carpool's user data (AL2023: the real nodeadm's
reading of the NodeConfig; Bottlerocket: its settings TOML).

`carpool_boot.node_spec` makes one from an instance; `kubelets.HollowKubelets` starts a hollow kubelet from
it. This module is the contract between the two."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Machine:
    """What the instance's hardware reports to the kubelet (cAdvisor's machine info on a real node)."""

    cpu_millis: int
    memory_bytes: int
    #: the root volume's size as the kubelet's filesystem stats see it
    ephemeral_storage_bytes: int


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str  # NoSchedule | PreferNoSchedule | NoExecute

    def flag(self) -> str:
        """As `--register-with-taints` takes it."""
        return f"{self.key}={self.value}:{self.effect}"


@dataclass(frozen=True)
class NodeSpec:
    """One instance's kubelet: everything a real node's boot decides before the kubelet starts."""

    #: the Node's name: the instance's EC2 private DNS name (ip-10-0-1-2.ec2.internal)
    name: str
    #: `aws:///us-east-1a/i-0123...`
    provider_id: str
    #: the instance's private IPv4 address (the Node's InternalIP)
    node_ip: str
    machine: Machine
    #: a `kubelet.config.k8s.io/v1beta1` KubeletConfiguration as the boot writes it (maxPods, kubeReserved,
    #: systemReserved, evictionHard, clusterDNS, registerWithTaints, ...); the kubelet reads it from a file
    kubelet_config: dict[str, Any]
    #: `--node-labels`, as the boot passes them (a real kubelet refuses restricted ones at start-up)
    node_labels: dict[str, str] = field(default_factory=dict)
    #: `--register-with-taints`
    register_with_taints: tuple[Taint, ...] = ()
