"""`carpool plan` says where each claim's memory figure came from: learned, extrapolated or default."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from typer.testing import CliRunner

from carpool.api.loader import load
from carpool.app import offline_planning
from carpool.catalog import Catalog
from carpool.cli import app

ROOT = Path(__file__).resolve().parents[3]
POOL = ROOT / "examples" / "karpenter" / "default.yaml"
PODS = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 12
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: nginx, resources: {requests: {cpu: "1", memory: 2Gi}}}]
"""


def _sources(learned: dict[str, int]) -> dict[str, str]:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [{"instanceType": t, "imageId": "ami-x", "amiFamily": "al2023", "memoryMiB": m} for t, m in learned.items()]
    path = Path(__file__).with_name("_cap.json")
    path.write_text(json.dumps(rows))
    try:
        by_type = offline_planning.load_capacity_rows(path, now)
    finally:
        path.unlink()
    inputs = offline_planning.assemble(load([POOL, PODS]), catalog=Catalog.snapshot("us-east-1"), learned_by_type=by_type)
    return inputs.capacity_sources["default"]


def test_learned_extrapolated_and_default_are_told_apart() -> None:
    sources = _sources({"c6a.4xlarge": 30000, "c6a.8xlarge": 60500})
    assert sources["c6a.4xlarge"] == "learned"
    assert sources["c6a.2xlarge"] == "extrapolated"   # same family, never seen
    assert sources["m5.large"] in ("default", "extrapolated")
    assert "default" in set(sources.values()) or "extrapolated" in set(sources.values())


def test_nothing_learned_means_default_everywhere() -> None:
    assert set(_sources({}).values()) == {"default"}


def test_plan_json_reports_the_capacity_source_per_claim(tmp_path: Path) -> None:
    pods = tmp_path / "pods.yaml"
    pods.write_text(PODS)
    result = CliRunner().invoke(app, ["plan", "--manifests", str(POOL), "--pods", str(pods), "--json"])
    assert result.exit_code == 0, result.output
    claims = json.loads(result.output)["nodeClaims"]
    assert claims and all(c["capacitySource"] == "default" for c in claims)


def test_bad_capacity_file_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "cap.json"
    bad.write_text(json.dumps([{"imageId": "x"}]))
    pods = tmp_path / "pods.yaml"
    pods.write_text(PODS)
    result = CliRunner().invoke(app, ["plan", "--manifests", str(POOL), "--pods", str(pods), "--capacity", str(bad)])
    assert result.exit_code == 2
    assert "row [0]" in result.output
