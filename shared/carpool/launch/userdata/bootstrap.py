"""`NodeBootstrap`: everything a node needs to join the cluster, independent of the OS that reads it.

The three renderers (AL2023 nodeadm, Bottlerocket TOML, AL2 bootstrap.sh) take this one value, so the
launch-template grouping can hash it and know that equal bootstraps give byte-equal user data.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from carpool import labels as wk
from carpool import quantity
from carpool.resources import CPU, EPHEMERAL_STORAGE, MEMORY, Resources
from carpool.taints import NO_EXECUTE, Taint

#: Every node registers with this taint; carpool removes it once it has recorded the registration,
#: so no pod lands on a node carpool has not yet accounted for (Karpenter v1 does the same).
UNREGISTERED = Taint(wk.UNREGISTERED_TAINT, NO_EXECUTE)


@dataclass(frozen=True)
class NodeBootstrap:
    """Cluster identity and kubelet settings for one launch-template group.

    `kube_reserved`/`system_reserved` are `carpool.resources.Resources` (cpu in millicores, memory and
    ephemeral-storage in bytes), so they are exactly what `carpool.sizing` computed allocatable with;
    they are written as Kubernetes quantities (`90m`, `574Mi`, `1Gi`). Launch always passes the sized
    node's kube-reserved (cpu, memory for `max_pods`, ephemeral-storage) and every renderer writes it
    out: the AMIs' own defaults reserve memory for other pod counts (nodeadm and bootstrap.sh for the
    ENI-limited count whatever max pods is set to), which would make the node's allocatable differ from
    the scheduler's. `eviction_hard` keeps the user's
    strings (`memory.available: 100Mi`). `cluster_cidr` is the service CIDR nodeadm needs.
    `user_data` is the node class's own `spec.userData`, merged per family.

    The other `spec.kubelet` fields go where Karpenter puts them for each family
    (pkg/providers/amifamily/bootstrap): `cluster_dns` is `clusterDNS[0]` (or the cluster's DNS) and
    `more_cluster_dns` the rest of `clusterDNS` (only a NodeConfig can carry more than one);
    `eviction_soft`/`eviction_soft_grace_period` keep the user's strings; `raid0` is
    `instanceStorePolicy: RAID0` (the instance store as one array for the kubelet and containerd).
    """

    cluster_name: str
    endpoint: str
    ca_bundle: str  # base64 PEM, as EKS DescribeCluster returns it
    cluster_cidr: str | None = None
    cluster_dns: str | None = None
    max_pods: int | None = None
    kube_reserved: Resources = field(default_factory=dict)
    system_reserved: Resources = field(default_factory=dict)
    eviction_hard: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    user_data: str | None = None
    more_cluster_dns: tuple[str, ...] = ()
    pods_per_core: int | None = None
    eviction_soft: Mapping[str, str] = field(default_factory=dict)
    eviction_soft_grace_period: Mapping[str, str] = field(default_factory=dict)
    eviction_max_pod_grace_period: int | None = None
    image_gc_high_threshold_percent: int | None = None
    image_gc_low_threshold_percent: int | None = None
    cpu_cfs_quota: bool | None = None
    raid0: bool = False

    def register_taints(self) -> list[Taint]:
        """taints, then startup taints, then the unregistered taint; duplicates dropped, order kept."""
        return list(dict.fromkeys([*self.taints, *self.startup_taints, UNREGISTERED]))

    def sorted_labels(self) -> list[tuple[str, str]]:
        return sorted(self.labels.items())

    @property
    def ipv6(self) -> bool:
        if not self.cluster_dns:
            return False
        try:
            return ipaddress.ip_address(self.cluster_dns).version == 6
        except ValueError:
            return False

    def fingerprint(self) -> str:
        """sha256 of a canonical rendering of every field (the launch-template grouping key)."""
        doc = {
            "cluster": [self.cluster_name, self.endpoint, self.ca_bundle, self.cluster_cidr, self.cluster_dns],
            "maxPods": self.max_pods,
            "kubeReserved": sorted(self.kube_reserved.items()),
            "systemReserved": sorted(self.system_reserved.items()),
            "evictionHard": sorted(self.eviction_hard.items()),
            "labels": self.sorted_labels(),
            "taints": [[t.key, t.value, t.effect] for t in self.register_taints()],
            "userData": self.user_data,
            "moreClusterDNS": list(self.more_cluster_dns),
            "podsPerCore": self.pods_per_core,
            "evictionSoft": sorted(self.eviction_soft.items()),
            "evictionSoftGracePeriod": sorted(self.eviction_soft_grace_period.items()),
            "evictionMaxPodGracePeriod": self.eviction_max_pod_grace_period,
            "imageGC": [self.image_gc_high_threshold_percent, self.image_gc_low_threshold_percent],
            "cpuCFSQuota": self.cpu_cfs_quota,
            "raid0": self.raid0,
        }
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


_ORDER = {CPU: 0, MEMORY: 1, EPHEMERAL_STORAGE: 2}


def quantities(rl: Resources) -> dict[str, str]:
    """Resources back to kubelet quantity strings, cpu/memory/ephemeral-storage first, then by name."""
    out = {}
    for name in sorted(rl, key=lambda n: (_ORDER.get(n, 3), n)):
        v = rl[name]
        if name == CPU:
            out[name] = quantity.format_cpu(v)
        elif name in (MEMORY, EPHEMERAL_STORAGE):
            out[name] = quantity.format_bytes(v)
        else:
            out[name] = str(v)
    return out


def joined(pairs: Mapping[str, str], sep: str = "=") -> str:
    """`k1<sep>v1,k2<sep>v2` in key order (kubelet flag map syntax)."""
    return ",".join(f"{k}{sep}{v}" for k, v in sorted(pairs.items()))


def kubelet_field_flags(b: NodeBootstrap, quoted: bool = False) -> list[str]:
    """The `spec.kubelet` flags beyond sizing, as Karpenter's `kubeletExtraArgs` writes them (AL2, and
    Windows, whose PowerShell wants the map values `quoted`)."""
    def flag_map(value: str) -> str:
        return f'"{value}"' if quoted else value

    args = []
    if b.pods_per_core is not None:
        args.append(f"--pods-per-core={b.pods_per_core}")
    if b.eviction_soft:
        args.append("--eviction-soft=" + flag_map(joined(dict(b.eviction_soft), "<")))
    if b.eviction_soft_grace_period:
        args.append("--eviction-soft-grace-period=" + flag_map(joined(dict(b.eviction_soft_grace_period))))
    if b.eviction_max_pod_grace_period is not None:
        args.append(f"--eviction-max-pod-grace-period={b.eviction_max_pod_grace_period}")
    if b.image_gc_high_threshold_percent is not None:
        args.append(f"--image-gc-high-threshold={b.image_gc_high_threshold_percent}")
    if b.image_gc_low_threshold_percent is not None:
        args.append(f"--image-gc-low-threshold={b.image_gc_low_threshold_percent}")
    if b.cpu_cfs_quota is not None:
        args.append(f"--cpu-cfs-quota={'true' if b.cpu_cfs_quota else 'false'}")
    return args
