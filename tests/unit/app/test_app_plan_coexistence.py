"""`carpool plan` says, for every pending pod, whether carpool serves it or leaves it to a node group."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from carpool.cli import app

ROOT = Path(__file__).resolve().parents[3]
PODS = """
apiVersion: v1
kind: Pod
metadata: {name: pinned, namespace: default}
spec:
  nodeSelector: {eks.amazonaws.com/nodegroup: ng-1}
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: free, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
"""


def test_node_group_pods_are_left_to_cluster_autoscaler(tmp_path: Path) -> None:
    pods = tmp_path / "pods.yaml"
    pods.write_text(PODS)
    result = CliRunner().invoke(app, ["plan", "--manifests", str(ROOT / "examples/karpenter/default.yaml"),
                                      "--pods", str(pods), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["pods"]["default/pinned"]["server"] == "node-group"
    assert "nodeClaim" not in out["pods"]["default/pinned"]
    assert out["pods"]["default/free"]["server"] == "carpool"
    assert all("default/pinned" not in c["pods"] for c in out["nodeClaims"])
