"""Capacity estimates and what the kubelet holds back from it: kube-reserved, system-reserved, eviction.

The formulas are the ones EKS AMIs (nodeadm, bootstrap.sh), Bottlerocket and Karpenter use, but the
AMIs feed them different pod counts (nodeadm and bootstrap.sh the ENI-limited count whatever max pods is
set to, Bottlerocket its max-pods setting). carpool therefore computes kube-reserved here, once, from the
max pods it configures, and writes the result into every node's user data: the node reserves exactly
what the scheduler subtracted. User values from `spec.kubelet` replace the defaults resource by resource,
as Karpenter does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal

from carpool import quantity
from carpool.catalog.instance_type import ARM64, InstanceType
from carpool.resources import CPU, EPHEMERAL_STORAGE, MEMORY, Resources

MIB = quantity.MIB
GIB = 2**30
#: Share of memory the hypervisor and firmware take that DescribeInstanceTypes does not subtract
#: (Karpenter's VM_MEMORY_OVERHEAD_PERCENT default).
VM_MEMORY_OVERHEAD = 0.075
#: kube-reserved memory (nodeadm, bootstrap.sh, Bottlerocket, Karpenter): 11 MiB per pod + 255 MiB.
MIB_PER_POD = 11
BASE_RESERVED_MIB = 255
#: Graviton kernels reserve 64 MiB of CMA memory the kubelet never sees.
ARM64_CMA_MIB = 64
#: kube-reserved cpu: (start, end) millicores and the share reserved in that band, as parts per 10,000
#: (6% of the first core, 1% of the second, 0.5% of cores 3-4, 0.25% of every core above 4).
CPU_BANDS = ((0, 1000, 600), (1000, 2000, 100), (2000, 4000, 50), (4000, None, 25))
KUBE_RESERVED_EPHEMERAL = GIB
EVICTION_MEMORY_DEFAULT = 100 * MIB
EVICTION_NODEFS_PERCENT_DEFAULT = Decimal(10)
#: Eviction signals that reduce allocatable, and the resource each one protects.
EVICTION_SIGNALS = {"memory.available": MEMORY, "nodefs.available": EPHEMERAL_STORAGE}
#: Reservable resources that reduce a schedulable resource.
RESERVABLE = (CPU, MEMORY, EPHEMERAL_STORAGE)
#: kubelet's process-id reservation: no schedulable resource shrinks, but the node must get it (the kubelet
#: holds that many pids back from pods), so it is kept and written into the user data as given.
PID = "pid"


def memory_capacity_mib(it: InstanceType, vm_memory_overhead: float = VM_MEMORY_OVERHEAD) -> int:
    """The memory a node of this type will report: SizeInMiB, minus 64 MiB CMA on arm64, minus VM overhead.

    Computed in the same float steps as Karpenter (bytes x share / 1024 / 1024, rounded up) so both agree
    to the MiB. m5.large: 8192 - ceil(614.4) = 7577Mi.
    """
    if not 0 <= vm_memory_overhead < 1:
        raise ValueError(f"vm_memory_overhead must be in [0, 1), got {vm_memory_overhead}")
    mib = it.memory_mib - (ARM64_CMA_MIB if it.arch == ARM64 else 0)
    overhead = math.ceil(float(mib * MIB) * vm_memory_overhead / 1024 / 1024)
    return mib - overhead


def kube_reserved_cpu_millis(vcpus: int) -> int:
    """The banded cpu reservation: 1 vCPU = 60m, 2 = 70m, 4 = 80m, 8 = 90m, 96 = 310m."""
    millis = vcpus * 1000
    total = 0
    for start, end, per_10k in CPU_BANDS:
        if millis <= start:
            break
        top = millis if end is None else min(millis, end)
        total += (top - start) * per_10k // 10_000
    return total


def kube_reserved_memory_mib(max_pods: int) -> int:
    """`11 MiB x max pods + 255 MiB` (m5.large with 29 pods: 574Mi; c6g.medium with 98: 1333Mi)."""
    return MIB_PER_POD * max_pods + BASE_RESERVED_MIB


def default_kube_reserved(vcpus: int, max_pods: int) -> Resources:
    """The kube-reserved a node with `vcpus` and `max_pods` gets from carpool's user data (before the
    user's `kubeReserved`): banded cpu, memory for the max pods the user data sets, 1Gi of disk."""
    return {
        CPU: kube_reserved_cpu_millis(vcpus),
        MEMORY: kube_reserved_memory_mib(max_pods) * MIB,
        EPHEMERAL_STORAGE: KUBE_RESERVED_EPHEMERAL,
    }


def kube_reserved(vcpus: int, max_pods: int, overrides: Mapping[str, str], notes: list[str]) -> Resources:
    """The kube-reserved a node gets: the defaults for `vcpus` and `max_pods`, then the user's
    `spec.kubelet.kubeReserved` per resource. The one place carpool computes it: sizing subtracts it and
    launch writes it into the user data."""
    return apply_overrides(default_kube_reserved(vcpus, max_pods), overrides, "kubelet.kubeReserved", notes)


def apply_overrides(defaults: Resources, overrides: Mapping[str, str], field: str, notes: list[str]) -> Resources:
    """`defaults` with each user-given resource replaced; errors name `field.resource`."""
    out = dict(defaults)
    for name, raw in overrides.items():
        if name == PID:
            out[PID] = _parse_pids(f"{field}.{name}", raw)
            notes.append(f"{field}.pid={raw} reserved (process ids; no schedulable resource shrinks)")
            continue
        if name not in RESERVABLE:
            raise ValueError(f"{field}.{name}: the kubelet reserves only cpu, memory, ephemeral-storage and pid")
        value = _parse(f"{field}.{name}", name, raw)
        if name not in defaults:
            notes.append(f"{field}.{name}={raw} reserved")
        elif defaults[name] != value:
            notes.append(f"{field}.{name}={raw} replaces the default {_show(name, defaults[name])}")
        out[name] = value
    return out


def eviction_threshold(capacity: Resources, eviction_hard: Mapping[str, str], notes: list[str]) -> Resources:
    """Hard eviction thresholds as amounts: memory 100Mi and nodefs 10% unless `evictionHard` says otherwise.

    Percentages are of capacity; 0% and 100% disable a signal (kubelet semantics), which reserves nothing.
    """
    raw_defaults = {MEMORY: EVICTION_MEMORY_DEFAULT, EPHEMERAL_STORAGE: _percent_of(capacity.get(EPHEMERAL_STORAGE, 0), EVICTION_NODEFS_PERCENT_DEFAULT)}
    out = dict(raw_defaults)
    for signal, raw in eviction_hard.items():
        resource = EVICTION_SIGNALS.get(signal)
        if resource is None:
            continue  # inodes, imagefs, pid signals do not change allocatable
        text = str(raw).strip()
        if text.endswith("%"):
            percent = _parse_percent(f"kubelet.evictionHard.{signal}", text)
            value = _percent_of(capacity.get(resource, 0), percent)
        else:
            value = _parse(f"kubelet.evictionHard.{signal}", resource, text)
        if value != raw_defaults[resource]:
            notes.append(f"kubelet.evictionHard.{signal}={text} replaces the default {_show(resource, raw_defaults[resource])}")
        out[resource] = value
    return out


def _percent_of(amount: int, percent: Decimal) -> int:
    if percent in (0, 100):
        return 0
    return math.ceil(Decimal(amount) * percent / 100)


def _parse_percent(field: str, text: str) -> Decimal:
    try:
        percent = Decimal(text[:-1])
    except ArithmeticError as exc:
        raise ValueError(f"{field}: invalid percentage {text!r}") from exc
    if not 0 <= percent <= 100:
        raise ValueError(f"{field}: percentage {text!r} is outside 0-100%")
    return percent


def _parse(field: str, resource: str, raw: str | int | float) -> int:
    try:
        value = quantity.resource_value(resource, raw)
    except quantity.QuantityError as exc:
        raise ValueError(f"{field}: invalid quantity {raw!r}") from exc
    if value < 0:
        raise ValueError(f"{field}: must not be negative, got {raw!r}")
    return value


def _parse_pids(field: str, raw: str | int | float) -> int:
    """A pid reservation: a plain count (the kubelet reads it as a quantity, `1k` included)."""
    try:
        value = quantity.to_int(raw)
    except (quantity.QuantityError, ValueError) as exc:
        raise ValueError(f"{field}: invalid pid count {raw!r}") from exc
    if value < 0:
        raise ValueError(f"{field}: must not be negative, got {raw!r}")
    return value


def _show(resource: str, value: int) -> str:
    if resource == CPU:
        return quantity.format_cpu(value)
    return f"{value // MIB}Mi" if value % MIB == 0 else str(value)
