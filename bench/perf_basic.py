"""Karpenter's performance suite "basic" (`test/suites/performance/basic_test.go`) on the simulation, beside
Karpenter's thresholds, from a fresh run of `examples/025-karpenter-perf-basic.yaml`:

- scale-out: 500 pods of 900m / 3100Mi and 500 of 3500m / 28Gi created at once. Karpenter's threshold is
  every pod scheduled within 2 minutes on instant nodes; here each node boots and registers first, so the
  bar is 120 s + boot + registration of the pods' creation. Also: no pod sent back to pending (evicted)
  while any pod of the scale-out still waits;
- utilization when the last pod is bound, as Karpenter's `Monitor.AvgUtilization` computes it: the mean,
  over the nodes carpool launched, of the requests of the pods bound there over the node's allocatable
  (threshold: CPU over 53 %, memory over 65 %);
- consolidation: both Deployments scaled to 350; every node removal done within 20 minutes of the scale-down
  (Karpenter's report then waits 3 quiet minutes more, which the figure leaves out), 700 pods bound.

The figures are simulated seconds on the deployed clock, not this machine's wall time. `scaled(...)` runs
the same scenario with fewer replicas (the e2e test's smaller run)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from carpool import labels as L
from carpool import resources as R
from carpool.quantity import resource_value
from carpool.sim.run.result import SimResult
from carpool.sim.run.runner import SimRunner
from carpool.sim.run.scenario import Scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "examples" / "025-karpenter-perf-basic.yaml"
#: Karpenter's thresholds (`basic_test.go`)
SCHEDULED_WITHIN_SECONDS = 120.0
CPU_UTILIZATION = 0.53
MEMORY_UTILIZATION = 0.65
CONSOLIDATED_WITHIN_SECONDS = 20 * 60.0


@dataclass
class Figures:
    """What the suite's report measures, from one run."""

    pods: int = 0
    #: the last pod of the scale-out bound, seconds after its creation (None: not all were bound)
    last_bound_seconds: float | None = None
    #: the bar: Karpenter's 2 minutes plus the boot and the registration the simulation counts
    bar_seconds: float = 0.0
    #: pods evicted while a pod of the scale-out was still unbound
    sent_back: int = 0
    cpu_utilization: float = 0.0
    memory_utilization: float = 0.0
    nodes_at_scale_out: int = 0
    #: seconds from the scale-down to the last node removed (0: none removed)
    consolidation_seconds: float = 0.0
    pods_after: int = 0
    bound_after: int = 0
    nodes_after: int = 0
    cpu_after: float = 0.0
    memory_after: float = 0.0
    wall_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def missed(self) -> list[str]:
        """Each threshold the run misses, said plainly (empty: all met)."""
        out = []
        if self.last_bound_seconds is None or self.last_bound_seconds > self.bar_seconds:
            out.append(f"last pod bound at {self.last_bound_seconds} s, bar {self.bar_seconds:g} s")
        if self.sent_back:
            out.append(f"{self.sent_back} pods sent back to pending during the scale-out")
        if self.cpu_utilization <= CPU_UTILIZATION:
            out.append(f"CPU utilization {self.cpu_utilization:.1%} <= {CPU_UTILIZATION:.0%}")
        if self.memory_utilization <= MEMORY_UTILIZATION:
            out.append(f"memory utilization {self.memory_utilization:.1%} <= {MEMORY_UTILIZATION:.0%}")
        if self.consolidation_seconds > CONSOLIDATED_WITHIN_SECONDS:
            out.append(f"consolidation took {self.consolidation_seconds:.0f} s")
        if self.bound_after != self.pods_after:
            out.append(f"{self.pods_after - self.bound_after} pods unbound at the end")
        return out


def scaled(factor: float) -> Scenario:
    """The scenario with every replica count multiplied by `factor` (1.0: as Karpenter's suite runs it)."""
    data = yaml.safe_load(SCENARIO.read_text(encoding="utf-8"))
    for step in data["workload"]:
        for doc in step.get("apply") or []:
            doc["spec"]["replicas"] = max(1, round(doc["spec"]["replicas"] * factor))
        if "scale" in step:
            step["scale"]["replicas"] = max(1, round(step["scale"]["replicas"] * factor))
    return parse_scenario(data, str(SCENARIO), SCENARIO.parent)


class _Runner(SimRunner):
    """The simulation, looked at on every recorded tick as Karpenter's `Monitor` polls the cluster."""

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self.scale_down_at = min((s.at for s in scenario.workload if s.scale is not None), default=scenario.duration)
        self.scale_out: dict[str, Any] | None = None
        self.evicted_before: float | None = None

    def _record(self, now: float) -> None:
        super()._record(now)
        if self.scale_out is None and now < self.scale_down_at:
            user = list(self.cluster.user_pods())
            if user and all((r.raw.get("spec") or {}).get("nodeName") for r in user):
                self.scale_out = {"at": now, "pods": len(user), "last": _last_bound(self, user),
                                  "utilization": utilization(self)}


def _last_bound(runner: SimRunner, user: Iterable[Any]) -> float:
    """The latest bind of the scale-out's pods, in seconds after each pod's creation."""
    stamps = runner.cluster.stamps.pods
    waits = []
    for rec in user:
        meta = rec.raw.get("metadata") or {}
        got = stamps.get(f"{meta.get('namespace', 'default')}/{meta.get('name', '')}")
        if got is not None and got.bound is not None:
            waits.append(got.bound - rec.created_at)
    return round(max(waits, default=0.0), 3)


def utilization(runner: SimRunner) -> dict[str, float]:
    """Karpenter's `Monitor.AvgUtilization` for CPU and memory: the mean over the nodes of a NodePool of the
    requests of the pods bound there over the node's allocatable, and how many nodes."""
    requested: dict[str, dict[str, int]] = {}
    for rec in runner.cluster.pods.values():
        node = (rec.raw.get("spec") or {}).get("nodeName")
        if node and (rec.raw.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            requested[node] = R.add(requested.get(node, {}), runner.cluster.requests(rec))
    shares: dict[str, list[float]] = {R.CPU: [], R.MEMORY: []}
    for name, rec in runner.cluster.nodes.items():
        if not (rec.raw["metadata"].get("labels") or {}).get(L.NODEPOOL):
            continue  # Karpenter's monitor skips the nodes it did not launch
        allocatable = (rec.raw.get("status") or {}).get("allocatable") or {}
        for resource, out in shares.items():
            total = _amount(resource, allocatable.get(resource))
            if total:
                out.append(requested.get(name, {}).get(resource, 0) / total)
    return {"cpu": statistics.fmean(shares[R.CPU]) if shares[R.CPU] else 0.0,
            "memory": statistics.fmean(shares[R.MEMORY]) if shares[R.MEMORY] else 0.0,
            "nodes": float(len(shares[R.CPU]))}


def _amount(resource: str, value: Any) -> int:
    """A quantity in carpool's units (CPU millis, bytes)."""
    return 0 if value is None else resource_value(resource, str(value))


def run(scenario: Scenario | None = None) -> Figures:
    """One run of the suite's scenario and its figures."""
    scenario = scenario or scaled(1.0)
    runner = _Runner(scenario)
    result = runner.run()
    return figures(runner, result)


def figures(runner: _Runner, result: SimResult) -> Figures:
    truth = runner.scenario.truth
    out = Figures(bar_seconds=SCHEDULED_WITHIN_SECONDS + truth.boot_seconds + truth.registration_seconds,
                  wall_seconds=result.wall_seconds)
    done = runner.scale_out
    if done is None:
        out.notes.append("the scale-out never had every pod bound before the scale-down")
        scale_out_end = runner.scale_down_at
    else:
        out.pods, out.last_bound_seconds = done["pods"], done["last"]
        out.cpu_utilization, out.memory_utilization = done["utilization"]["cpu"], done["utilization"]["memory"]
        out.nodes_at_scale_out = int(done["utilization"]["nodes"])
        scale_out_end = done["at"]
    out.sent_back = sum(1 for d in result.decisions
                        if d.source == "k8s-api" and d.message.startswith("evict ") and d.at <= scale_out_end)
    removed = [i.terminated_at for i in result.launches
               if i.terminated_at is not None and i.terminated_at >= runner.scale_down_at]
    out.consolidation_seconds = round(max(removed) - runner.scale_down_at, 1) if removed else 0.0
    out.pods_after, out.bound_after = result.pods.total, result.pods.scheduled
    after = utilization(runner)
    out.cpu_after, out.memory_after, out.nodes_after = after["cpu"], after["memory"], int(after["nodes"])
    return out


def rows(scenario: Scenario | None = None) -> list[dict[str, Any]]:
    """The figures as `make bench` prints them (and could store them)."""
    f = run(scenario)
    return [{
        "benchmark": "Karpenter perf suite basic (simulation)",
        "pods": f.pods, "lastBoundSeconds": f.last_bound_seconds, "barSeconds": f.bar_seconds,
        "sentBackDuringScaleOut": f.sent_back, "nodesAtScaleOut": f.nodes_at_scale_out,
        "cpuUtilization": round(f.cpu_utilization, 4), "memoryUtilization": round(f.memory_utilization, 4),
        "consolidationSeconds": f.consolidation_seconds, "podsAfter": f.pods_after, "boundAfter": f.bound_after,
        "nodesAfter": f.nodes_after, "cpuAfter": round(f.cpu_after, 4), "memoryAfter": round(f.memory_after, 4),
        "wallSeconds": f.wall_seconds, "missed": f.missed(), "notes": f.notes,
    }]


def print_rows(items: Iterable[Mapping[str, Any]]) -> None:
    for r in items:
        print(f"\n{r['benchmark']}  ({r['wallSeconds']:.0f} s wall)")
        print(f"  scale-out: {r['pods']} pods, last bound {r['lastBoundSeconds']} s after creation "
              f"(bar: 2 min + boot + registration = {r['barSeconds']:g} s); "
              f"{r['sentBackDuringScaleOut']} sent back to pending; {r['nodesAtScaleOut']} nodes")
        print(f"  utilization of reserved capacity: CPU {r['cpuUtilization']:.1%} (Karpenter > {CPU_UTILIZATION:.0%}), "
              f"memory {r['memoryUtilization']:.1%} (Karpenter > {MEMORY_UTILIZATION:.0%})")
        print(f"  consolidation to {r['podsAfter']} pods ({r['boundAfter']} bound): last node removed "
              f"{r['consolidationSeconds']:.0f} s after the scale-down (Karpenter < {CONSOLIDATED_WITHIN_SECONDS:.0f} s); "
              f"{r['nodesAfter']} nodes, CPU {r['cpuAfter']:.1%}, memory {r['memoryAfter']:.1%}")
        print("  " + ("all of Karpenter's thresholds beaten" if not r["missed"] else "MISSED: " + "; ".join(r["missed"])))


if __name__ == "__main__":
    print_rows(rows())
