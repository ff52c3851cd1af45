"""Small builders for scheduler tests (instance types, pools, pods) and a run-and-verify helper."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from carpool import labels as L
from carpool.requirements import Requirement, Requirements
from carpool.scheduling.inputs import (
    AffinityTerm,
    InstanceOption,
    LabelSelector,
    Offering,
    PodSpec,
    PoolSpec,
    TopologySpread,
)
from carpool.scheduling.scheduler import ScheduleOptions, schedule
from carpool.scheduling.verify import verify

GIB = 2**30
MIB = 2**20
ZONES = ("zone-a", "zone-b", "zone-c")


def itype(
    name: str,
    cpu: int,
    mem_gib: float,
    pods: int = 110,
    *,
    zones: Sequence[str] = ZONES,
    capacity_types: Sequence[str] = (L.CAPACITY_ON_DEMAND, L.CAPACITY_SPOT),
    price: float | None = None,
    labels: Mapping[str, str] | None = None,
    extra: Mapping[str, int] | None = None,
    unavailable: Iterable[tuple[str, str]] = (),
    arch: str = "amd64",
) -> InstanceOption:
    """An instance type priced 0.05/vCPU + 0.01/GiB (spot at 60%) unless `price` is given."""
    base = price if price is not None else 0.05 * cpu + 0.01 * mem_gib
    off = set(unavailable)
    offerings = tuple(
        Offering(z, ct, round(base * (0.6 if ct == L.CAPACITY_SPOT else 1.0), 6), (z, ct) not in off)
        for z in zones
        for ct in capacity_types
    )
    family = name.split(".")[0]
    lab = {
        L.INSTANCE_TYPE: name,
        L.INSTANCE_FAMILY: family,
        L.INSTANCE_CPU: str(cpu),
        L.ARCH: arch,
        L.OS: "linux",
        **(labels or {}),
    }
    alloc = {"cpu": cpu * 1000, "memory": int(mem_gib * GIB), "pods": pods, **(extra or {})}
    return InstanceOption(name, Requirements.from_labels(lab), alloc, offerings)


def standard_types(**kw) -> list[InstanceOption]:
    return [itype(f"m5.{s}", c, c * 4, **kw) for s, c in (("large", 2), ("xlarge", 4), ("2xlarge", 8), ("4xlarge", 16))]


def pool(name: str = "default", types: Sequence[InstanceOption] | None = None, *, reqs: Iterable[Requirement] = (),
         **kw) -> PoolSpec:
    return PoolSpec(name, list(types if types is not None else standard_types()),
                    requirements=Requirements([Requirement.in_(L.NODEPOOL, name), *reqs]), **kw)


def pod(key: str, cpu: int = 500, mem_mib: int = 512, **kw) -> PodSpec:
    if "/" not in key:
        key = f"default/{key}"
    return PodSpec(key, {"cpu": cpu, "memory": mem_mib * MIB, **kw.pop("extra", {})}, **kw)


def pods(prefix: str, n: int, **kw) -> list[PodSpec]:
    return [pod(f"{prefix}-{i}", **kw) for i in range(n)]


def sel(**labels: str) -> LabelSelector:
    return LabelSelector.of(labels)


def spread(key: str = L.ZONE, skew: int = 1, hard: bool = True, min_domains: int | None = None, **labels: str):
    return TopologySpread(key, skew, "DoNotSchedule" if hard else "ScheduleAnyway", sel(**labels), min_domains)


def term(key: str = L.HOSTNAME, **labels: str) -> AffinityTerm:
    return AffinityTerm(key, sel(**labels))


def run(pod_list, pools, *, check: bool = True, **kw):
    """Schedule with full option lists and assert the independent checker finds nothing."""
    kw.setdefault("options", ScheduleOptions(max_instance_types=None))
    result = schedule(pod_list, pools, **kw)
    if check:
        errors = verify(result, pod_list, pools, in_flight=kw.get("in_flight", ()), existing=kw.get("existing", ()),
                        daemonsets=kw.get("daemonsets", ()))
        assert not errors, "\n".join(errors)
    return result


def claim_of(result, key: str):
    if "/" not in key:
        key = f"default/{key}"
    target = result.placements[key].target
    return next(c for c in result.claims if c.name == target)
