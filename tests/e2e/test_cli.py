"""`carpool simulate` on the command line: JSON on stdout, the HTML report, clear errors."""

import json

from typer.testing import CliRunner

from carpool.cli import app

from .conftest import EXAMPLES


def test_json_and_report(tmp_path):
    page = tmp_path / "report.html"
    out = CliRunner().invoke(app, ["simulate", str(EXAMPLES / "004-prefix-delegation.yaml"), "--json",
                                   "--report", str(page)])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["pods"]["total"] == 60
    assert {"instances", "capacityCache", "launches", "launchFailures", "hourlyCost", "timeline",
            "decisions"} <= set(doc)
    for inst in doc["instances"]:
        assert {"instanceId", "instanceType", "imageId", "nodePool", "capacityType", "zone", "maxPods"} <= set(inst)
    html = page.read_text()
    assert all(f'id="chart-{c}"' in html for c in ("nodes", "pending", "cost", "types"))


def test_bad_scenario_names_the_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster: {name: x}\nworkload:\n  - {at: 0, scale: {deployment: web, replica: 3}}\n")
    out = CliRunner().invoke(app, ["simulate", str(bad), "--quiet"])
    assert out.exit_code == 2
    assert "workload[0].scale.replica" in out.output
