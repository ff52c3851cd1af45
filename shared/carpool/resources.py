"""Resource lists as plain `dict[str, int]`: cpu in millicores, memory/storage in bytes, counts as is.

Plain dicts keep the scheduler's hot path cheap; these helpers give the few operations it needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from carpool import quantity

Resources = dict[str, int]

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"
GPU_NVIDIA = "nvidia.com/gpu"
GPU_AMD = "amd.com/gpu"
NEURON = "aws.amazon.com/neuron"


def parse(raw: Mapping[str, str | int | float] | None) -> Resources:
    """A Kubernetes ResourceList (`{"cpu": "500m", "memory": "1Gi"}`) to canonical integers."""
    if not raw:
        return {}
    return {name: quantity.resource_value(name, value) for name, value in raw.items()}


def add(*lists: Mapping[str, int]) -> Resources:
    total: Resources = {}
    for rl in lists:
        for k, v in rl.items():
            total[k] = total.get(k, 0) + v
    return total


def subtract(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    """a - b over a's keys and b's keys (missing counts as 0)."""
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) - v
    return out


def scale(a: Mapping[str, int], n: int) -> Resources:
    return {k: v * n for k, v in a.items()}


def maximum(*lists: Mapping[str, int]) -> Resources:
    out: Resources = {}
    for rl in lists:
        for k, v in rl.items():
            if v > out.get(k, 0):
                out[k] = v
    return out


def fits(request: Mapping[str, int], available: Mapping[str, int]) -> bool:
    """True when every requested quantity is within what is available (missing = 0 available)."""
    for k, v in request.items():  # noqa: SIM110 - explicit loop on the scheduler's hot path
        if v > 0 and v > available.get(k, 0):
            return False
    return True


def sum_all(lists: Iterable[Mapping[str, int]]) -> Resources:
    return add(*lists)


def describe(rl: Mapping[str, int]) -> str:
    """Human-readable rendering: `cpu=1500m memory=2Gi pods=3`."""
    parts = []
    for k in sorted(rl):
        v = rl[k]
        if k == CPU:
            parts.append(f"cpu={quantity.format_cpu(v)}")
        elif k in (MEMORY, EPHEMERAL_STORAGE):
            parts.append(f"{k}={quantity.format_bytes(v)}")
        else:
            parts.append(f"{k}={v}")
    return " ".join(parts)
