"""What the scheduler decides: new claims, nominations onto existing bins, and reasons for the rest.

`to_json()` is the `carpool plan --json` shape (camelCase keys, memory in MiB, cpu in millicores).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from carpool.requirements import Requirements
from carpool.resources import CPU, MEMORY, Resources
from carpool.taints import Taint


@dataclass(frozen=True, slots=True)
class InstanceChoice:
    """One remaining option of a claim: the type and its cheapest allowed available offering."""

    name: str
    price: float
    capacity_type: str
    zone: str


@dataclass(frozen=True, slots=True)
class PlannedClaim:
    """A NodeClaim to launch. `instance_types` are cheapest first (at most `max_instance_types` of the
    `option_count` remaining; CreateFleet takes at most 60); `zone`/`capacity_type` are set when the
    requirements pin them (else the launch picks among the options' offerings)."""

    name: str
    pool: str
    instance_types: tuple[InstanceChoice, ...]
    option_count: int
    requirements: Requirements
    requests: Resources
    pods: tuple[str, ...]
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    zone: str | None = None
    capacity_type: str | None = None

    @property
    def price(self) -> float:
        """Hourly price of the cheapest option (what the claim costs if launched as planned)."""
        return self.instance_types[0].price if self.instance_types else 0.0

    @property
    def labels(self) -> dict[str, str]:
        return self.requirements.labels()


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a pod goes: a new claim (`kind="claim"`), an in-flight claim or an existing node."""

    kind: str
    target: str


@dataclass(slots=True)
class SchedulingResult:
    claims: list[PlannedClaim] = field(default_factory=list)
    placements: dict[str, Placement] = field(default_factory=dict)
    unschedulable: dict[str, dict[str, str]] = field(default_factory=dict)
    opted_out: list[str] = field(default_factory=list)
    relaxed: dict[str, tuple[str, ...]] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def hourly_cost(self) -> float:
        return sum(c.price for c in self.claims)

    def nominations(self) -> dict[str, list[str]]:
        """Pods per existing node / in-flight claim name."""
        out: dict[str, list[str]] = {}
        for key, p in self.placements.items():
            if p.kind != "claim":
                out.setdefault(p.target, []).append(key)
        return out

    def to_json(self) -> dict[str, Any]:
        pods: dict[str, Any] = {}
        for key, p in sorted(self.placements.items()):
            pods[key] = {"nodeClaim": p.target} if p.kind == "claim" else {p.kind if p.kind == "node" else "inFlightClaim": p.target}
        for key, reasons in sorted(self.unschedulable.items()):
            pods[key] = {"reasons": dict(reasons)}
        for key in sorted(self.opted_out):
            pods[key] = {"reasons": {"*": "opted out: requires karpenter.sh/nodepool DoesNotExist"}}
        return {
            "nodeClaims": [_claim_json(c) for c in self.claims],
            "pods": pods,
            "hourlyCost": round(self.hourly_cost, 6),
            "schedulingSeconds": round(self.seconds, 6),
        }


def _claim_json(c: PlannedClaim) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": c.name,
        "nodePool": c.pool,
        "instanceTypes": [t.name for t in c.instance_types],
        "instanceTypeCount": c.option_count,
        "price": round(c.price, 6),
        "capacityType": c.capacity_type,
        "requests": {"cpuMillis": c.requests.get(CPU, 0), "memoryMiB": c.requests.get(MEMORY, 0) // 2**20,
                     **{k: v for k, v in sorted(c.requests.items()) if k not in (CPU, MEMORY)}},
        "pods": list(c.pods),
    }
    if c.zone is not None:
        out["zone"] = c.zone
    return out
