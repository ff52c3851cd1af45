"""The 10,000-pod burst end to end (the simulation at scale): `examples/burst-10k.yaml` through the real
handlers on local AWS, in a fresh interpreter so nothing of the other benchmarks is warm. Target: under
30 s of wall time (the scenario's `wallSeconds`, local AWS start-up included)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "examples" / "burst-10k.yaml"
TARGET_SECONDS = 30.0


def rows() -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), str(ROOT)])}
    out = subprocess.run([sys.executable, "-c", "from carpool.cli import main; main()", "simulate", str(SCENARIO), "--json"],
                         capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    result = json.loads(out.stdout)
    pods = result["pods"]
    return [{"benchmark": "burst 10,000 pods (simulate)", "wallSeconds": result["wallSeconds"],
             "targetSeconds": TARGET_SECONDS, "scheduled": pods["scheduled"], "pods": pods["total"],
             "instances": len(result["instances"]), "invocations": result["invocations"]}]


def print_rows(items: list[dict[str, Any]]) -> None:
    print()
    for r in items:
        ok = "ok" if r["wallSeconds"] < r["targetSeconds"] and r["scheduled"] == r["pods"] else "MISSED"
        print(f"{r['benchmark']:34} {r['wallSeconds']:>8.1f} s   {r['scheduled']}/{r['pods']} pods scheduled on "
              f"{r['instances']} instances  target < {r['targetSeconds']:.0f} s {ok}")
