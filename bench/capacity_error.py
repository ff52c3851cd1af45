"""Learned-capacity extrapolation vs Karpenter's flat 7.5 % rule, on the simulation's ground truth.

The simulated kubelets report memory as the scenario's `truth` says (`carpool.sim.cluster.kubelet`): raw size
(less 64 MiB on arm64) minus a per-AMI-family overhead that differs from 7.5 %. carpool observes a few
instance types (as registrations would), then estimates every held-out catalog type of the same AMI
family with `carpool.capacity.estimate_memory`. Reported: mean absolute error (MiB) of both methods.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from carpool import capacity
from carpool.catalog import Catalog
from carpool.resources import MEMORY
from carpool.sim.cluster.kubelet import InstanceFacts, truth_resources
from carpool.sim.cluster.specs import Truth
from carpool.state.models import CapacityRecord

NOW = datetime(2026, 1, 1, tzinfo=UTC)
OBSERVED = ("m5.large", "c6i.xlarge", "r6i.2xlarge", "m6g.large", "c7i-flex.large")
MIB = 2**20


@dataclass(frozen=True)
class ExtrapolationError:
    ami_family: str
    truth_percent: float
    held_out: int
    flat_mae_mib: float
    extrapolated_mae_mib: float


def _facts(it: object) -> InstanceFacts:
    return InstanceFacts(name=it.name, vcpus=it.vcpus, memory_mib=it.memory_mib, arch=it.arch,  # type: ignore[attr-defined]
                         max_enis=it.max_enis, ipv4_per_eni=it.ipv4_per_eni)  # type: ignore[attr-defined]


def _real_memory_mib(it: object, family: str, truth: Truth) -> int:
    cap, _ = truth_resources(_facts(it), family, 29, truth)
    return int(cap["memory"].removesuffix("Ki")) // 1024


def measure(family: str, truth: Truth, catalog: Catalog, observed: Iterable[str] = OBSERVED) -> ExtrapolationError:
    image = f"ami-{family}"
    seen = [catalog.types[n] for n in observed if n in catalog.types]
    records = {
        (it.name, image): CapacityRecord(instance_type=it.name, image_id=image, ami_family=family,
                                         capacity={MEMORY: _real_memory_mib(it, family, truth) * MIB},
                                         first_seen=NOW, last_seen=NOW, expires_at=NOW)
        for it in seen
    }
    flat_err, extra_err, n = 0.0, 0.0, 0
    for it in catalog.types.values():
        if (it.name, image) in records:
            continue
        real = _real_memory_mib(it, family, truth)
        flat = capacity.default_memory_bytes(it.memory_mib, it.arch) // MIB
        est = capacity.estimate_memory(it.name, "", it.memory_mib, it.arch, image, family, records,
                                       lambda name: catalog.types[name].memory_mib if name in catalog.types else None)
        flat_err += abs(flat - real)
        extra_err += abs(est.memory_bytes // MIB - real)
        n += 1
    return ExtrapolationError(family, truth.overhead_percent(family), n, flat_err / n, extra_err / n)


def rows() -> list[dict[str, object]]:
    truth, catalog = Truth(), Catalog.snapshot("us-east-1")
    return [vars(measure(f, truth, catalog)) | {"benchmark": f"capacity extrapolation {f}"}
            for f in ("al2023", "bottlerocket")]


def print_rows(items: list[dict[str, object]]) -> None:
    print()
    for r in items:
        print(f"{r['benchmark']:34} truth {r['truth_percent']}% overhead, {r['held_out']} held-out types: "
              f"flat 7.5% MAE {r['flat_mae_mib']:.0f} MiB, extrapolated MAE {r['extrapolated_mae_mib']:.0f} MiB")
