"""Build a `Catalog` from EC2 API response shapes (DescribeInstanceTypes, DescribeInstanceTypeOfferings).

Pure: it takes the dicts boto3 returns (the adapters do the calls) plus price tables, so the same code
builds the live catalog in Lambda and the offline snapshot. Labels follow Karpenter's AWS provider
(`pkg/providers/instancetype/types.go`) so NodePools written for Karpenter select the same types.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from carpool import labels as L
from carpool.catalog import prices
from carpool.catalog.catalog import Catalog
from carpool.catalog.instance_type import AMD64, ARM64, LINUX, InstanceType, Offering, instance_requirements

InstanceInfo = Mapping[str, Any]  # one DescribeInstanceTypes `InstanceTypes[]` item

#: EC2 architecture names carpool can run EKS Linux nodes on, and their Kubernetes spelling.
KUBE_ARCH = {"x86_64": AMD64, "arm64": ARM64}
#: Usage classes that become carpool capacity types (capacity blocks are not supported yet).
CAPACITY_TYPES = {"on-demand": L.CAPACITY_ON_DEMAND, "spot": L.CAPACITY_SPOT}

# Karpenter's scheme: category letters, an optional "-<n>tb" (u-6tb1), then the generation digits.
_FAMILY_SCHEME = re.compile(r"^([a-z]+)(?:-[0-9]+tb)?([0-9]+)")


# -- filters ----------------------------------------------------------------------------------------
def architecture(info: InstanceInfo) -> str | None:
    """`amd64`/`arm64`, or None when the type has neither (i386-only, Mac `*_mac` architectures)."""
    for arch in info.get("ProcessorInfo", {}).get("SupportedArchitectures", []):
        if arch in KUBE_ARCH:
            return KUBE_ARCH[arch]
    return None


def is_eks_linux_compatible(info: InstanceInfo) -> bool:
    """Whether EKS-optimized Linux AMIs can boot on it: HVM virtualization and an x86_64/arm64 CPU.

    Mac types report `x86_64_mac`/`arm64_mac` and need dedicated hosts, so they are excluded too.
    """
    hvm = "hvm" in info.get("SupportedVirtualizationTypes", ["hvm"])
    return hvm and architecture(info) is not None


# -- hardware facts ----------------------------------------------------------------------------------
def default_card_enis(info: InstanceInfo) -> int:
    """ENIs on the default network card: the VPC CNI attaches pod ENIs there only.

    The instance-wide `MaximumNetworkInterfaces` over-counts multi-card types (p5.48xlarge: 64 vs 2).
    """
    network = info.get("NetworkInfo", {})
    index = network.get("DefaultNetworkCardIndex", 0)
    for card in network.get("NetworkCards", []):
        if card.get("NetworkCardIndex", 0) == index:
            return int(card["MaximumNetworkInterfaces"])
    return int(network.get("MaximumNetworkInterfaces", 0))


def _kebab(value: str) -> str:
    return value.strip().lower().replace(" ", "-")


def _single_gpu(info: InstanceInfo) -> Mapping[str, Any] | None:
    """The GPU entry when the type has exactly one kind of GPU (Karpenter labels only that case)."""
    gpus = info.get("GpuInfo", {}).get("Gpus", [])
    return gpus[0] if len(gpus) == 1 else None


def gpu_count(info: InstanceInfo) -> int:
    return sum(int(g.get("Count", 0)) for g in info.get("GpuInfo", {}).get("Gpus", []))


def _accelerators(info: InstanceInfo) -> list[Mapping[str, Any]]:
    """Neuron devices (Inferentia/Trainium). `NeuronInfo` covers trn*, older responses only inf* ones."""
    devices = info.get("NeuronInfo", {}).get("NeuronDevices")
    if devices:
        return list(devices)
    return list(info.get("InferenceAcceleratorInfo", {}).get("Accelerators", []))


def accelerator_count(info: InstanceInfo) -> int:
    return sum(int(a.get("Count", 0)) for a in _accelerators(info))


def network_bandwidth_mbps(info: InstanceInfo) -> int | None:
    """Baseline bandwidth over all network cards, in Mbit/s (what Karpenter's label carries)."""
    cards = info.get("NetworkInfo", {}).get("NetworkCards", [])
    gbps = [c["BaselineBandwidthInGbps"] for c in cards if c.get("BaselineBandwidthInGbps") is not None]
    return round(sum(gbps) * 1000) if gbps else None


def local_nvme_gb(info: InstanceInfo) -> int | None:
    storage = info.get("InstanceStorageInfo")
    if not storage or storage.get("NvmeSupport") == "unsupported":
        return None
    total = storage.get("TotalSizeInGB")
    return int(total) if total is not None else None


def is_nitro(info: InstanceInfo) -> bool:
    """Nitro hypervisor, or bare metal (all bare-metal types are built on the Nitro System)."""
    return info.get("Hypervisor") == "nitro" or bool(info.get("BareMetal"))


# -- labels ------------------------------------------------------------------------------------------
def family_labels(name: str) -> dict[str, str]:
    """family/size from the name split at the dot; category/generation by Karpenter's scheme.

    `c7i-flex.large` -> family `c7i-flex`, size `large`, category `c`, generation `7`, capability-flex
    `true`. Names that do not fit the scheme simply lack those labels.
    """
    out: dict[str, str] = {}
    parts = name.split(".")
    if len(parts) == 2:
        family, size = parts
        out[L.INSTANCE_FAMILY] = family
        out[L.INSTANCE_SIZE] = size
        out[L.CAPABILITY_FLEX] = "true" if "-flex" in family else "false"
        match = _FAMILY_SCHEME.match(family)
        if match:
            out[L.INSTANCE_CATEGORY] = match.group(1)
            out[L.INSTANCE_GENERATION] = match.group(2)
    return out


def labels_for(info: InstanceInfo, region: str) -> dict[str, str]:
    """The node labels a node of this type gets (well-known Kubernetes + `karpenter.k8s.aws/*`)."""
    name = info["InstanceType"]
    out = {
        L.INSTANCE_TYPE: name,
        L.ARCH: architecture(info) or "",
        L.OS: LINUX,
        L.REGION: region,
        **family_labels(name),
        L.INSTANCE_CPU: str(info["VCpuInfo"]["DefaultVCpus"]),
        L.INSTANCE_MEMORY: str(info["MemoryInfo"]["SizeInMiB"]),
        L.INSTANCE_HYPERVISOR: info.get("Hypervisor") or "",
    }
    manufacturer = info.get("ProcessorInfo", {}).get("Manufacturer")
    if manufacturer:
        out[L.INSTANCE_CPU_MANUFACTURER] = _kebab(manufacturer)
    bandwidth = network_bandwidth_mbps(info)
    if bandwidth is not None:
        out[L.INSTANCE_NETWORK_BANDWIDTH] = str(bandwidth)
    nvme = local_nvme_gb(info)
    if nvme is not None:
        out[L.INSTANCE_LOCAL_NVME] = str(nvme)
    out.update(_gpu_labels(info))
    out.update(_accelerator_labels(info))
    return out


def _gpu_labels(info: InstanceInfo) -> dict[str, str]:
    gpu = _single_gpu(info)
    if gpu is None:
        return {}
    out = {
        L.INSTANCE_GPU_COUNT: str(gpu.get("Count", 0)),
        L.INSTANCE_GPU_NAME: _kebab(gpu.get("Name", "")),
        L.INSTANCE_GPU_MANUFACTURER: _kebab(gpu.get("Manufacturer", "")),
    }
    memory = gpu.get("MemoryInfo", {}).get("SizeInMiB")
    if memory is not None:
        out[L.INSTANCE_GPU_MEMORY] = str(memory)
    return out


def _accelerator_labels(info: InstanceInfo) -> dict[str, str]:
    accelerators = _accelerators(info)
    if len(accelerators) != 1:
        return {}
    acc = accelerators[0]
    return {
        L.INSTANCE_ACCELERATOR_COUNT: str(acc.get("Count", 0)),
        L.INSTANCE_ACCELERATOR_NAME: _kebab(acc.get("Name", "")),
    }


# -- offerings ---------------------------------------------------------------------------------------
def zones_by_type(type_offerings: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """DescribeInstanceTypeOfferings items (LocationType availability-zone) -> type -> sorted zones.

    Items with another LocationType (region, availability-zone-id) are ignored; items without one are
    taken as zones (moto's shipped data omits the field).
    """
    out: dict[str, set[str]] = {}
    for item in type_offerings:
        if item.get("LocationType", "availability-zone") != "availability-zone":
            continue
        out.setdefault(item["InstanceType"], set()).add(item["Location"])
    return {name: sorted(zones) for name, zones in out.items()}


def offerings_for(
    info: InstanceInfo,
    zones: Iterable[str],
    spot_prices: Mapping[tuple[str, str], float],
    ondemand_prices: Mapping[str, float],
) -> list[Offering]:
    """One offering per (zone, capacity type the type supports).

    On-demand without a known price is unavailable (as in Karpenter: we cannot rank it). Spot without a
    known zonal price uses `prices.estimate_spot` of the on-demand price; without either it is unavailable.
    """
    name = info["InstanceType"]
    ondemand = ondemand_prices.get(name)
    spot_estimate = prices.estimate_spot(ondemand) if ondemand is not None else None
    classes = [CAPACITY_TYPES[c] for c in dict.fromkeys(info.get("SupportedUsageClasses", [])) if c in CAPACITY_TYPES]
    out: list[Offering] = []
    for zone in zones:
        for capacity_type in classes:
            if capacity_type == L.CAPACITY_ON_DEMAND:
                price = ondemand
            else:
                price = spot_prices.get((name, zone), spot_estimate)
            out.append(Offering(zone, capacity_type, price if price is not None else 0.0, price is not None))
    return out


# -- assembly ----------------------------------------------------------------------------------------
def instance_type(info: InstanceInfo, offerings: list[Offering], region: str) -> InstanceType:
    """One `InstanceType` from its DescribeInstanceTypes item and its offerings."""
    type_labels = labels_for(info, region)
    gpu = _single_gpu(info) or (info.get("GpuInfo", {}).get("Gpus") or [{}])[0]
    return InstanceType(
        name=info["InstanceType"],
        vcpus=int(info["VCpuInfo"]["DefaultVCpus"]),
        memory_mib=int(info["MemoryInfo"]["SizeInMiB"]),
        arch=type_labels[L.ARCH],
        labels=type_labels,
        requirements=instance_requirements(type_labels, offerings),
        offerings=offerings,
        max_enis=default_card_enis(info),
        ipv4_per_eni=int(info.get("NetworkInfo", {}).get("Ipv4AddressesPerInterface", 0)),
        nitro=is_nitro(info),
        hypervisor=info.get("Hypervisor") or "",
        bare_metal=bool(info.get("BareMetal")),
        gpu_count=gpu_count(info),
        gpu_name=_kebab(gpu.get("Name", "")),
        gpu_manufacturer=_kebab(gpu.get("Manufacturer", "")),
        accelerator_count=accelerator_count(info),
    )


def build_catalog(
    instance_types: Iterable[InstanceInfo],
    zones: Mapping[str, list[str]],
    spot_prices: Mapping[tuple[str, str], float],
    ondemand_prices: Mapping[str, float],
    region: str,
) -> Catalog:
    """A catalog from DescribeInstanceTypes items and a type -> zones map.

    Types EKS Linux nodes cannot use are skipped; types with no zone are kept (with no offering), so a
    user asking for one gets "not offered here" rather than "unknown".
    """
    types: dict[str, InstanceType] = {}
    for info in instance_types:
        if not is_eks_linux_compatible(info):
            continue
        name = info["InstanceType"]
        offerings = offerings_for(info, zones.get(name, ()), spot_prices, ondemand_prices)
        types[name] = instance_type(info, offerings, region)
    return Catalog(region, dict(sorted(types.items())))


def from_ec2(
    instance_types: Iterable[InstanceInfo],
    type_offerings: Iterable[Mapping[str, Any]],
    spot_prices: Mapping[tuple[str, str], float],
    ondemand_prices: Mapping[str, float],
    region: str,
) -> Catalog:
    """A catalog from boto3 shapes: DescribeInstanceTypes items, DescribeInstanceTypeOfferings items
    (LocationType availability-zone), spot prices by (type, zone) and on-demand prices by type (USD/h)."""
    return build_catalog(instance_types, zones_by_type(type_offerings), spot_prices, ondemand_prices, region)
