"""The disruption pass a steady month pays for every minute: 1,000 nodes that consolidation cannot improve
(each node's pods fill it, so none fits elsewhere and no cheaper type holds them), served by the simulated
kube-apiserver over HTTP and read through the real lightkube adapter, as `bench/scale.py` does.

Three runs of `carpool.app.disruption_executor.run` in one process, as one warm Lambda environment runs
them a minute apart:
1. cold: the environment lists every pod (`carpool.app.pod_snapshot`) and searches;
2. warm, nothing changed: the pods come from the watch's catch-up, and Karpenter's consolidated state
   skips the search (`carpool.disruption.planner.RECHECK_AFTER`);
3. warm, something changed (the gate is opened, as a pod change anywhere opens it): catch-up and search.
`bench/own_cost.py` charges every minute of the month run 3 (a cluster with ordinary churn changes some
pod every minute) and a relist (run 1's read) per execution environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NODES = 1000
#: 28 workload pods of this cpu + two DaemonSet pods of 200m on an m5.2xlarge (7,910m allocatable): 90m left
POD_CPU = "265m"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), str(ROOT)]),
            "CARPOOL_SCALE_NODES": str(NODES)}


def _packed() -> Any:
    from bench import scale

    plain = scale.pod_json

    def pod_json(name: str, node: str | None, app: str, phase: str = "Running", daemon: bool = False) -> dict[str, Any]:
        pod = plain(name, node, app, phase, daemon)
        if not daemon:
            pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = POD_CPU
        return pod

    scale.pod_json = pod_json  # type: ignore[assignment]
    scale.PENDING = 0
    return scale


def measure(url: str) -> dict[str, Any]:
    scale = _packed()
    from carpool import observability
    from carpool.app import disruption_executor
    from carpool.app.disruption_summary import DisruptSummary
    from carpool.state.memory import MemoryLedger

    observability.emit = lambda *a, **k: None  # type: ignore[assignment]
    ledger = MemoryLedger()
    scale._claims(ledger)
    deps = scale._deps(url, ledger, scale._Compute())
    runs = []
    for name in ("cold", "warm, unchanged", "warm, changed"):
        if name == "warm, changed":
            deps.cache.pop("disruption.consolidated", None)  # what a pod change does to the gate
        summary = DisruptSummary()
        start, cpu = time.perf_counter(), time.process_time()
        disruption_executor.run(deps, scale.NOW, summary)
        runs.append({"run": name, "seconds": round(time.perf_counter() - start, 3),
                     "cpuSeconds": round(time.process_time() - cpu, 3), "decisions": len(summary.decisions),
                     "stages": summary.stages})
    return {"benchmark": f"disruption pass, quiet cluster, {NODES:,} nodes", "runs": runs,
            "peakMB": scale._peak_mb()}


def rows() -> dict[str, Any]:
    server = subprocess.Popen([sys.executable, "-m", "bench.quiet_pass", "serve"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=_env(), cwd=ROOT)
    assert server.stdin is not None and server.stdout is not None
    try:
        url = json.loads(server.stdout.readline())["url"]
        out = subprocess.run([sys.executable, "-m", "bench.quiet_pass", "measure", url], capture_output=True,
                             text=True, env=_env(), cwd=ROOT, check=True)
    finally:
        server.stdin.close()
        server.wait(timeout=60)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def print_rows(row: dict[str, Any]) -> None:
    print(f"\n{row['benchmark']} (peak {row['peakMB']} MB)")
    for r in row["runs"]:
        print(f"  {r['run']:18} {r['seconds']:6.2f} s ({r['cpuSeconds']:.2f} CPU s), {r['decisions']} decisions, "
              + ", ".join(f"{k} {v:.2f}" for k, v in r["stages"].items()))


def run(results: Path) -> None:
    row = rows()
    print_rows(row)
    data = json.loads(results.read_text()) if results.is_file() else {}
    data["quietPass"] = row
    results.write_text(json.dumps(data, indent=2) + "\n")


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        _packed().serve()
    elif sys.argv[1:2] == ["measure"]:
        print(json.dumps(measure(sys.argv[2])))
    else:
        run(Path(__file__).with_name("results.json"))
