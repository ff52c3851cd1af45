"""`python -m bench` (`make bench`): scheduler speed and plan cost, printed as a table and written to
bench/results.json.

- Karpenter's benchmark workload (400 synthetic instance types; pods split between generic, zone spread,
  hostname spread, zone self-affinity and hostname anti-affinity) at 1k/5k/10k/20k pods, against the
  published Karpenter timings (reference.md section 2) and carpool's targets (5k <= 1 s, 20k <= 5 s).
- 50 Deployments x 1,000 replicas on the shipped catalog (target <= 2 s), skipped when the catalog is
  not available.
- Cost: plan cost / lower bound (`bench/cost.py`), target <= 1.05 on generic workloads.
- The 10,000-pod burst through the real handlers on local AWS (target <= 30 s), `bench/burst.py`.
- Time to capacity on the deployed clock, per step p50/p99/max in simulated seconds
  (`bench/time_to_capacity.py`: pending -> CreateFleet p50 <= 3 s, p99 <= 12 s; Node -> unregistered taint
  lifted p99 <= 5 s; carpool's overhead p99 <= 20 s; the burst's every CreateFleet within 30 s).
- Wall time per stage, each beside its share (`bench/stages.py`, `bench/provisioner_stages.py`,
  `bench/first_invocation.py`): `carpool plan` end to end on Karpenter's mix at 5k/20k/100k pods (load,
  catalog, solve, output, start-up; targets 2/6/30 s, solve <= 1 s at 20k); one provisioner invocation of
  1,000 pods on local AWS (parse, confirm, schedule, reserve, launch; target 5 s); each function's
  Lambda init + first invocation (provisioner target 500 ms), each beside the floor under it: the library
  modules it loads, imported alone.
- Karpenter's perf suite "basic" on the simulation (`bench/perf_basic.py`): 1,000 pods at once, each bound
  within 2 minutes + boot + registration, none sent back to pending during the scale-out, CPU / memory
  utilization of the launched nodes over 53 % / 65 %, back to 700 pods consolidated within 20 minutes.
- Lambda: each handler's cold import time (provisioner target <= 400 ms) and the layer's unzipped size
  without boto3 (target <= 35 MB, bytecode included), see `bench/lambda_package.py`.
Times are wall-clock seconds of `schedule(...)` (grouping, topology setup and result included; building
the inputs excluded), the median of `--repeat` runs.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench import (
    burst,
    capacity_error,
    cost,
    first_invocation,
    lambda_package,
    perf_basic,
    provisioner_stages,
    stages,
    time_to_capacity,
    workloads,
)
from carpool import labels as L
from carpool.requirements import Requirement, Requirements
from carpool.scheduling.inputs import InstanceOption, PodSpec, PoolSpec
from carpool.scheduling.result import SchedulingResult
from carpool.scheduling.scheduler import schedule

RESULTS = Path(__file__).with_name("results.json")
KARPENTER_SECONDS = {1000: (0.78, 0.89), 5000: (3.7, 5.1), 10000: (8.1, 12.1), 20000: (20.0, 36.0)}
TARGET_SECONDS = {5000: 1.0, 20000: 5.0}
DAEMONSETS = [
    PodSpec("kube-system/kube-proxy", {"cpu": 100, "memory": 128 * workloads.MIB}),
    PodSpec("kube-system/aws-node", {"cpu": 25, "memory": 64 * workloads.MIB}),
]


def _timed(run: Callable[[], SchedulingResult], repeat: int) -> tuple[float, SchedulingResult]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    assert result is not None
    return statistics.median(times), result


def _cost(result: SchedulingResult, pods: Sequence[PodSpec], types: Sequence[InstanceOption]) -> dict[str, float]:
    cpu, mem = cost.totals(pods, set(result.placements))
    simple = cost.simple_bound(cpu, mem, types)
    lp = cost.lp_bound(cpu, mem, types)
    return {
        "hourlyCost": round(result.hourly_cost, 4),
        "lowerBound": round(simple, 4),
        "ratio": round(result.hourly_cost / simple, 4) if simple else 0.0,
        "lpLowerBound": round(lp, 4),
        "lpRatio": round(result.hourly_cost / lp, 4) if lp else 0.0,
    }


def karpenter_workload(sizes: Sequence[int], repeat: int) -> list[dict[str, Any]]:
    types = workloads.synthetic_types(400)
    pool = workloads.default_pool(types)
    rows = []
    for n in sizes:
        pods = workloads.diverse_pods(n)
        seconds, result = _timed(lambda pods=pods: schedule(pods, [pool]), repeat)
        rows.append({
            "benchmark": f"karpenter-mix {n}",
            "pods": n,
            "seconds": round(seconds, 3),
            "podsPerSecond": round(n / seconds),
            "nodeClaims": len(result.claims),
            "unschedulable": len(result.unschedulable),
            "karpenterSeconds": KARPENTER_SECONDS.get(n),
            "targetSeconds": TARGET_SECONDS.get(n),
            **_cost(result, pods, types),
        })
    return rows


def generic_synthetic(n: int, repeat: int) -> dict[str, Any]:
    types = workloads.synthetic_types(400)
    pods = workloads.generic_pods(n)
    seconds, result = _timed(lambda: schedule(pods, [workloads.default_pool(types)]), repeat)
    return {"benchmark": f"generic synthetic {n}", "pods": n, "seconds": round(seconds, 3),
            "podsPerSecond": round(n / seconds), "nodeClaims": len(result.claims),
            "unschedulable": len(result.unschedulable), "targetRatio": 1.05, **_cost(result, pods, types)}


def catalog_pool() -> tuple[PoolSpec, list[InstanceOption]] | None:
    """A typical general-purpose NodePool (c/m/r, generation > 5, spot + on-demand) over the shipped
    catalog, sized for AL2023 with default kubelet settings."""
    try:
        from carpool.catalog import Catalog
        from carpool.scheduling import convert
        from carpool.sizing import size_node

        catalog = Catalog.snapshot("us-east-1")
    except Exception as exc:  # noqa: BLE001 - the catalog is optional for the benchmark
        print(f"shipped catalog not available ({exc.__class__.__name__}: {exc}); skipping catalog benchmarks")
        return None
    reqs = Requirements([
        Requirement.in_(L.NODEPOOL, "general"),
        Requirement.in_(L.INSTANCE_CATEGORY, "c", "m", "r"),
        Requirement.of(L.INSTANCE_GENERATION, "Gt", ["5"]),
    ])
    options = []
    for it in catalog.types.values():
        if it.requirements.intersects(reqs) is not None:
            continue
        size = size_node(it, "al2023")
        options.append(convert.instance_option(it.name, it.requirements, it.offerings, size.allocatable, size.capacity))
    return PoolSpec("general", options, requirements=reqs), options


def catalog_benchmarks(repeat: int) -> list[dict[str, Any]]:
    built = catalog_pool()
    if built is None:
        return []
    pool, types = built
    rows = []
    for name, pods, target in (
        ("50 deployments x 1000 (catalog)", workloads.deployments(50, 1000), 2.0),
        ("generic 5000 (catalog)", workloads.generic_pods(5000), None),
    ):
        seconds, result = _timed(lambda pods=pods: schedule(pods, [pool], daemonsets=DAEMONSETS), repeat)
        rows.append({"benchmark": name, "pods": len(pods), "seconds": round(seconds, 3),
                     "podsPerSecond": round(len(pods) / seconds), "nodeClaims": len(result.claims),
                     "unschedulable": len(result.unschedulable), "targetSeconds": target, "targetRatio": 1.05,
                     "instanceTypes": len(types), **_cost(result, pods, types)})
    return rows


def _print(rows: list[dict[str, Any]]) -> None:
    header = f"{'benchmark':34} {'pods':>6} {'seconds':>8} {'pods/s':>8} {'claims':>7} {'unsched':>7} {'cost':>10} {'/bound':>7} {'/lp':>7}  reference"
    print(header)
    print("-" * len(header))
    for r in rows:
        ref = []
        if r.get("karpenterSeconds"):
            lo, hi = r["karpenterSeconds"]
            fast, faster = lo / r["seconds"], hi / r["seconds"]
            speedup = f"{fast:.0f}x" if round(fast) == round(faster) else f"{fast:.0f}-{faster:.0f}x"
            ref.append(f"Karpenter {lo}-{hi}s ({speedup} faster)")
        if r.get("targetSeconds"):
            ref.append(f"target <= {r['targetSeconds']}s {'ok' if r['seconds'] <= r['targetSeconds'] else 'MISSED'}")
        if r.get("targetRatio"):
            ref.append(f"cost target <= {r['targetRatio']} {'ok' if r['ratio'] <= r['targetRatio'] else 'MISSED'}")
        print(f"{r['benchmark']:34} {r['pods']:>6} {r['seconds']:>8.3f} {r['podsPerSecond']:>8} {r['nodeClaims']:>7} "
              f"{r['unschedulable']:>7} {r['hourlyCost']:>10.2f} {r['ratio']:>7.3f} {r['lpRatio']:>7.3f}  {'; '.join(ref)}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000,10000,20000", help="Karpenter-mix batch sizes")
    parser.add_argument("--repeat", type=int, default=3, help="runs per benchmark (median reported)")
    parser.add_argument("--no-catalog", action="store_true", help="skip the shipped-catalog benchmarks")
    parser.add_argument("--no-burst", action="store_true", help="skip the 10,000-pod simulation")
    parser.add_argument("--plan-sizes", default="5000,20000,100000", help="`carpool plan` end-to-end pod counts")
    parser.add_argument("--no-provisioner", action="store_true", help="skip the 1,000-pod provisioner invocation")
    parser.add_argument("--no-perf", action="store_true", help="skip Karpenter's perf suite basic (simulation)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",") if x]
    rows = karpenter_workload(sizes, args.repeat)
    rows.append(generic_synthetic(5000, args.repeat))
    rows.append(generic_synthetic(20000, args.repeat))
    if not args.no_catalog:
        rows.extend(catalog_benchmarks(args.repeat))
    _print(rows)
    lambda_rows = lambda_package.rows()
    lambda_package.print_rows(lambda_rows)
    capacity_rows = capacity_error.rows()
    capacity_error.print_rows(capacity_rows)
    burst_rows = [] if args.no_burst else burst.rows()
    burst.print_rows(burst_rows)
    capacity_time_rows = [] if args.no_burst else time_to_capacity.rows()
    time_to_capacity.print_rows(capacity_time_rows)
    perf_rows = [] if args.no_perf else perf_basic.rows()
    perf_basic.print_rows(perf_rows)
    __import__("bench.scale").scale.report(skip=args.no_burst)  # 5,000 nodes / 150,000 pods through the adapter
    # wall time per stage, each beside its share: what a user waits for
    stage_rows = stages.plan_rows([int(x) for x in args.plan_sizes.split(",") if x], args.repeat)
    stages.print_plan_rows(stage_rows)
    if not args.no_provisioner:
        stage_rows += provisioner_stages.rows()
        provisioner_stages.print_rows(stage_rows[-1:])
    cold_rows = first_invocation.rows()  # each function's init + first invocation, and the floor under it
    first_invocation.print_rows(cold_rows)
    stage_rows += cold_rows
    args.output.write_text(json.dumps({
        "stages": stage_rows,
        "burst": burst_rows,
        "timeToCapacity": capacity_time_rows,
        "perfBasic": perf_rows,
        "capacityExtrapolation": capacity_rows,
        "lambda": lambda_rows,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "results": rows,
    }, indent=2) + "\n")
    print(f"\nwrote {args.output}")
    __import__("bench.own_cost", fromlist=["run"]).run(args.output)  # carpool's own AWS cost, added to the file
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
