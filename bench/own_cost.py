"""carpool's own AWS bill for a 1,000-node cluster with ordinary churn, beside Karpenter's controllers.

A steady month is modelled per function from what one invocation used in a simulation
(`examples/005-spot-interruption.yaml`: provisioning, registration, a spot interruption with its drain
and replacement, disruption passes; every function runs) and priced by `carpool.sim.run.own_cost`, the
same model `carpool simulate` reports with. What the simulation cannot measure at this size is stated
below as an assumption.

The month (1,000 nodes, 30 pods each, 3 NodePools each limiting cpu and memory, like the default config):

- watcher every minute: the measured run (a resync, then the watch stream until
  `carpool.delivery.WATCH_SECONDS` after its start, billed at the watcher's memory for every second)
  plus listing the cluster at 1,000 nodes; it reads every
  active claim (a Query on the status index, items of the size the simulation stored);
- disruption every minute: the measured run plus the pass over the month's nodes as `bench/quiet_pass.py`
  measures it through the real adapter at 1,000 nodes, on the deployed core (`durations.CORE_SLOWDOWN`):
  every minute a warm environment's run with something changed (a cluster with ordinary churn changes
  some pod every minute, so Karpenter's consolidated state never skips the search: the pods' catch-up
  from the watch, every node listed, the search), and once per execution environment
  (`durations.ENVIRONMENT_LIFETIME_SECONDS`) the list of every pod a new environment starts with and its
  cold start; it reads every active claim. The month's cluster is one consolidation cannot improve (every
  node full): a cluster it can improve pays for the decisions it makes, which are the churn's below.
  Its longest run in the simulation is the instance-type catalog's rebuild
  (the first run finds none stored), which a month has every `carpool.app.sources.REFRESH_EVERY` (12 h),
  not every minute: the other runs' mean every minute, the rebuild's extra time at its own period;
- 5 % of the nodes replaced a day, plus spot interruptions: half the nodes spot, 10 % of those
  interrupted a month (the middle of the Spot Instance Advisor's interruption-frequency bands), each
  replaced; every launch is one provisioner batch of its own (no batching across launches), and takes the
  registrar and interruption invocations per instance the simulation measured;
- each pod of a new node waits through two watcher runs (published twice) and becomes one message;
- metric series: each series the simulation sent, at the month's rate of the invocations that sent it
  (series of a pool spread over the month's pools), billed for the share of hours it receives data
  (`own_cost.hourly_share`); plus the highest share of a pool limit used, one series every minute (each
  pool's usage is a log line; the churn's disruptions are log lines too: no alarm reads their reasons,
  `carpool.observability.ALARMED_VALUES`);
- the stack's fixed part: the alarms of `infra/monitoring.py` for these pools (counted on the construct),
  one dashboard, the alarm topic's key. The target covers carpool's usage; the fixed part is
  reported beside it and in the total.

Karpenter runs two controller replicas, requesting 1 vCPU and 1 GiB each (its Helm chart's defaults):
on Fargate a pod is billed for its requests plus 256 MiB, rounded up to a Fargate size (1 vCPU takes at
least 2 GB); on a managed node group, two m5.large on demand.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from carpool import delivery
from carpool.app.sources import REFRESH_EVERY
from carpool.sim.run import durations, own_cost
from carpool.sim.run.own_cost import FunctionUsage, Usage

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "examples" / "005-spot-interruption.yaml"
ONDEMAND_PRICES = ROOT / "shared" / "carpool" / "catalog" / "data" / "ondemand-prices.json"
#: issue 28: carpool's whole bill at 1,000 nodes, the stack's fixed monitoring included
TARGET_USD = 20.0

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
#: The watcher lists nodes and only unbound pods (field selector).

#: Series the simulation sends only because its cluster just started: functions fall back to the shipped
#: catalog until the first disruption run has stored one (in a steady month the stored one is fresh).
STARTUP_ONLY = ("CatalogFallbacks",)

#: Fargate, us-east-1, Linux/x86 (aws.amazon.com/fargate/pricing, checked 2026-11).
FARGATE_VCPU_HOUR_USD = 0.04048
FARGATE_GB_HOUR_USD = 0.004445
KARPENTER_REPLICAS = 2
KARPENTER_VCPU, KARPENTER_MEMORY_GIB = 1.0, 1.0
#: Fargate adds this to a pod's memory request for the Kubernetes components it runs beside it.
FARGATE_OVERHEAD_GIB = 0.25

#: Runs the scenario through the real handlers and prints the result with the meter's per-series sends
#: and stored item sizes (which the result document does not carry) as its last line.
_SIMULATE = """
import json, sys
from carpool.sim.run.runner import SimRunner
from carpool.sim.run.scenario import load_scenario
runner = SimRunner(load_scenario(sys.argv[1]))
result = runner.run()
print(json.dumps({"result": result.to_json_dict(), "seriesSends": runner.usage.series_sends,
                  "itemBytes": runner.usage.item_bytes(), "billedMs": runner.usage.billed}))
"""


def simulated() -> dict[str, Any]:
    """Run the scenario (fresh interpreter): {"result", "seriesSends", "itemBytes", "billedMs"}, with
    `bench/quiet_pass.py`'s disruption pass at 1,000 nodes as "quietPass"."""
    from bench import quiet_pass

    return {**_scenario(), "quietPass": quiet_pass.rows()}


def _scenario() -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), str(ROOT)])}
    out = subprocess.run([sys.executable, "-c", _SIMULATE, str(SCENARIO)], capture_output=True, text=True, env=env,
                         cwd=ROOT, check=False)
    lines = out.stdout.strip().splitlines()
    if not lines:
        raise RuntimeError(f"simulation failed: {out.stderr[-2000:]}")
    return dict(json.loads(lines[-1]))


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


def _pool_of(series: str) -> str | None:
    return series.split("nodepool=")[1].split(",")[0].rstrip("}") if "nodepool=" in series else None


def _without_refresh(measured: dict[str, float], billed: list[float]) -> tuple[dict[str, float], float]:
    """The disruption run without its catalog rebuild (the longest run), and the rebuild's extra seconds."""
    longest, rest = max(billed), sorted(billed)[:-1] or billed
    mean = sum(rest) / len(rest)
    return {**measured, "billedMs": mean}, (longest - mean) / 1000.0


def metric_months(sends: dict[str, dict[str, int]], measured: dict[str, dict[str, float]],
                  month_invocations: dict[str, float]) -> dict[str, float]:
    """Billed metric-months per series: each series the simulation sent at the month's rate of the
    invocations that sent it, its pool's series spread over the month's pools; the highest share of a
    pool limit used (every watcher run) added as modelled."""
    sim_pools = {p for p in map(_pool_of, sends) if p} or {"default"}
    spread = NODEPOOLS / len(sim_pools)
    out: dict[str, float] = {}
    for series, by_function in sends.items():
        if " NodePoolLimitUsed " in series or any(f" {name} " in series for name in STARTUP_ONLY):
            continue  # modelled below, every minute of the month; start-up only
        per_month = sum(count / max(measured[f]["invocations"], 1) * month_invocations.get(f, 0.0)
                        for f, count in by_function.items())
        copies = spread if _pool_of(series) else 1.0
        out[series] = copies * own_cost.hourly_share(per_month / copies / own_cost.MONTH_HOURS)
    out["Carpool NodePoolLimitUsed {}"] = 1.0  # the pools' limits are in the config: the watcher publishes it
    return out


def month_usage(sim: dict[str, Any]) -> tuple[Usage, dict[str, Any]]:
    """The steady month (module docstring) from the simulation's per-invocation figures."""
    result = sim["result"]
    per = result["ownCost"]["perInvocation"]
    launched = max(1, len(result["launches"]))
    ended = max(1, sum(1 for i in result["launches"] if i.get("terminatedAt") is not None))
    days = own_cost.MONTH_HOURS / 24
    interrupted = NODES * SPOT_SHARE * SPOT_INTERRUPTED_PER_MONTH
    churned = NODES * CHURN_PER_DAY * days
    launches = churned + interrupted
    runs = own_cost.MONTH_SECONDS / 60
    claim_bytes = float(sim["itemBytes"]["CLAIM"])
    # one Query of all active claims on the status index (index reads are eventually consistent)
    claim_reads = math.ceil(NODES * claim_bytes / 4096) / 2
    pod_messages = launches * PODS_PER_NODE * PENDING_RUNS
    watcher_list = LIST_SECONDS_PER_OBJECT * (NODES + PODS_PER_NODE * launches / (days * 24 * 60))
    # the pass at 1,000 nodes on the deployed core: warm with a change every run; the new environment's list
    # of every pod and its cold start once per environment lifetime
    runs_by_name = {r["run"]: r for r in sim["quietPass"]["runs"]}
    warm, cold = runs_by_name["warm, changed"]["seconds"], runs_by_name["cold"]["seconds"]
    per_environment = durations.ENVIRONMENT_LIFETIME_SECONDS / delivery.SCHEDULE_SECONDS["disruption"]
    disruption_pass = durations.CORE_SLOWDOWN * (warm + (cold - warm) / per_environment) \
        + durations.cold_start("disruption") / per_environment
    disruption, refresh_seconds = _without_refresh(per["disruption"], sim["billedMs"]["disruption"])
    refreshes = own_cost.MONTH_SECONDS / REFRESH_EVERY.total_seconds()
    functions = {
        "watcher": _function(per["watcher"], runs, watcher_list, claim_reads, bus_events=pod_messages + 2 * launches),
        "disruption": _function(disruption, runs, disruption_pass + refresh_seconds * refreshes / runs, claim_reads),
        "provisioner": _function(per["provisioner"], launches),
        "registrar": _function(per["registrar"], launches * per["registrar"]["invocations"] / launched),
        "interruption": _function(per["interruption"], launches * per["interruption"]["invocations"] / ended),
    }
    # every bus event becomes one message: EventBridge's send, the mapping's receive and delete (10 a call)
    functions["provisioner"].sqs_requests = int(pod_messages * 1.2)
    series = metric_months(sim["seriesSends"], per, {k: float(f.invocations) for k, f in functions.items()})
    alarms = alarm_metrics()
    usage = Usage(seconds=float(own_cost.MONTH_SECONDS), functions=functions, polled_queues=len(delivery.BY_FUNCTION),
                  metric_series=sum(series.values()), alarm_metrics=alarms, dashboards=1, kms_keys=1)
    return usage, {"launches": round(launches), "interruptions": round(interrupted), "watcherListSeconds":
                   round(watcher_list, 2), "disruptionPassSeconds": round(disruption_pass, 2),
                   "quietPass": sim["quietPass"],
                   "claimItemBytes": claim_bytes, "metricSeries": len(series),
                   "metricMonths": round(sum(series.values()), 2), "alarmMetrics": alarms,
                   "watchSeconds": delivery.WATCH_SECONDS,
                   "seriesMonths": {k: round(v, 3) for k, v in sorted(series.items())}}


def alarm_metrics() -> int:
    """Metrics the stack's alarms read (what CloudWatch bills them by), counted on `infra.monitoring`'s
    construct, with the stack's queues and functions (one pool-limit alarm whatever the pools)."""
    from aws_cdk import App, Stack
    from aws_cdk import aws_lambda as lambda_
    from aws_cdk import aws_logs as logs
    from infra.events import EventRouting
    from infra.functions import QUEUE_CONSUMERS, SPECS
    from infra.monitoring import Monitoring
    from infra.settings import Settings

    stack = Stack(App(), "CostProbe")
    settings = Settings(cluster_name="cost-probe")
    routing = EventRouting(stack, "Events", settings=settings,
                           timeouts={name: SPECS[name].timeout for name in QUEUE_CONSUMERS})
    monitoring = Monitoring(
        stack, "Monitoring", settings=settings,
        functions={name: lambda_.Function.from_function_name(stack, name, name) for name in SPECS},
        work_queues={name: work.queue for name, work in routing.work_queues.items()},
        dead_letter_queues=routing.dead_letter_queues,
        log_groups={name: logs.LogGroup.from_log_group_name(stack, f"{name}-logs", name) for name in SPECS},
    )
    return sum(monitoring.alarm_metrics.values())


def karpenter_month() -> dict[str, float]:
    """Two Karpenter controller replicas for a month on Fargate and on two m5.large (on demand)."""
    memory_gb = max(2.0, math.ceil(KARPENTER_MEMORY_GIB + FARGATE_OVERHEAD_GIB))
    fargate = KARPENTER_REPLICAS * own_cost.MONTH_HOURS * (KARPENTER_VCPU * FARGATE_VCPU_HOUR_USD
                                                          + memory_gb * FARGATE_GB_HOUR_USD)
    m5 = float(json.loads(ONDEMAND_PRICES.read_text())["regions"]["us-east-1"]["m5.large"])
    return {"fargate": round(fargate, 2), "m5.large x2": round(KARPENTER_REPLICAS * own_cost.MONTH_HOURS * m5, 2)}


def rows() -> dict[str, Any]:
    sim = simulated()
    usage, model = month_usage(sim)
    cost = own_cost.monthly(usage)
    return {
        "benchmark": "carpool's own AWS cost, 1,000 nodes, 5 %/day churn",
        "monthlyUsd": round(cost.usage_total, 2), "targetUsd": TARGET_USD,
        "fixedMonthlyUsd": round(cost.fixed, 2), "totalMonthlyUsd": round(cost.total, 2),
        "services": cost.services, "lambdaByFunction": cost.lambda_by_function, "quantities": cost.quantities,
        "model": model, "measuredPerInvocation": sim["result"]["ownCost"]["perInvocation"],
        "scenario": SCENARIO.name, "karpenterControllersMonthlyUsd": karpenter_month(),
    }


def print_rows(row: dict[str, Any]) -> None:
    ok = "ok" if row["totalMonthlyUsd"] <= row["targetUsd"] else "MISSED"
    karpenter = ", ".join(f"{k} ${v:.2f}" for k, v in row["karpenterControllersMonthlyUsd"].items())
    fixed = set(own_cost.FIXED_SERVICES)
    used = {k: v for k, v in row["services"].items() if k not in fixed}
    print(f"\n{row['benchmark']:52} ${row['monthlyUsd']:>7.2f}/month of use")
    print("  " + ", ".join(f"{k} ${v:.2f}" for k, v in sorted(used.items(), key=lambda kv: -kv[1])))
    print("  Lambda by function: " + ", ".join(f"{k} ${v:.2f}" for k, v in row["lambdaByFunction"].items()))
    print(f"  plus the stack's fixed monitoring ${row['fixedMonthlyUsd']:.2f} ("
          + ", ".join(f"{k} ${row['services'][k]:.2f}" for k in own_cost.FIXED_SERVICES)
          + f"): ${row['totalMonthlyUsd']:.2f}/month in all, target <= ${row['targetUsd']:.0f} {ok}")
    print(f"  Karpenter's two controller replicas: {karpenter}")


def run(results: Path) -> None:
    """Print the figures and add them to `results` under "ownCost"."""
    row = rows()
    print_rows(row)
    data = json.loads(results.read_text()) if results.is_file() else {}
    data["ownCost"] = row
    results.write_text(json.dumps(data, indent=2) + "\n")


if __name__ == "__main__":
    run(Path(__file__).with_name("results.json"))
