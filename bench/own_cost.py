"""carpool's own AWS bill for a 1,000-node cluster with ordinary churn, beside Karpenter's controllers.

A steady month is modelled per function from what one invocation used in a simulation
(`examples/005-spot-interruption.yaml`: provisioning, registration, a spot interruption with its drain
and replacement, disruption passes; every function runs) and priced by `carpool.sim.own_cost`, the
same model `carpool simulate` reports with. What the simulation cannot measure at this size is stated
below as an assumption.

The month (1,000 nodes, 30 pods each, 3 NodePools):

- watcher every minute: the measured run (which includes the deployed watch period, the watch stream the
  function blocks on) plus listing the cluster at 1,000 nodes; it reads every active claim;
- disruption every minute: the measured run plus listing the nodes and the pods of the candidate nodes;
  it reads every active claim;
- 5 % of the nodes replaced a day, plus spot interruptions: half the nodes spot, 10 % of those
  interrupted a month (the middle of the Spot Instance Advisor's interruption-frequency bands), each
  replaced; every launch is one provisioner batch of its own (no batching across launches), and takes the
  registrar and interruption invocations per instance the simulation measured;
- each pod of a new node waits through two watcher runs (published twice) and becomes one message.

Karpenter runs two controller replicas, requesting 1 vCPU and 1 GiB each (its Helm chart's defaults):
on Fargate a pod is billed for its requests plus 256 MiB, rounded up to a Fargate size (1 vCPU takes at
least 2 GB); on a managed node group, two m5.large on demand.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from carpool.sim import own_cost
from carpool.sim.own_cost import FunctionUsage, Usage
from carpool.sim.usage import WATCH_SECONDS

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "examples" / "005-spot-interruption.yaml"
ONDEMAND_PRICES = ROOT / "shared" / "carpool" / "catalog" / "data" / "ondemand-prices.json"
TARGET_USD = 10.0

NODES = 1000
PODS_PER_NODE = 30
NODEPOOLS = 3
CHURN_PER_DAY = 0.05
SPOT_SHARE = 0.5
SPOT_INTERRUPTED_PER_MONTH = 0.10
#: watcher runs a pending pod of a new node is published in (it waits for its node to boot)
PENDING_RUNS = 2
#: Listing from the Kubernetes API: 5,600 pods took 3.0-3.5 s through the adapter on a real API server.
LIST_SECONDS_PER_OBJECT = 3.25 / 5600
#: The watcher lists nodes and only unbound pods (field selector); the disruption pass lists nodes and the
#: pods of its candidate nodes, taken as a tenth of the nodes.
DISRUPTION_CANDIDATE_SHARE = 0.10
#: A claim item as stored (name, pool, instance, type, zone, price, status, timestamps, index keys).
CLAIM_ITEM_BYTES = 1024

#: Fargate, us-east-1, Linux/x86 (aws.amazon.com/fargate/pricing, checked 2026-11).
FARGATE_VCPU_HOUR_USD = 0.04048
FARGATE_GB_HOUR_USD = 0.004445
KARPENTER_REPLICAS = 2
KARPENTER_VCPU, KARPENTER_MEMORY_GIB = 1.0, 1.0
#: Fargate adds this to a pod's memory request for the Kubernetes components it runs beside it.
FARGATE_OVERHEAD_GIB = 0.25


def simulated() -> dict[str, Any]:
    """Run the scenario through the real handlers (fresh interpreter) and return its result document."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), str(ROOT)])}
    out = subprocess.run([sys.executable, "-c", "from carpool.cli import main; main()", "simulate", str(SCENARIO),
                          "--json", "--quiet"], capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    if not out.stdout.strip():
        raise RuntimeError(f"simulation failed: {out.stderr[-2000:]}")
    return dict(json.loads(out.stdout))


def _function(measured: dict[str, float], invocations: float, extra_seconds: float = 0.0,
              extra_reads: float = 0.0, bus_events: float | None = None) -> FunctionUsage:
    """`invocations` of the measured average invocation (plus what the month's size adds to each)."""
    n = int(round(invocations))
    return FunctionUsage(
        memory_mib=int(measured["memoryMiB"]), invocations=n,
        billed_ms=n * (measured["billedMs"] + extra_seconds * 1000.0),
        log_bytes=int(n * measured["logBytes"]),
        read_units=n * (measured["readUnits"] + extra_reads), write_units=n * measured["writeUnits"],
        bus_events=int(n * measured["busEvents"] if bus_events is None else bus_events),
        sqs_requests=int(n * measured["sqsRequests"]))


def month_usage(result: dict[str, Any]) -> tuple[Usage, dict[str, float]]:
    """The steady month (module docstring) from the simulation's per-invocation figures."""
    per = result["ownCost"]["perInvocation"]
    launched = max(1, len(result["launches"]))
    ended = max(1, sum(1 for i in result["launches"] if i.get("terminatedAt") is not None))
    days = own_cost.MONTH_HOURS / 24
    interrupted = NODES * SPOT_SHARE * SPOT_INTERRUPTED_PER_MONTH
    launches = NODES * CHURN_PER_DAY * days + interrupted
    runs = own_cost.MONTH_SECONDS / 60
    # one Query of all active claims on the status index (index reads are eventually consistent)
    claim_reads = math.ceil(NODES * CLAIM_ITEM_BYTES / 4096) / 2
    pod_messages = launches * PODS_PER_NODE * PENDING_RUNS
    watcher_list = LIST_SECONDS_PER_OBJECT * (NODES + PODS_PER_NODE * launches / (days * 24 * 60))
    disruption_list = LIST_SECONDS_PER_OBJECT * NODES * (1 + DISRUPTION_CANDIDATE_SHARE * PODS_PER_NODE)
    functions = {
        "watcher": _function(per["watcher"], runs, watcher_list, claim_reads, bus_events=pod_messages + 2 * launches),
        "disruption": _function(per["disruption"], runs, disruption_list, claim_reads),
        "provisioner": _function(per["provisioner"], launches),
        "registrar": _function(per["registrar"], launches * per["registrar"]["invocations"] / launched),
        "interruption": _function(per["interruption"], launches * per["interruption"]["invocations"] / ended),
    }
    # every bus event becomes one message: EventBridge's send, the mapping's receive and delete (10 a call)
    functions["provisioner"].sqs_requests = int(pod_messages * 1.2)
    series = result["ownCost"]["metricSeries"]
    per_pool = [s for s in series if "nodepool=" in s]
    pools = max(1, len({s.split("nodepool=")[1].split(",")[0].rstrip("}") for s in per_pool}))
    metric_series = len(series) - len(per_pool) + math.ceil(len(per_pool) * NODEPOOLS / pools)
    usage = Usage(seconds=float(own_cost.MONTH_SECONDS), functions=functions, polled_queues=3,
                  metric_series=metric_series)
    return usage, {"launches": round(launches), "interruptions": round(interrupted), "watcherListSeconds":
                   round(watcher_list, 2), "disruptionListSeconds": round(disruption_list, 2),
                   "metricSeries": metric_series}


def karpenter_month() -> dict[str, float]:
    """Two Karpenter controller replicas for a month on Fargate and on two m5.large (on demand)."""
    memory_gb = max(2.0, math.ceil(KARPENTER_MEMORY_GIB + FARGATE_OVERHEAD_GIB))
    fargate = KARPENTER_REPLICAS * own_cost.MONTH_HOURS * (KARPENTER_VCPU * FARGATE_VCPU_HOUR_USD
                                                          + memory_gb * FARGATE_GB_HOUR_USD)
    m5 = float(json.loads(ONDEMAND_PRICES.read_text())["regions"]["us-east-1"]["m5.large"])
    return {"fargate": round(fargate, 2), "m5.large x2": round(KARPENTER_REPLICAS * own_cost.MONTH_HOURS * m5, 2)}


def without_watch_period(usage: Usage) -> Usage:
    """The same month if the watcher resynced once a minute and returned instead of following the watch."""
    watcher = dataclasses.replace(usage.functions["watcher"])
    watcher.billed_ms -= watcher.invocations * WATCH_SECONDS * 1000.0
    return dataclasses.replace(usage, functions={**usage.functions, "watcher": watcher})


def rows() -> dict[str, Any]:
    result = simulated()
    usage, model = month_usage(result)
    cost = own_cost.monthly(usage)
    model["monthlyUsdIfWatcherDoesNotBlock"] = round(own_cost.monthly(without_watch_period(usage)).total, 2)
    return {
        "benchmark": "carpool's own AWS cost, 1,000 nodes, 5 %/day churn",
        "monthlyUsd": round(cost.total, 2), "targetUsd": TARGET_USD, "services": cost.services,
        "lambdaByFunction": cost.lambda_by_function, "quantities": cost.quantities, "model": model,
        "measuredPerInvocation": result["ownCost"]["perInvocation"], "scenario": SCENARIO.name,
        "karpenterControllersMonthlyUsd": karpenter_month(),
    }


def print_rows(row: dict[str, Any]) -> None:
    ok = "ok" if row["monthlyUsd"] <= row["targetUsd"] else "MISSED"
    karpenter = ", ".join(f"{k} ${v:.2f}" for k, v in row["karpenterControllersMonthlyUsd"].items())
    print(f"\n{row['benchmark']:52} ${row['monthlyUsd']:>7.2f}/month  target <= ${row['targetUsd']:.0f} {ok}")
    print("  " + ", ".join(f"{k} ${v:.2f}" for k, v in sorted(row["services"].items(), key=lambda kv: -kv[1])))
    print("  Lambda by function: " + ", ".join(f"{k} ${v:.2f}" for k, v in row["lambdaByFunction"].items()))
    print(f"  Karpenter's two controller replicas: {karpenter}")
    print(f"  (the watcher's {WATCH_SECONDS:.0f} s watch per run is most of it: without it "
          f"${row['model']['monthlyUsdIfWatcherDoesNotBlock']:.2f}/month)")


def run(results: Path) -> None:
    """Print the figures and add them to `results` under "ownCost"."""
    row = rows()
    print_rows(row)
    data = json.loads(results.read_text()) if results.is_file() else {}
    data["ownCost"] = row
    results.write_text(json.dumps(data, indent=2) + "\n")


if __name__ == "__main__":
    run(Path(__file__).with_name("results.json"))
