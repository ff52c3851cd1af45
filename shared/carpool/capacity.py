"""Learned capacity: what nodes really report, remembered, and used to size the types never seen.

Before a node exists carpool must guess its memory capacity: AWS publishes `SizeInMiB`, but the kernel,
firmware and hypervisor keep part of it, and how much depends on the instance family and the AMI. A guess
too high makes the scheduler put pods on a node where they will not fit; too low wastes money. Karpenter
subtracts a flat 7.5% and learns the real value of each (instance type, AMI) after the first node
registers, in memory only. carpool improves on that in three ways:

- the cache is persistent (DynamoDB) and shared by every Lambda, with the same rules: memory only ever
  goes **down** (a node that reported less is proof the lower value happens), entries expire 60 days after
  they were last confirmed;
- for a type never seen, the overhead **learned on its siblings** is used: nodes of the same instance
  family on the same AMI family lose about the same fraction of their memory, which is a much better guess
  than a constant (the real overhead varies between roughly 3% and 9% across families);
- every estimate says where it came from (`learned`, `extrapolated`, `default`) and on what basis, so
  `carpool plan` can show it.

Pure: records in, numbers out; time is passed in.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from statistics import fmean
from typing import Literal

from carpool import labels, resources
from carpool.resources import MEMORY
from carpool.state.models import CapacityRecord

TTL_DAYS = 60
TTL = timedelta(days=TTL_DAYS)
#: Karpenter's VM memory overhead default (`vmMemoryOverheadPercent` 0.075).
DEFAULT_OVERHEAD = 0.075
#: arm64 instances report 64 MiB less before the overhead is applied (reference.md section 3).
ARM64_RESERVED_MIB = 64
MIB = 1024 * 1024
#: Learned overheads outside this range are treated as bad data (a record without memory, a wrong
#: instance-type size) rather than extrapolated from.
PLAUSIBLE_OVERHEAD = (0.0, 0.5)

Source = Literal["learned", "extrapolated", "default"]
RecordKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class CapacityEstimate:
    """Memory capacity carpool assumes for (instance type, image), and why."""

    memory_bytes: int
    source: Source
    basis: str

    @property
    def memory_mib(self) -> int:
        return self.memory_bytes // MIB


# -- cache rules ----------------------------------------------------------------------------------------
def expires_at(last_seen: datetime) -> datetime:
    return last_seen + TTL


def is_expired(record: CapacityRecord, now: datetime) -> bool:
    return record.expires_at <= now


def _lower(a: Mapping[str, int], b: Mapping[str, int], key: str) -> int | None:
    values = [v for v in (a.get(key), b.get(key)) if v is not None]
    return min(values) if values else None


def _merge_resources(existing: Mapping[str, int], observed: Mapping[str, int]) -> dict[str, int]:
    """Latest observation for everything (cpu, pods, storage can change with kubelet settings), except
    memory, which only goes down."""
    merged = {**existing, **observed}
    memory = _lower(existing, observed, MEMORY)
    if memory is not None:
        merged[MEMORY] = memory
    return merged


def merge(existing: CapacityRecord | None, observed: CapacityRecord) -> CapacityRecord:
    """The cache entry after `observed`: only-lower memory (capacity and allocatable), one more sample,
    first seen kept, last seen = the observation's, expiring 60 days after it.

    `existing` must be unexpired (callers drop expired entries: an expired value is no evidence)."""
    if existing is None:
        return observed.model_copy(update={"expires_at": expires_at(observed.last_seen)}, deep=True)
    if existing.key != observed.key:
        raise ValueError(f"cannot merge capacity of {observed.key} into {existing.key}")
    return CapacityRecord(
        instance_type=observed.instance_type,
        image_id=observed.image_id,
        ami_family=observed.ami_family or existing.ami_family,
        capacity=_merge_resources(existing.capacity, observed.capacity),
        allocatable=_merge_resources(existing.allocatable, observed.allocatable),
        samples=existing.samples + 1,
        first_seen=min(existing.first_seen, observed.first_seen),
        last_seen=observed.last_seen,
        expires_at=expires_at(observed.last_seen),
    )


def from_node(
    node_labels: Mapping[str, str],
    capacity: Mapping[str, str | int],
    allocatable: Mapping[str, str | int],
    image_id: str,
    ami_family: str,
    now: datetime,
) -> CapacityRecord:
    """One observation from a registered node's labels and status (quantities as strings or integers)."""
    instance_type = node_labels.get(labels.INSTANCE_TYPE)
    if not instance_type:
        raise ValueError(f"node has no {labels.INSTANCE_TYPE} label: cannot learn its capacity")
    if not image_id:
        raise ValueError("node has no image id: cannot key its capacity")
    return CapacityRecord(
        instance_type=instance_type,
        image_id=image_id,
        ami_family=ami_family,
        capacity=resources.parse(capacity),
        allocatable=resources.parse(allocatable),
        samples=1,
        first_seen=now,
        last_seen=now,
        expires_at=expires_at(now),
    )


def learned_memory(
    records: Mapping[RecordKey, CapacityRecord], instance_type: str, image_id: str
) -> int | None:
    """The memory capacity (bytes) nodes of `instance_type` on `image_id` reported, if any did."""
    record = records.get((instance_type, image_id))
    return record.capacity.get(MEMORY) if record is not None else None


# -- estimates --------------------------------------------------------------------------------------------
def family_of(instance_type: str) -> str:
    """`c7i-flex` from `c7i-flex.large` (Karpenter's instance-family label)."""
    return instance_type.split(".", 1)[0]


def default_memory_bytes(raw_memory_mib: int, arch: str, overhead: float = DEFAULT_OVERHEAD) -> int:
    """Karpenter's formula: SizeInMiB (minus 64 MiB on arm64) minus ceil(overhead share)."""
    mib = raw_memory_mib - (ARM64_RESERVED_MIB if arch == "arm64" else 0)
    return (mib - math.ceil(mib * overhead)) * MIB


def overhead_ratio(record: CapacityRecord, raw_memory_mib: int | None) -> float | None:
    """1 - reported/raw for one record, or None when it cannot be computed or is implausible."""
    memory = record.capacity.get(MEMORY)
    if not memory or not raw_memory_mib:
        return None
    ratio = 1.0 - memory / (raw_memory_mib * MIB)
    low, high = PLAUSIBLE_OVERHEAD
    return ratio if low <= ratio < high else None


@dataclass(frozen=True, slots=True)
class _Sample:
    """One instance type's evidence: its raw size and what it reported (the lowest over its images)."""

    instance_type: str
    raw_mib: int
    memory_mib: float

    @property
    def overhead_mib(self) -> float:
        return self.raw_mib - self.memory_mib

    @property
    def ratio(self) -> float:
        return self.overhead_mib / self.raw_mib


def _samples(
    records: Mapping[RecordKey, CapacityRecord],
    raw_memory_of: Callable[[str], int | None],
    keep: Callable[[CapacityRecord], bool],
) -> list[_Sample]:
    """One sample per instance type among the kept records (so a type seen on many AMIs does not outweigh
    its siblings), its lowest memory (conservative), plausible ones only."""
    lowest: dict[str, _Sample] = {}
    for record in records.values():
        raw = raw_memory_of(record.instance_type)
        if not keep(record) or raw is None or overhead_ratio(record, raw) is None:
            continue
        sample = _Sample(record.instance_type, raw, record.capacity[MEMORY] / MIB)
        held = lowest.get(record.instance_type)
        if held is None or sample.memory_mib < held.memory_mib:
            lowest[record.instance_type] = sample
    return sorted(lowest.values(), key=lambda s: s.instance_type)


def _linear_overhead(samples: list[_Sample]) -> tuple[float, float] | None:
    """Least-squares `overhead = fixed + share * raw` over samples of at least two sizes, or None.

    The kernel's reservation is part fixed (kernel image, crash kernel) and part proportional (page
    tables, struct page), so within one family a line predicts other sizes far better than one ratio."""
    if len({s.raw_mib for s in samples}) < 2:
        return None
    mean_x = fmean(s.raw_mib for s in samples)
    mean_y = fmean(s.overhead_mib for s in samples)
    sxx = sum((s.raw_mib - mean_x) ** 2 for s in samples)
    share = sum((s.raw_mib - mean_x) * (s.overhead_mib - mean_y) for s in samples) / sxx
    return mean_y - share * mean_x, share


def _estimate_from(samples: list[_Sample], raw_memory_mib: int, fit: bool) -> tuple[int, str]:
    """(memory bytes, how) from samples: the fitted line when allowed and plausible, else the mean ratio."""
    line = _linear_overhead(samples) if fit else None
    if line is not None:
        fixed, share = line
        overhead = fixed + share * raw_memory_mib
        low, high = PLAUSIBLE_OVERHEAD
        if low <= overhead / raw_memory_mib < high:
            memory_mib = math.floor(raw_memory_mib - overhead)
            return memory_mib * MIB, f"overhead {fixed:.0f} MiB + {share:.2%} fitted"
    ratio = fmean(s.ratio for s in samples)
    memory_mib = math.floor(raw_memory_mib * (1.0 - ratio))
    return memory_mib * MIB, f"mean overhead {ratio:.2%}"


def _both(
    first: Callable[[CapacityRecord], bool], second: Callable[[CapacityRecord], bool]
) -> Callable[[CapacityRecord], bool]:
    return lambda record: first(record) and second(record)


def _describe(how: str, samples: list[_Sample], scope: str) -> str:
    types = [s.instance_type for s in samples]
    shown = ", ".join(types[:4]) + (f" +{len(types) - 4}" if len(types) > 4 else "")
    return f"{how} on {len(types)} {scope} type(s) ({shown})"


def estimate_memory(
    instance_type: str,
    family: str,
    raw_memory_mib: int,
    arch: str,
    image_id: str,
    ami_family: str,
    records: Mapping[RecordKey, CapacityRecord],
    raw_memory_of: Callable[[str], int | None],
    default_overhead: float = DEFAULT_OVERHEAD,
) -> CapacityEstimate:
    """The memory capacity to plan `instance_type` on `image_id` with, best evidence first:

    1. `learned`: nodes of this type on this image reported it;
    2. `extrapolated`, in decreasing closeness, always within the same AMI family:
       - the same type on another image (a new AMI release): its lowest report;
       - the same instance family: overhead fitted as `fixed + share * size` over the sizes seen (two or
         more sizes), else their mean overhead ratio;
       - every type seen: their mean overhead ratio (families differ too much for one line);
    3. `default`: Karpenter's flat formula (`default_overhead`, 64 MiB less on arm64).

    `records` must hold unexpired records only (`CapacityCache.all(now)` does that); `raw_memory_of`
    gives another type's `SizeInMiB` (from the catalog), None when unknown.
    """
    family = family or family_of(instance_type)
    learned = learned_memory(records, instance_type, image_id)
    if learned:
        record = records[(instance_type, image_id)]
        return CapacityEstimate(
            learned, "learned", f"{record.samples} node(s) of {instance_type} on {image_id}"
        )

    def same_ami_family(r: CapacityRecord) -> bool:
        return bool(ami_family) and r.ami_family == ami_family

    tiers: list[tuple[str, Callable[[CapacityRecord], bool], bool]] = [
        (f"{instance_type} on other {ami_family} image", lambda r: r.instance_type == instance_type, False),
        (f"{family} {ami_family}", lambda r: family_of(r.instance_type) == family, True),
        (f"{ami_family}", lambda _r: True, False),
    ]
    for scope, keep, fit in tiers:
        samples = _samples(records, raw_memory_of, _both(same_ami_family, keep))
        if samples:
            memory, how = _estimate_from(samples, raw_memory_mib, fit)
            return CapacityEstimate(memory, "extrapolated", _describe(how, samples, scope))
    return CapacityEstimate(
        default_memory_bytes(raw_memory_mib, arch, default_overhead),
        "default",
        f"flat {default_overhead:.1%} VM overhead" + (" after 64 MiB on arm64" if arch == "arm64" else ""),
    )


#: Short name for the extrapolating estimate.
estimate = estimate_memory
