"""`carpool plan` on the shipped catalog with VPC CNI prefix delegation: max pods as AWS's calculator
says, and allocatable memory that pays for them through kube-reserved (255Mi + 11Mi x max pods).

A c6g.medium (1835Mi estimated capacity) takes 98 pods; their reservation (1333Mi) and the 100Mi eviction
threshold leave 402Mi and 940m for pods. So 70 pods of 10m/4Mi fit one c6g.medium, and 70 pods of
10m/16Mi (1120Mi) do not: they get the next size, which has the room.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from carpool.cli import app

POOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: arm}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: arm}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [arm64]}
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [c6g]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: arm
  annotations: {carpool.dev/prefix-delegation: "true"}
spec:
  role: node
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"""

PODS = """
apiVersion: apps/v1
kind: Deployment
metadata: {{name: tiny, namespace: apps}}
spec:
  replicas: 70
  selector: {{matchLabels: {{app: tiny}}}}
  template:
    metadata: {{labels: {{app: tiny}}}}
    spec:
      nodeSelector: {{kubernetes.io/arch: arm64}}
      containers: [{{name: c, image: c, resources: {{requests: {{cpu: 10m, memory: {memory}}}}}}}]
"""


def plan(tmp_path: Path, memory: str) -> dict:
    (tmp_path / "pools.yaml").write_text(POOL)
    (tmp_path / "pods.yaml").write_text(PODS.format(memory=memory))
    result = CliRunner().invoke(app, ["plan", "-m", str(tmp_path / "pools.yaml"), "-p", str(tmp_path / "pods.yaml"),
                                      "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def cheapest_types(out: dict) -> list[str]:
    assert all("nodeClaim" in pod for pod in out["pods"].values()), out["pods"]
    return [claim["instanceTypes"][0] for claim in out["nodeClaims"]]


def test_seventy_tiny_arm_pods_get_one_c6g_medium(tmp_path: Path) -> None:
    out = plan(tmp_path, "4Mi")
    assert len(out["pods"]) == 70
    assert cheapest_types(out) == ["c6g.medium"]


@pytest.mark.parametrize("memory", ["16Mi", "8Mi"])
def test_the_reservation_leaves_no_room_so_a_bigger_type_is_chosen(tmp_path: Path, memory: str) -> None:
    """70 x 16Mi = 1120Mi and 70 x 8Mi = 560Mi both exceed the 402Mi a c6g.medium keeps after reserving
    for its 98 pods: one c6g.large (2164Mi allocatable) instead, never an unschedulable medium."""
    out = plan(tmp_path, memory)
    assert cheapest_types(out) == ["c6g.large"]
    assert "c6g.medium" not in out["nodeClaims"][0]["instanceTypes"]
