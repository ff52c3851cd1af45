"""`size_node`: what a node of a given instance type will offer pods, before it exists.

The scheduler packs pods against `NodeSize.allocatable`; launch puts `max_pods` and the reservations
(`kube_reserved`, `system_reserved`) into user data, so a node reserves what the scheduler assumed. Getting
these right is the whole game: too high and pods land on a node that cannot hold them, too low and we
launch more (or bigger) nodes than needed.
"""

from __future__ import annotations

from dataclasses import dataclass

from carpool import resources as R
from carpool.amifamily import AL2023, AmiFamily
from carpool.catalog.instance_type import AMD64, InstanceType
from carpool.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources
from carpool.sizing import max_pods as mp
from carpool.sizing import reserved as rs
from carpool.sizing.settings import KubeletSettings, LearnedCapacity, NetworkSettings, sizing_family
from carpool.sizing.storage import StorageSettings
from carpool.sizing.storage import ephemeral_storage_bytes as storage_bytes

#: Windows pods get their IP from the VPC resource controller, which advertises the primary ENI's secondary
#: IPs as this resource on Windows nodes and adds a request for one to every Windows pod (Karpenter counts
#: it in a Windows type's capacity the same way).
PRIVATE_IPV4_ADDRESS = "vpc.amazonaws.com/PrivateIPv4Address"
_DEFAULT_NETWORK = NetworkSettings()
_DEFAULT_KUBELET = KubeletSettings()
_DEFAULT_STORAGE = StorageSettings()


@dataclass(frozen=True, slots=True)
class NodeSize:
    """Capacity, reservations and allocatable of a would-be node, with the reasons behind each adjustment.

    Resources use carpool's units: cpu in millicores, memory and ephemeral-storage in bytes, counts as is.
    `eni_limited_pods` is the secondary-IP-mode pod count under the network settings (the published
    eni-max-pods.txt value with default settings), shown for comparison with `max_pods`.
    """

    max_pods: int
    eni_limited_pods: int
    capacity: Resources
    kube_reserved: Resources
    system_reserved: Resources
    eviction: Resources
    allocatable: Resources
    notes: tuple[str, ...] = ()


def size_node(
    it: InstanceType,
    ami_family: str | AmiFamily = AL2023.name,
    network: NetworkSettings = _DEFAULT_NETWORK,
    kubelet: KubeletSettings = _DEFAULT_KUBELET,
    vm_memory_overhead: float = rs.VM_MEMORY_OVERHEAD,
    learned: LearnedCapacity | None = None,
    *,
    ephemeral_storage_bytes: int | None = None,
    storage: StorageSettings = _DEFAULT_STORAGE,
) -> NodeSize:
    """Size a node of type `it` launched with `ami_family`, the cluster's network mode and `kubelet` settings.

    `learned` (capacity a registered node of this type reported) replaces the estimates it carries.
    `ephemeral_storage_bytes` is the root/data volume size; without it `storage` (the node class's block
    device mappings and instance store policy, `carpool.sizing.storage`) decides.
    `kube_reserved` is computed from the returned `max_pods` for every AMI family; launch writes both into
    the user data, so the node's allocatable is this `allocatable`.
    Raises ValueError naming the field for unknown AMI families and invalid quantities.
    """
    family = sizing_family(ami_family)
    notes: list[str] = []
    memory_bytes = _memory_capacity(it, vm_memory_overhead, learned, notes)
    pods = mp.resolve(it, family, network, kubelet)
    notes.extend(pods.notes)
    max_pods = _learned_pods(pods.value, learned, notes)
    if ephemeral_storage_bytes is None:
        ephemeral_storage_bytes = storage_bytes(it, family, storage)
    capacity = _capacity(it, family, memory_bytes, max_pods, learned, ephemeral_storage_bytes)
    kube_reserved = rs.kube_reserved(it.vcpus, max_pods, kubelet.kube_reserved, notes)
    system_reserved = rs.apply_overrides({}, kubelet.system_reserved, "kubelet.systemReserved", notes)
    eviction = rs.eviction_threshold(capacity, kubelet.eviction_hard, notes)
    allocatable = _allocatable(capacity, kube_reserved, system_reserved, eviction, notes)
    if family.carpool_user_data and max_pods > pods.eni_limited and MEMORY not in kubelet.kube_reserved:
        notes.append(_pod_memory_note(max_pods, capacity[MEMORY], kube_reserved[MEMORY], allocatable[MEMORY]))
    if family.windows and it.arch != AMD64:
        notes.append(f"Windows AMIs are amd64-only: {it.name} ({it.arch}) cannot run them")
    return NodeSize(max_pods, pods.eni_limited, capacity, kube_reserved, system_reserved, eviction, allocatable, tuple(notes))


def _memory_capacity(it: InstanceType, overhead: float, learned: LearnedCapacity | None, notes: list[str]) -> int:
    estimate = rs.memory_capacity_mib(it, overhead) * rs.MIB
    if learned is None:
        return estimate
    notes.append(
        f"memory capacity {learned.memory_bytes // rs.MIB}Mi learned from a registered node "
        f"(estimate was {estimate // rs.MIB}Mi)"
    )
    return learned.memory_bytes


def _learned_pods(value: int, learned: LearnedCapacity | None, notes: list[str]) -> int:
    if learned is None or learned.pods is None or learned.pods == value:
        return value
    notes.append(f"pods capacity {learned.pods} learned from a registered node (computed {value})")
    return learned.pods


def _capacity(
    it: InstanceType,
    family: AmiFamily,
    memory_bytes: int,
    max_pods: int,
    learned: LearnedCapacity | None,
    ephemeral_bytes: int | None,
) -> Resources:
    """cpu, memory, ephemeral-storage, pods, and the device-plugin resources (GPUs, Neuron devices)."""
    cpu = learned.cpu_millis if learned and learned.cpu_millis is not None else it.vcpus * 1000
    ephemeral = ephemeral_bytes if ephemeral_bytes is not None else family.default_ephemeral_gib * rs.GIB
    if learned and learned.ephemeral_storage_bytes is not None:
        ephemeral = learned.ephemeral_storage_bytes
    capacity: Resources = {CPU: cpu, MEMORY: memory_bytes, EPHEMERAL_STORAGE: ephemeral, PODS: max_pods}
    capacity.update(_devices(it))
    if family.windows:
        capacity[PRIVATE_IPV4_ADDRESS] = max(it.ipv4_per_eni - 1, 0)
    return capacity


def _devices(it: InstanceType) -> Resources:
    if it.gpu_count and it.gpu_manufacturer == "nvidia":
        return {R.GPU_NVIDIA: it.gpu_count}
    if it.gpu_count and it.gpu_manufacturer == "amd":
        return {R.GPU_AMD: it.gpu_count}
    if it.accelerator_count:
        return {R.NEURON: it.accelerator_count}
    return {}


def _pod_memory_note(max_pods: int, capacity: int, reserved: int, allocatable: int) -> str:
    """Why memory shrinks as max pods grows: the reservation follows the max pods the user data sets."""
    note = (
        f"kube-reserved memory {reserved // rs.MIB}Mi = {rs.BASE_RESERVED_MIB}Mi + {rs.MIB_PER_POD}Mi x {max_pods} "
        f"max pods, as the user data states; {allocatable // rs.MIB}Mi of {capacity // rs.MIB}Mi left for pods"
    )
    if 2 * reserved >= capacity:
        note += " (a small type loses most of its memory to a high max pods; a lower kubelet.maxPods leaves more)"
    return note


def _allocatable(
    capacity: Resources, kube: Resources, system: Resources, eviction: Resources, notes: list[str]
) -> Resources:
    """capacity - kube-reserved - system-reserved - eviction, never below zero (a note says when clamped).
    Only capacity's resources: a `pid` reservation shrinks none of them."""
    raw = {name: value - kube.get(name, 0) - system.get(name, 0) - eviction.get(name, 0)
           for name, value in capacity.items()}
    for name, value in raw.items():
        if value < 0:
            notes.append(f"reservations exceed {name} capacity: allocatable {name} is 0")
    return {name: max(value, 0) for name, value in raw.items()}
