"""`carpool plan`: manifests + pods (+ synthetic instance types) -> claims, reasons, cost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from carpool.cli import app

POOLS = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: flex}
spec:
  weight: 100
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [c7i-flex]}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  weight: 1
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: node
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kube-proxy, namespace: kube-system}
spec:
  selector: {matchLabels: {app: kp}}
  template:
    metadata: {labels: {app: kp}}
    spec:
      containers: [{name: kp, image: kp, resources: {requests: {cpu: 100m, memory: 128Mi}}}]
"""

PODS = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 6
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: web, resources: {requests: {cpu: "1", memory: 1Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: huge, namespace: shop}
spec:
  containers: [{name: c, image: c, resources: {requests: {cpu: "500", memory: 1Gi}}}]
"""


def _types(zones=("z-a", "z-b")) -> list[dict]:
    out = []
    for fam, price in (("c7i-flex", 0.05), ("m7i", 0.04)):
        for size, cpu in (("large", 2), ("xlarge", 4), ("2xlarge", 8)):
            out.append({"name": f"{fam}.{size}", "cpu": cpu, "memoryMiB": cpu * 4096, "pods": 58,
                        "labels": {"karpenter.k8s.aws/instance-category": fam[0]},
                        "overhead": {"cpuMillis": 80, "memoryMiB": 600},
                        "offerings": [{"zone": z, "capacityType": ct, "price": price * cpu}
                                      for z in zones for ct in ("spot", "on-demand")]})
    return out


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "pools.yaml").write_text(POOLS)
    (tmp_path / "pods.yaml").write_text(PODS)
    (tmp_path / "types.json").write_text(json.dumps(_types()))
    return {"pools": tmp_path / "pools.yaml", "pods": tmp_path / "pods.yaml", "types": tmp_path / "types.json"}


def _plan(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["plan", *args])
    return result.exit_code, result.output


def test_json_plan_with_synthetic_types(files):
    code, out = _plan("-m", str(files["pools"]), "-p", str(files["pods"]), "--instance-types", str(files["types"]), "--json")
    assert code == 0, out
    plan = json.loads(out)
    assert {c["nodePool"] for c in plan["nodeClaims"]} == {"flex"}
    assert all(t.startswith("c7i-flex") for c in plan["nodeClaims"] for t in c["instanceTypes"])
    placed = [k for k, v in plan["pods"].items() if "nodeClaim" in v]
    assert len(placed) == 6
    assert plan["pods"]["shop/huge"]["reasons"]["flex"].startswith("no instance type fits requests cpu=500")
    assert plan["hourlyCost"] > 0 and plan["schedulingSeconds"] >= 0
    # daemonset overhead is counted on every claim
    assert all(c["requests"]["cpuMillis"] % 1000 == 100 for c in plan["nodeClaims"])


def test_unavailable_offerings_push_to_the_next_pool(files):
    gone = [f"c7i-flex.{s}:{z}:{ct}" for s in ("large", "xlarge", "2xlarge") for z in ("z-a", "z-b") for ct in ("spot", "on-demand")]
    args = ["-m", str(files["pools"]), "-p", str(files["pods"]), "--instance-types", str(files["types"]), "--json"]
    for g in gone:
        args += ["--unavailable", g]
    code, out = _plan(*args)
    assert code == 0, out
    assert {c["nodePool"] for c in json.loads(out)["nodeClaims"]} == {"general"}


def test_human_output(files):
    code, out = _plan("-m", str(files["pools"]), "-p", str(files["pods"]), "--instance-types", str(files["types"]))
    assert code == 0, out
    assert "flex-0001" in out and "unschedulable shop/huge" in out and "$" in out


def test_shipped_catalog(files):
    pytest.importorskip("carpool.catalog")
    code, out = _plan("-m", str(files["pools"]), "-p", str(files["pods"]), "--json")
    assert code == 0, out
    plan = json.loads(out)
    assert plan["nodeClaims"] and all(c["nodePool"] == "flex" for c in plan["nodeClaims"])


def test_bad_inputs_exit_2(files, tmp_path):
    code, out = _plan("-m", str(files["pools"]), "--unavailable", "nonsense")
    assert code == 2 and "TYPE:ZONE:CAPACITY_TYPE" in out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"name": "x.large", "cpu": 2}]))
    code, out = _plan("-m", str(files["pools"]), "-p", str(files["pods"]), "--instance-types", str(bad))
    assert code == 2 and "instance types[0]" in out
