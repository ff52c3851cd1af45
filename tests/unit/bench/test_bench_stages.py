"""`carpool plan` stage timing: the pods file it writes is the benchmark mix, the JSON plan is the plan."""

from __future__ import annotations

import gc
import json
from pathlib import Path

from bench import stages, workloads
from typer.testing import CliRunner

from carpool import cyclic_gc
from carpool.api.loader import load
from carpool.cli import app
from carpool.cli.plan import dumps_lines
from carpool.scheduling import convert


def test_the_pods_file_loads_back_into_the_benchmark_mix(tmp_path: Path) -> None:
    manifests, pods = stages.write_inputs(tmp_path, 50)
    loaded = load([manifests, pods])
    assert [p.name for p in loaded.nodepools] == ["default"]
    got = {s.key: s for s in (convert.pod_spec(p) for p in loaded.pods)}
    want = workloads.diverse_pods(50)
    assert sorted(got) == sorted(s.key for s in want)
    for spec in want:
        back = got[spec.key]
        assert back.requests == {**spec.requests, "pods": 1}
        assert dict(back.labels) == dict(spec.labels)
        assert [(s.topology_key, s.selector) for s in back.spread] == [(s.topology_key, s.selector) for s in spec.spread]
        assert [(t.topology_key, t.selector) for t in back.affinity] == [(t.topology_key, t.selector) for t in spec.affinity]
        assert [(t.topology_key, t.selector) for t in back.anti_affinity] == [
            (t.topology_key, t.selector) for t in spec.anti_affinity]


def test_the_json_plan_reports_wall_and_scheduling_seconds(tmp_path: Path) -> None:
    manifests, pods = stages.write_inputs(tmp_path, 40)
    result = CliRunner().invoke(app, ["plan", "-m", str(manifests), "-p", str(pods), "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert 0 < plan["schedulingSeconds"] <= plan["wallSeconds"]
    assert sum(len(c["pods"]) for c in plan["nodeClaims"]) == 40
    timed = stages.plan_stages(manifests, pods)
    assert list(timed) == list(stages.PLAN_STAGES) and all(v > 0 for v in timed.values())


def test_line_per_entry_json_is_the_same_json() -> None:
    value = {"nodeClaims": [{"name": "a", "pods": ["x/y"]}, {"name": "b", "pods": []}], "empty": [], "none": {},
             "pods": {"ns/p\"q": {"reasons": {"pool": "no room"}}}, "hourlyCost": 1.5, "text": "a\nb"}
    text = dumps_lines(value)
    assert json.loads(text) == value
    lines = text.splitlines()
    assert '    {"name": "a", "pods": ["x/y"]},' in lines  # one line per claim
    assert '    "ns/p\\"q": {"reasons": {"pool": "no room"}}' in lines  # and per pod
    assert len(lines) == 13


def test_the_cycle_collector_is_back_on_after_a_plan() -> None:
    assert gc.isenabled()
    with cyclic_gc.paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_share_line_gives_each_stage_its_share() -> None:
    assert stages.share_line({"load": 1.0, "solve": 3.0}, 4.0) == "load 1.00 s (25%), solve 3.00 s (75%)"
