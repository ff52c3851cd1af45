"""How many pods a node can run: the VPC CNI's IP limits, prefix delegation, caps and kubelet overrides.

This is where carpool beats Karpenter on node sizing: Karpenter derives max pods from ENIs alone
(aws/karpenter-provider-aws#8210), so with prefix delegation on it thinks an m5.large holds 29 pods when the
node will accept 110, and launches ~4x the nodes for small pods. We model prefix delegation exactly as
AWS's `max-pods-calculator.sh --cni-prefix-delegation-enabled` computes it, plus custom networking and
reserved ENIs.

There is no memory-based limit here: a high max pods costs memory through kube-reserved
(11 MiB x max pods + 255 MiB, see `carpool.sizing.reserved`), which the user data states explicitly, so
the node's allocatable shrinks and the scheduler, which packs by allocatable, sees the cost.
"""

from __future__ import annotations

from dataclasses import dataclass

from carpool.amifamily import AmiFamily
from carpool.catalog.instance_type import InstanceType
from carpool.sizing.eni_limits import default_card_enis
from carpool.sizing.settings import KubeletSettings, NetworkSettings

#: Pods that use host networking and need no pod IP (aws-node and kube-proxy).
HOST_NETWORK_PODS = 2
#: IPs in the /28 prefix that prefix delegation puts in each secondary-IP slot.
IPS_PER_PREFIX = 16
#: EKS recommended max pods (max-pods-calculator.sh): 110 up to 30 vCPUs, else 250. The calculator applies
#: it to whatever IP count it computed, so an instance with fewer pod IPs keeps its lower count.
PREFIX_CAP_SMALL = 110
PREFIX_CAP_LARGE = 250
PREFIX_CAP_VCPU_THRESHOLD = 30
#: kubelet's default max pods, used where the IP limit does not apply (Windows).
KUBELET_DEFAULT_MAX_PODS = 110


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
    enis = default_card_enis(it) - network.reserved_enis - (1 if network.custom_networking else 0)
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
    """The EKS recommended ceiling: 110 pods up to 30 vCPUs, 250 above."""
    return PREFIX_CAP_SMALL if vcpus <= PREFIX_CAP_VCPU_THRESHOLD else PREFIX_CAP_LARGE


def prefix_delegation_ips(it: InstanceType, network: NetworkSettings = PREFIX_MODE) -> int:
    """`enis * ((ipv4PerEni - 1) * 16) + 2`: pod IPs with a /28 prefix in every secondary slot (uncapped)."""
    enis = pod_enis(it, network)
    if enis == 0:
        return 0
    return enis * ((it.ipv4_per_eni - 1) * IPS_PER_PREFIX) + HOST_NETWORK_PODS


def prefix_delegation_pods(it: InstanceType, network: NetworkSettings = PREFIX_MODE) -> int:
    """What `max-pods-calculator.sh --cni-prefix-delegation-enabled` prints for `it`.

    The calculator counts prefix-delegated IPs on Nitro instances and secondary IPs elsewhere (the CNI
    cannot delegate prefixes there), then takes the lower of that and the EKS cap for the vCPU count:
    t3.nano 34, c6g.medium 98, t3.medium 110, m5.24xlarge 250, a Xen i3.16xlarge 250 (737 secondary IPs).
    """
    ips = prefix_delegation_ips(it, network) if it.nitro else eni_limited_pods(it, network)
    return min(ips, prefix_delegation_cap(it.vcpus))


def resolve(it: InstanceType, family: AmiFamily, network: NetworkSettings, kubelet: KubeletSettings) -> MaxPods:
    """Max pods for `it`: override, else Windows default, else the network limit; then podsPerCore."""
    eni_limited = eni_limited_pods(it, network)
    notes: list[str] = _network_notes(it, network, family)
    computed_notes: list[str] = []
    computed = _computed(it, family, network, eni_limited, computed_notes)
    if kubelet.max_pods is not None:
        value = kubelet.max_pods
        notes.append(f"kubelet.maxPods={value} overrides the computed {computed}")
        notes.extend(_ip_shortfall(it, network, family, value))
    else:
        value = computed
        notes.extend(computed_notes)
    value = _pods_per_core(it, family, kubelet, value, notes)
    return MaxPods(value, eni_limited, tuple(notes))


def _computed(
    it: InstanceType, family: AmiFamily, network: NetworkSettings, eni_limited: int, notes: list[str]
) -> int:
    """Max pods without a kubelet override: the AMI default, the calculator's prefix-delegation value, or
    the ENI-limited count (the eni-max-pods.txt value the AMIs use by default)."""
    if not family.eni_pod_density:
        if network.prefix_delegation or network.custom_networking:
            notes.append(f"{family.kind}: max pods is the kubelet default {KUBELET_DEFAULT_MAX_PODS}; VPC CNI settings not modelled")
        return KUBELET_DEFAULT_MAX_PODS
    if network.prefix_delegation:
        return _prefix_delegated(it, network, eni_limited, notes)
    return eni_limited


def _network_notes(it: InstanceType, network: NetworkSettings, family: AmiFamily) -> list[str]:
    if not family.eni_pod_density:
        return []
    notes = []
    if network.custom_networking:
        notes.append(f"custom networking: the primary ENI carries no pods ({pod_enis(it, network)} of {default_card_enis(it)} ENIs used)")
    if network.reserved_enis:
        notes.append(f"{network.reserved_enis} ENI(s) reserved: {pod_enis(it, network)} of {default_card_enis(it)} ENIs used for pods")
    if pod_enis(it, network) == 0:
        notes.append("no ENI is left for pods: max pods 0")
    return notes


def _prefix_delegated(it: InstanceType, network: NetworkSettings, eni_limited: int, notes: list[str]) -> int:
    value = prefix_delegation_pods(it, network)
    cap = f"the EKS recommended {value} for {'<=' if it.vcpus <= PREFIX_CAP_VCPU_THRESHOLD else '>'} {PREFIX_CAP_VCPU_THRESHOLD} vCPUs"
    if not it.nitro:
        used = f"the {eni_limited} ENI-limited pods capped at {cap}" if value < eni_limited else "ENI-limited max pods used"
        notes.append(f"non-Nitro ({it.hypervisor or 'unknown'} hypervisor): prefix delegation ignored, {used}")
        return value
    ips = prefix_delegation_ips(it, network)
    if value < ips:
        below = f" (below the {eni_limited} ENI-limited pods; set kubelet.maxPods to keep them)" if value < eni_limited else ""
        notes.append(f"prefix delegation: {ips} pod IPs, capped at {cap}{below}")
    else:
        notes.append(f"prefix delegation: {value} pods (ENI-limited would be {eni_limited})")
    return value


def _ip_shortfall(it: InstanceType, network: NetworkSettings, family: AmiFamily, value: int) -> list[str]:
    """Warn when an override exceeds the pod IPs the CNI can hand out (extra pods would hang creating)."""
    if not family.eni_pod_density:
        return []
    if network.prefix_delegation and it.nitro:
        ips = prefix_delegation_ips(it, network)
    else:
        ips = eni_limited_pods(it, network)
    if value <= ips:
        return []
    return [f"kubelet.maxPods={value} exceeds the {ips} pod IPs the VPC CNI can assign; pods beyond that stay ContainerCreating"]


def _pods_per_core(it: InstanceType, family: AmiFamily, kubelet: KubeletSettings, value: int, notes: list[str]) -> int:
    per_core = kubelet.pods_per_core
    if not per_core:
        return value
    if not family.pods_per_core:
        notes.append(f"kubelet.podsPerCore ignored: {family.kind} has no such setting")
        return value
    cap = per_core * it.vcpus
    if cap < value:
        notes.append(f"kubelet.podsPerCore={per_core} x {it.vcpus} vCPUs caps max pods at {cap} (was {value})")
        return cap
    return value
