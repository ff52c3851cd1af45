"""Time to capacity on the deployed clock (issue 28's targets), from fresh `carpool simulate` runs:

- `examples/012-time-to-capacity.yaml`: pods turning pending at odd moments, nodes booting at their own
  pace; per step p50/p99/max (pending -> CreateFleet, Node -> `karpenter.sh/unregistered` lifted,
  carpool's overhead on a pod), against p50 <= 3 s / p99 <= 12 s, p99 <= 5 s and p99 <= 20 s;
- `examples/burst-10k.yaml`: every pod's CreateFleet within 30 s of it turning pending (the max).

These are simulated seconds (`carpool.sim.run.durations` models each invocation at its deployed memory), not
this machine's wall time, so they do not move with the VM's load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = {"odd moments": ROOT / "examples" / "012-time-to-capacity.yaml", "burst 10,000": ROOT / "examples" / "burst-10k.yaml"}
#: step -> (p50 target, p99 target, max target) in seconds; None: no target
TARGETS: dict[str, tuple[float | None, float | None, float | None]] = {
    "pendingToCreateFleet": (3.0, 12.0, None),
    "nodeToRegistered": (None, 5.0, None),
    "carpoolOverhead": (None, 20.0, None),
    "pendingToBound": (None, None, None),
}
BURST_MAX_SECONDS = 30.0


def simulate(path: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), str(ROOT)])}
    out = subprocess.run([sys.executable, "-c", "from carpool.cli import main; main()", "simulate", str(path), "--json"],
                         capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def rows() -> list[dict[str, Any]]:
    out = []
    for name, path in SCENARIOS.items():
        ttc = simulate(path)["timeToCapacity"]
        for step, (p50, p99, most) in TARGETS.items():
            if name.startswith("burst"):
                p50 = p99 = None
                most = BURST_MAX_SECONDS if step == "pendingToCreateFleet" else None
            figures = ttc[step]
            out.append({"benchmark": f"time to capacity, {name}: {step}", **figures,
                        "targets": {"p50": p50, "p99": p99, "max": most}})
    return out


def _met(row: dict[str, Any]) -> bool:
    return all(target is None or row[key] <= target for key, target in row["targets"].items())


def print_rows(items: list[dict[str, Any]]) -> None:
    print()
    for r in items:
        targets = ", ".join(f"{k} <= {v:g} s" for k, v in r["targets"].items() if v is not None)
        verdict = ("ok" if _met(r) else "MISSED") if targets else ""
        print(f"{r['benchmark']:62} n={r['count']:<6} p50 {r['p50']:>7.2f}  p99 {r['p99']:>7.2f}  max {r['max']:>7.2f} s"
              f"   {targets} {verdict}")


if __name__ == "__main__":
    print_rows(rows())
