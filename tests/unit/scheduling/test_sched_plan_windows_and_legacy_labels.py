"""`carpool plan` with a Windows node class next to a Linux one, and pods that still select nodes by the
deprecated label keys: Windows pods land only on the Windows pool's types (os=windows and the family's
windows-build), a pod asking for another Windows build stays pending, and `beta.kubernetes.io/*` /
`failure-domain.beta.kubernetes.io/*` selectors mean what their stable keys mean."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from carpool.cli import app


def pool(name: str, alias: str, os_req: str = "") -> str:
    extra = f"\n        - {{key: kubernetes.io/os, operator: In, values: [{os_req}]}}" if os_req else ""
    return f"""
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: {name}}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: {name}}}
      requirements:
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}{extra}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: {name}}}
spec:
  role: node
  amiSelectorTerms: [{{alias: {alias}}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
"""


def pod(name: str, selector: str) -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: apps}}
spec:
  nodeSelector: {selector}
  containers: [{{name: c, image: c, resources: {{requests: {{cpu: "1", memory: 1Gi}}}}}}]
"""


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("plan")
    (tmp / "pools.yaml").write_text("---".join([pool("win", "windows2022@latest", "windows"), pool("linux", "al2023@latest")]))
    (tmp / "pods.yaml").write_text("---".join([
        pod("win", "{kubernetes.io/os: windows, node.kubernetes.io/windows-build: 10.0.20348}"),
        pod("win-legacy-os", "{beta.kubernetes.io/os: windows}"),
        pod("win2019", "{kubernetes.io/os: windows, node.kubernetes.io/windows-build: 10.0.17763}"),
        pod("legacy", "{beta.kubernetes.io/os: linux, beta.kubernetes.io/arch: arm64, "
                      "failure-domain.beta.kubernetes.io/zone: us-east-1b, beta.kubernetes.io/instance-type: m6g.large}"),
        pod("linux", "{kubernetes.io/os: linux}"),
    ]))
    result = CliRunner().invoke(app, ["plan", "-m", str(tmp / "pools.yaml"), "-p", str(tmp / "pods.yaml"), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def claim_of(out: dict, name: str) -> dict:
    claim = out["pods"][f"apps/{name}"].get("nodeClaim")
    assert claim, out["pods"][f"apps/{name}"]
    return next(c for c in out["nodeClaims"] if c["name"] == claim)


def test_windows_pods_get_windows_claims(planned: dict) -> None:
    for name in ("win", "win-legacy-os"):
        claim = claim_of(planned, name)
        assert claim["nodePool"] == "win"


def test_another_windows_build_is_unschedulable(planned: dict) -> None:
    assert "nodeClaim" not in planned["pods"]["apps/win2019"]


def test_linux_pods_never_go_to_the_windows_pool(planned: dict) -> None:
    assert claim_of(planned, "linux")["nodePool"] == "linux"


def test_deprecated_keys_select_like_the_stable_ones(planned: dict) -> None:
    claim = claim_of(planned, "legacy")
    assert claim["nodePool"] == "linux"
    assert claim["instanceTypes"] == ["m6g.large"]
