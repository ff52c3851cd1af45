"""Wall time per stage of what users wait for: `carpool plan` on Karpenter's benchmark workload.

`carpool plan` is timed as a user runs it: a pods file (`kubectl get pods -o json` shape, one List) of
Karpenter's benchmark mix, one NodePool and EC2NodeClass, the shipped catalog. Stages: load (read, parse
and validate the files), catalog (catalog snapshot and scheduler inputs), solve (`schedule`), output
(the JSON plan written).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import workloads
from carpool.scheduling.inputs import AffinityTerm, LabelSelector, PodSpec, TopologySpread

ROOT = Path(__file__).resolve().parents[1]
#: `carpool plan` wall time targets (seconds) by pod count; and the solver's at 20,000 pods
TARGET_SECONDS = {5000: 2.0, 20000: 6.0, 100000: 30.0}
SOLVE_TARGET_SECONDS = {20000: 1.0}
PLAN_STAGES = ("load", "catalog", "solve", "output")
MANIFESTS = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
        - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["5"]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: node
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: bench}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: bench}}]
"""


def _selector(selector: LabelSelector) -> dict[str, Any]:
    return {"matchLabels": dict(selector.match_labels)}


def _term(term: AffinityTerm) -> dict[str, Any]:
    return {"topologyKey": term.topology_key, "labelSelector": _selector(term.selector)}


def _spread(spread: TopologySpread) -> dict[str, Any]:
    return {"maxSkew": spread.max_skew, "topologyKey": spread.topology_key,
            "whenUnsatisfiable": "DoNotSchedule", "labelSelector": _selector(spread.selector)}


def pod_manifest(spec: PodSpec) -> dict[str, Any]:
    """A pending pod as the API server lists it, from one scheduler input of the benchmark mix."""
    namespace, _, name = spec.key.partition("/")
    pod_spec: dict[str, Any] = {
        "containers": [{"name": "app", "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.9",
                        "resources": {"requests": {"cpu": f"{spec.requests['cpu']}m",
                                                   "memory": f"{spec.requests['memory'] // workloads.MIB}Mi"}}}],
    }
    if spec.spread:
        pod_spec["topologySpreadConstraints"] = [_spread(s) for s in spec.spread]
    affinity: dict[str, Any] = {}
    if spec.affinity:
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [_term(t) for t in spec.affinity]}
    if spec.anti_affinity:
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [_term(t) for t in spec.anti_affinity]}
    if affinity:
        pod_spec["affinity"] = affinity
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}",
                     "labels": dict(spec.labels)},
        "spec": pod_spec,
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    }


def write_inputs(directory: Path, count: int, *, fmt: str = "json") -> tuple[Path, Path]:
    """(manifests, pods) files for `carpool plan -m manifests -p pods` with `count` benchmark pods."""
    directory.mkdir(parents=True, exist_ok=True)
    manifests = directory / "nodepools.yaml"
    manifests.write_text(MANIFESTS)
    items = [pod_manifest(p) for p in workloads.diverse_pods(count)]
    doc = {"apiVersion": "v1", "kind": "List", "items": items}
    pods = directory / f"pods-{count}.{fmt}"
    if fmt == "json":
        pods.write_text(json.dumps(doc))
    else:
        import yaml

        pods.write_text(yaml.dump(doc, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper)))
    return manifests, pods




def plan_stages(manifests: Path, pods: Path) -> dict[str, float]:
    """Seconds per stage of one `carpool plan --json` in this process (same functions as the command)."""
    from carpool import cyclic_gc
    from carpool.api.loader import load
    from carpool.app.offline_planning import plan
    from carpool.cli.plan import Stopwatch, plan_inputs, render_json

    clock = Stopwatch()
    with cyclic_gc.paused():
        loaded = load([manifests, pods])
        clock.lap("load")
        inputs = plan_inputs(loaded, instance_types=None, region="us-east-1", unavailable=[], capacity=None)
        clock.lap("catalog")
        result = plan(inputs)
        clock.lap("solve")
        render_json(result, inputs, clock)
        clock.lap("output")
    return clock.stages


def _command_seconds(manifests: Path, pods: Path) -> tuple[float, dict[str, Any]]:
    """Wall seconds of `carpool plan --json` as a user runs it (a fresh interpreter), and its plan."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), str(ROOT)])}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", "from carpool.cli import main; main()", "plan", "-m", str(manifests),
                           "-p", str(pods), "--json"], capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    return time.perf_counter() - start, json.loads(done.stdout)


def plan_rows(counts: Sequence[int], repeat: int = 3) -> list[dict[str, Any]]:
    """Per pod count: the command's wall time (median of `repeat` runs) and its stages beside their share."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="carpool-bench-") as tmp:
        for n in counts:
            manifests, pods = write_inputs(Path(tmp), n)
            runs = [_command_seconds(manifests, pods) for _ in range(repeat)]
            wall = statistics.median(seconds for seconds, _ in runs)
            plan = runs[-1][1]
            samples = [plan_stages(manifests, pods) for _ in range(repeat)]
            stages = {k: statistics.median(s[k] for s in samples) for k in PLAN_STAGES}
            stages["start-up"] = max(0.0, wall - sum(stages.values()))  # interpreter, imports, printing
            rows.append({
                "benchmark": f"carpool plan karpenter-mix {n}", "pods": n, "wallSeconds": round(wall, 3),
                "targetSeconds": TARGET_SECONDS.get(n),
                "schedulingSeconds": round(statistics.median(p["schedulingSeconds"] for _, p in runs), 3),
                "solveTargetSeconds": SOLVE_TARGET_SECONDS.get(n),
                "planWallSeconds": round(statistics.median(p["wallSeconds"] for _, p in runs), 3),
                "nodeClaims": len(plan["nodeClaims"]),
                "stages": {k: round(v, 3) for k, v in stages.items()},
            })
    return rows


def share_line(stages: dict[str, float], total: float, unit: str = "s") -> str:
    """ "load 0.41 s (25%), solve ..." """
    scale = 1000.0 if unit == "ms" else 1.0
    return ", ".join(f"{k} {v * scale:.{0 if unit == 'ms' else 2}f} {unit} ({100 * v / total:.0f}%)"
                     for k, v in stages.items()) if total else ""


def print_plan_rows(rows: Sequence[dict[str, Any]]) -> None:
    print()
    for r in rows:
        verdict = ""
        if r["targetSeconds"]:
            verdict = f"  target <= {r['targetSeconds']:.0f} s {'ok' if r['wallSeconds'] <= r['targetSeconds'] else 'MISSED'}"
        if r["solveTargetSeconds"]:
            ok = "ok" if r["schedulingSeconds"] <= r["solveTargetSeconds"] else "MISSED"
            verdict += f"; solve {r['schedulingSeconds']:.2f} s, target <= {r['solveTargetSeconds']:.0f} s {ok}"
        print(f"{r['benchmark']:34} {r['wallSeconds']:>8.2f} s{verdict}")
        print(f"{'':34}   {share_line(r['stages'], r['wallSeconds'])}")
