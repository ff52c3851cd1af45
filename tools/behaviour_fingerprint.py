"""Whether a refactoring changed what carpool does: every example scenario run through the real handlers,
its result recorded, and two recordings compared.

A restructuring (issue 32: the simulation in three rooms, provisioning split into decide and launch, the
DynamoDB adapter as a package, one home per AMI family) must leave behaviour as it was. The unit and e2e
tests check what they assert; this compares everything a run reports: launches, pods and their bind
times, the functions' decisions and log lines, Kubernetes events, dead letters, time to capacity, the
status, the capacity cache, the hourly cost. Record on the commit before, record on the commit after,
compare.

What is not carpool's behaviour is left out or made neutral before comparing: wall-clock figures
(stage timings, the scheduling duration metric), identifiers moto or the simulation draw at random
(instance and launch template IDs, node IPs, SQS message IDs, ports) and the source line numbers in
error traces. Records with the same simulated moment are compared as a set: two nodes registering in the
same invocation are listed in the order of their random IDs.

Usage (from the repo root):
    PYTHONPATH=shared:. .venv/bin/python tools/behaviour_fingerprint.py record DIR [EXAMPLE.yaml ...]
    PYTHONPATH=shared:. .venv/bin/python tools/behaviour_fingerprint.py compare BEFORE_DIR AFTER_DIR
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: the parts of a run's result that are carpool's behaviour
COMPARED = ("launches", "pods", "decisions", "events", "deadLetters", "expectations", "timeToCapacity",
            "instances", "status", "launchFailures", "capacityCache", "workloads", "hourlyCost",
            "durationSeconds")
#: (pattern, replacement): what a run draws at random, made neutral
RANDOM = (
    (r"i-[0-9a-f]{8,17}", "i-X"),
    (r"lt-[0-9a-f]{8,17}", "lt-X"),
    (r"127\.0\.0\.1:\d+", "127.0.0.1:P"),
    (r"ip-[0-9-]+\.ec2\.internal", "ip-X"),
    (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "UUID"),
    (r"([a-z_]+\.py):\d+", r"\1:N"),
)


def record(out: Path, names: list[str]) -> None:
    """Run each example (all of `examples/0*.yaml` when none is named) and write its result."""
    from carpool.sim.run.runner import SimRunner
    from carpool.sim.run.scenario import load_scenario

    out.mkdir(parents=True, exist_ok=True)
    for name in names or sorted(p.name for p in (ROOT / "examples").glob("0*.yaml")):
        result = SimRunner(load_scenario(str(ROOT / "examples" / name))).run().to_json_dict()
        (out / f"{name}.json").write_text(json.dumps(result, indent=1, sort_keys=True, default=str))
        print(f"{name}: recorded", flush=True)


def behaviour(path: Path) -> dict[str, Any]:
    """The compared parts of one recorded result, random values neutral, same-moment records as sets."""
    text = path.read_text()
    for pattern, replacement in RANDOM:
        text = re.sub(pattern, replacement, text)
    data = _without_timings(json.loads(text))
    return {key: _canonical(data.get(key)) for key in COMPARED}


def _without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items()
                if "wall" not in k.lower() and k != "stages"
                and not (k == "value" and "DurationSeconds" in str(value.get("metric")))}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return sorted((_canonical(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    return value


def compare(before: Path, after: Path) -> int:
    """Print each example's verdict; 1 when any differs or is missing."""
    differing = 0
    for path in sorted(before.glob("*.json")):
        other = after / path.name
        if not other.exists():
            print(f"{path.stem}: missing after")
            differing += 1
            continue
        old, new = behaviour(path), behaviour(other)
        changed = [key for key in COMPARED if old[key] != new[key]]
        print(f"{path.stem}: {'same' if not changed else 'DIFFERS in ' + ', '.join(changed)}")
        differing += bool(changed)
    return 1 if differing else 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    rec = commands.add_parser("record")
    rec.add_argument("out", type=Path)
    rec.add_argument("examples", nargs="*")
    cmp = commands.add_parser("compare")
    cmp.add_argument("before", type=Path)
    cmp.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    if args.command == "record":
        record(args.out, args.examples)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
