"""`python -m carpool.sim.run.record SCENARIO.yaml --out FILE`: one scenario's AWS requests, for the IAM check.

The scenario runs with request recording on (`carpool.sim.localaws.requests`); the recording gets the production
requests that never reach local AWS added (`production_only_calls`) and is written as JSON, which
`tests/infra/test_iam_requests.py` evaluates against the functions' IAM policies.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from carpool.sim.localaws.requests import Recording, production_only_calls
from carpool.sim.run.runner import SimRunner
from carpool.sim.run.scenario import load_scenario


def record(scenario_path: Path, result_path: Path | None = None) -> Recording:
    """Run one scenario and return its requests plus the production-only ones (`result_path`: where to
    write the simulation's own result, to see what the functions did)."""
    scenario = load_scenario(scenario_path)
    runner = SimRunner(scenario, record_requests=True)
    result = runner.run()
    if result_path is not None:
        result_path.write_text(json.dumps(result.to_json_dict(), indent=1))
    recording = runner.requests.finished
    if recording is None or not recording.calls:
        raise RuntimeError(f"scenario {scenario.name}: the simulation recorded no requests")
    builders = {c.function for c in recording.calls if (c.service, c.operation) == ("ec2", "DescribeInstanceTypes")}
    recording.calls += production_only_calls(scenario.cluster.name, scenario.cluster.region, builders,
                                             recording.account)
    return recording


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Record the AWS requests carpool makes in a scenario")
    parser.add_argument("scenario", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--result", type=Path, help="also write the simulation result here")
    args = parser.parse_args(argv)
    recording = record(args.scenario, args.result)
    args.out.write_text(recording.model_dump_json(indent=1))
    print(f"{len(recording.calls)} distinct requests of {', '.join(sorted(recording.functions()))}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
