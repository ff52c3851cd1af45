"""How many pods a node can run: the VPC CNI's IP limits, prefix delegation, caps and kubelet overrides.

This is where carpool beats Karpenter on node sizing: Karpenter derives max pods from ENIs alone
(aws/karpenter-provider-aws#8210), so with prefix delegation on it thinks an m5.large holds 29 pods when the
node will accept 110, and launches ~4x the nodes for small pods. We model prefix delegation, custom
networking and reserved ENIs, and guard small instances where prefix delegation would admit more pods
than their memory can carry.
"""

from __future__ import annotations

from dataclasses import dataclass

from carpool.catalog.instance_type import InstanceType
from carpool.sizing.settings import AmiProfile, KubeletSettings, NetworkSettings

#: Pods that use host networking and need no pod IP (aws-node and kube-proxy).
HOST_NETWORK_PODS = 2
#: IPs in the /28 prefix that prefix delegation puts in each secondary-IP slot.
IPS_PER_PREFIX = 16
#: EKS recommended max pods under prefix delegation (max-pods-calculator.sh): 110 up to 30 vCPUs, else 250.
PREFIX_CAP_SMALL = 110
PREFIX_CAP_LARGE = 250
PREFIX_CAP_VCPU_THRESHOLD = 30
#: kubelet's default max pods, used where the IP limit does not apply (Windows).
KUBELET_DEFAULT_MAX_PODS = 110
#: kube-reserved memory formula (EKS AMIs, Bottlerocket, Karpenter): 11 MiB per pod + 255 MiB.
MIB_PER_POD = 11
BASE_RESERVED_MIB = 255
#: The small-instance guard: under prefix delegation, max pods is lowered until the per-pod overhead the
#: formula above models (11 MiB x pods + 255 MiB) fits in this share of the node's memory capacity.
#: Without it a c6g.medium (2 GiB) would take 98 pods whose kubelet/runtime overhead alone is ~1.3 GiB,
#: and AL2023 would not even reserve it (it reserves for the 8 ENI-limited pods). nodeadm has a similar,
#: opt-in, banded limit (feature gate MemoryLimitMaxPods); 25% is a flat, easy-to-explain bound that
#: never binds from 8 GiB up (110 pods need 5,860 MiB of capacity; an 8 GiB node has ~7,577 MiB).
POD_OVERHEAD_SHARE = 0.25


SECONDARY_IP_MODE = NetworkSettings()
PREFIX_MODE = NetworkSettings(prefix_delegation=True)


@dataclass(frozen=True, slots=True)
class MaxPods:
    """The max pods decision and why."""

    value: int
    eni_limited: int
    notes: tuple[str, ...] = ()


def pod_enis(it: InstanceType, network: NetworkSettings) -> int:
    """ENIs of the default network card that carry pod IPs: minus reserved ENIs, minus the primary ENI
    under custom networking (its pods would live in the node subnet, which custom networking avoids)."""
    enis = it.max_enis - network.reserved_enis - (1 if network.custom_networking else 0)
    return max(enis, 0)


def eni_limited_pods(it: InstanceType, network: NetworkSettings = SECONDARY_IP_MODE) -> int:
    """`enis * (ipv4PerEni - 1) + 2`: one IP per ENI is the ENI's own, +2 host-network pods.

    With the default `NetworkSettings` this is the published eni-max-pods.txt value. No usable ENI gives
    0 (as Karpenter does): such a node cannot run any pod that needs an IP.
    """
    enis = pod_enis(it, network)
    if enis == 0:
        return 0
    return enis * (it.ipv4_per_eni - 1) + HOST_NETWORK_PODS


def prefix_delegation_cap(vcpus: int) -> int:
    return PREFIX_CAP_SMALL if vcpus <= PREFIX_CAP_VCPU_THRESHOLD else PREFIX_CAP_LARGE


def prefix_delegation_ips(it: InstanceType, network: NetworkSettings = PREFIX_MODE) -> int:
    """`enis * ((ipv4PerEni - 1) * 16) + 2`: pod IPs with a /28 prefix in every secondary slot (uncapped)."""
    enis = pod_enis(it, network)
    if enis == 0:
        return 0
    return enis * ((it.ipv4_per_eni - 1) * IPS_PER_PREFIX) + HOST_NETWORK_PODS


def prefix_delegation_pods(it: InstanceType, network: NetworkSettings = PREFIX_MODE) -> int:
    """Max pods under prefix delegation before the small-instance guard: IPs capped at the EKS 110/250."""
    return min(prefix_delegation_ips(it, network), prefix_delegation_cap(it.vcpus))


def memory_guard_limit(memory_capacity_mib: int, share: float = POD_OVERHEAD_SHARE) -> int:
    """The most pods whose modelled overhead (11 MiB each + 255 MiB) fits in `share` of the memory."""
    return max(int((memory_capacity_mib * share - BASE_RESERVED_MIB) // MIB_PER_POD), 0)


def resolve(
    it: InstanceType,
    profile: AmiProfile,
    network: NetworkSettings,
    kubelet: KubeletSettings,
    memory_capacity_mib: int,
    share: float = POD_OVERHEAD_SHARE,
) -> MaxPods:
    """Max pods for `it`: override, else Windows default, else network limit (+guard); then podsPerCore."""
    eni_limited = eni_limited_pods(it, network)
    notes: list[str] = _network_notes(it, network, profile)
    computed_notes: list[str] = []
    computed = _computed(it, profile, network, eni_limited, memory_capacity_mib, share, computed_notes)
    if kubelet.max_pods is not None:
        value = kubelet.max_pods
        notes.append(f"kubelet.maxPods={value} overrides the computed {computed}")
        notes.extend(_ip_shortfall(it, network, profile, value))
    else:
        value = computed
        notes.extend(computed_notes)
    value = _pods_per_core(it, profile, kubelet, value, notes)
    return MaxPods(value, eni_limited, tuple(notes))


def _computed(
    it: InstanceType,
    profile: AmiProfile,
    network: NetworkSettings,
    eni_limited: int,
    memory_mib: int,
    share: float,
    notes: list[str],
) -> int:
    """Max pods without a kubelet override: the AMI default, prefix-delegated IPs, or ENI-limited IPs."""
    if not profile.eni_pod_density:
        if network.prefix_delegation or network.custom_networking:
            notes.append(f"{profile.name}: max pods is the kubelet default {KUBELET_DEFAULT_MAX_PODS}; VPC CNI settings not modelled")
        return KUBELET_DEFAULT_MAX_PODS
    if network.prefix_delegation and it.nitro:
        return _prefix_delegated(it, network, eni_limited, memory_mib, share, notes)
    return eni_limited


def _network_notes(it: InstanceType, network: NetworkSettings, profile: AmiProfile) -> list[str]:
    if not profile.eni_pod_density:
        return []
    notes = []
    if network.prefix_delegation and not it.nitro:
        notes.append(
            f"non-Nitro ({it.hypervisor or 'unknown'} hypervisor): prefix delegation ignored, ENI-limited max pods used"
        )
    if network.custom_networking:
        notes.append(f"custom networking: the primary ENI carries no pods ({pod_enis(it, network)} of {it.max_enis} ENIs used)")
    if network.reserved_enis:
        notes.append(f"{network.reserved_enis} ENI(s) reserved: {pod_enis(it, network)} of {it.max_enis} ENIs used for pods")
    if pod_enis(it, network) == 0:
        notes.append("no ENI is left for pods: max pods 0")
    return notes


def _prefix_delegated(
    it: InstanceType, network: NetworkSettings, eni_limited: int, memory_mib: int, share: float, notes: list[str]
) -> int:
    ips = prefix_delegation_ips(it, network)
    value = prefix_delegation_pods(it, network)
    if value < ips:
        below = f" (below the {eni_limited} ENI-limited pods; set kubelet.maxPods to keep them)" if value < eni_limited else ""
        notes.append(
            f"prefix delegation: {ips} pod IPs, capped at the EKS recommended {value} "
            f"for {'<=' if it.vcpus <= PREFIX_CAP_VCPU_THRESHOLD else '>'} {PREFIX_CAP_VCPU_THRESHOLD} vCPUs{below}"
        )
    else:
        notes.append(f"prefix delegation: {value} pods (ENI-limited would be {eni_limited})")
    limit = max(memory_guard_limit(memory_mib, share), eni_limited)
    if value > limit:
        notes.append(
            f"small-instance guard: max pods capped at {limit} (prefix delegation allows {value}): "
            f"{MIB_PER_POD} MiB x {value} pods + {BASE_RESERVED_MIB} MiB of kubelet/runtime overhead would take "
            f"{MIB_PER_POD * value + BASE_RESERVED_MIB}Mi, more than {share:.0%} of the {memory_mib}Mi memory"
            + (" (never below the ENI-limited count)" if limit == eni_limited else "")
        )
        value = limit
    return value


def _ip_shortfall(it: InstanceType, network: NetworkSettings, profile: AmiProfile, value: int) -> list[str]:
    """Warn when an override exceeds the pod IPs the CNI can hand out (extra pods would hang creating)."""
    if not profile.eni_pod_density:
        return []
    if network.prefix_delegation and it.nitro:
        ips = prefix_delegation_ips(it, network)
    else:
        ips = eni_limited_pods(it, network)
    if value <= ips:
        return []
    return [f"kubelet.maxPods={value} exceeds the {ips} pod IPs the VPC CNI can assign; pods beyond that stay ContainerCreating"]


def _pods_per_core(it: InstanceType, profile: AmiProfile, kubelet: KubeletSettings, value: int, notes: list[str]) -> int:
    per_core = kubelet.pods_per_core
    if not per_core:
        return value
    if not profile.pods_per_core:
        notes.append(f"kubelet.podsPerCore ignored: {profile.name} has no such setting")
        return value
    cap = per_core * it.vcpus
    if cap < value:
        notes.append(f"kubelet.podsPerCore={per_core} x {it.vcpus} vCPUs caps max pods at {cap} (was {value})")
        return cap
    return value
