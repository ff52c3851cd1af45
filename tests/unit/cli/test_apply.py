"""`carpool apply`: the files judged first (exit 2, nothing sent), then each object applied as kubectl
applies it, against the simulated cluster's Karpenter objects (kube-apiserver's CRD semantics)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from carpool.api.kubectl_apply import LAST_APPLIED
from carpool.cli import app
from carpool.cli.apply import apply_object, resource_name
from carpool.karpenter_objects import EC2NODECLASS, NODEPOOL, ObjectInvalid, ObjectKind
from carpool.sim.cluster.simulated import SimulatedCluster

NOW = datetime(2026, 1, 1, tzinfo=UTC)
POOL: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "cd-general"},
    "spec": {"template": {"spec": {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "cd-default"},
        "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]}},
        "limits": {"cpu": "64", "memory": "256Gi"}}}
CLASS: dict[str, Any] = {
    "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "cd-default"},
    "spec": {"role": "KarpenterNodeRole-demo", "amiSelectorTerms": [{"alias": "al2023@latest"}],
             "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
             "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}]}}


@pytest.fixture
def cluster() -> SimulatedCluster:
    return SimulatedCluster(lambda: NOW)


def test_created_then_unchanged_then_configured(cluster: SimulatedCluster) -> None:
    assert apply_object(cluster, NODEPOOL, copy.deepcopy(POOL)).outcome == "created"
    stored = cluster.get_object(NODEPOOL, "cd-general")
    assert stored is not None and LAST_APPLIED in stored["metadata"]["annotations"]
    assert stored["spec"]["disruption"]["consolidateAfter"] == "0s"  # the CRD's default, which apply leaves
    again = apply_object(cluster, NODEPOOL, copy.deepcopy(POOL))
    assert again.outcome == "unchanged" and again.patch == {}
    assert cluster.get_object(NODEPOOL, "cd-general")["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    edited = copy.deepcopy(POOL)
    edited["spec"]["limits"] = {"cpu": "128"}
    changed = apply_object(cluster, NODEPOOL, edited)
    assert changed.outcome == "configured"
    now = cluster.get_object(NODEPOOL, "cd-general")
    assert now["spec"]["limits"] == {"cpu": "128"}  # memory was applied before and is gone from the file
    assert now["spec"]["disruption"] == stored["spec"]["disruption"]
    assert now["metadata"]["generation"] == stored["metadata"]["generation"] + 1


def test_what_others_wrote_stays(cluster: SimulatedCluster) -> None:
    """Status (carpool's) and a label another tool set are not in the file, so apply leaves them."""
    apply_object(cluster, NODEPOOL, copy.deepcopy(POOL))
    cluster.patch_object(NODEPOOL, "cd-general", {"metadata": {"labels": {"team": "a"}}})
    cluster.patch_status(NODEPOOL, "cd-general", {"nodes": 3})
    edited = copy.deepcopy(POOL)
    edited["spec"]["weight"] = 10
    assert apply_object(cluster, NODEPOOL, edited).outcome == "configured"
    now = cluster.get_object(NODEPOOL, "cd-general")
    assert now["metadata"]["labels"] == {"team": "a"} and now["status"]["nodes"] == 3 and now["spec"]["weight"] == 10


def test_a_dry_run_writes_nothing(cluster: SimulatedCluster) -> None:
    assert apply_object(cluster, EC2NODECLASS, copy.deepcopy(CLASS), dry_run=True).outcome == "created"
    assert cluster.get_object(EC2NODECLASS, "cd-default") is None
    apply_object(cluster, EC2NODECLASS, copy.deepcopy(CLASS))
    before = cluster.get_object(EC2NODECLASS, "cd-default")
    edited = copy.deepcopy(CLASS)
    edited["spec"]["role"] = "other"
    would = apply_object(cluster, EC2NODECLASS, edited, dry_run=True)
    assert would.outcome == "configured" and would.patch["spec"] == {"role": "other"}
    assert cluster.get_object(EC2NODECLASS, "cd-default") == before


class RacingWriter:
    """The simulated cluster with another writer that labels the object between apply's read and its patch,
    `races` times: apply's resourceVersion precondition is then stale (409) and it must read again."""

    def __init__(self, cluster: SimulatedCluster, races: int) -> None:
        self.cluster, self.races, self.patches = cluster, races, 0

    def get_object(self, kind: ObjectKind, name: str) -> dict[str, Any] | None:
        found = self.cluster.get_object(kind, name)
        if found is not None and self.races:
            self.races -= 1
            self.cluster.patch_object(kind, name, {"metadata": {"labels": {"race": str(self.races)}}})
        return found

    def patch_object(self, kind: ObjectKind, name: str, patch: Mapping[str, Any], *,
                     resource_version: str | None = None) -> dict[str, Any]:
        self.patches += 1
        return self.cluster.patch_object(kind, name, patch, resource_version=resource_version)

    def create_object(self, kind: ObjectKind, obj: Mapping[str, Any]) -> dict[str, Any]:
        return self.cluster.create_object(kind, obj)


def test_a_patch_racing_another_write_is_sent_again(cluster: SimulatedCluster) -> None:
    apply_object(cluster, NODEPOOL, copy.deepcopy(POOL))
    racing = RacingWriter(cluster, races=2)
    edited = copy.deepcopy(POOL)
    edited["spec"]["weight"] = 7
    assert apply_object(racing, NODEPOOL, edited).outcome == "configured"  # type: ignore[arg-type]
    assert racing.patches == 3  # two refused as stale, the third at the version it read
    now = cluster.get_object(NODEPOOL, "cd-general")
    assert now["spec"]["weight"] == 7 and now["metadata"]["labels"] == {"race": "0"}


def test_what_the_server_refuses_is_its_error(cluster: SimulatedCluster) -> None:
    bad = copy.deepcopy(POOL)
    bad["spec"]["weight"] = 1000
    with pytest.raises(ObjectInvalid, match="spec.weight"):
        apply_object(cluster, NODEPOOL, bad)


def test_names_are_as_kubectl_prints_them() -> None:
    assert resource_name(NODEPOOL, "a") == "nodepool.karpenter.sh/a"
    assert resource_name(EC2NODECLASS, "b") == "ec2nodeclass.karpenter.k8s.aws/b"


# -- the command: files judged before anything is sent ------------------------------------------------------
def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_a_bad_file_is_refused_before_the_cluster_is_reached(tmp_path: Path) -> None:
    bad = copy.deepcopy(POOL)
    bad["spec"]["template"]["spec"]["requirments"] = bad["spec"]["template"]["spec"].pop("requirements")
    path = tmp_path / "pools.yaml"
    path.write_text(yaml.safe_dump(bad))
    code, out, err = run("apply", "-f", str(path), "--kubeconfig", str(tmp_path / "missing"))
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert "spec.template.spec.requirments: unknown field 'requirments'" in lines[0] and lines[-1] == "2 errors"
    assert "kubeconfig" not in err  # judged first: no connection was attempted


def test_other_kinds_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "mixed.yaml"
    path.write_text(yaml.safe_dump_all([POOL, CLASS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                                     "spec": {"containers": [{"name": "c", "image": "x"}]}}]))
    code, _, err = run("apply", "-f", str(path), "--kubeconfig", str(tmp_path / "missing"))
    assert code == 2
    assert "kind: carpool apply applies only NodePool and EC2NodeClass documents" in err


def test_no_kubeconfig_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "pools.yaml"
    path.write_text(yaml.safe_dump_all([POOL, CLASS]))
    code, _, err = run("apply", "-f", str(path), "--kubeconfig", str(tmp_path / "missing"))
    assert code == 2 and err.strip() == f"error: kubeconfig {tmp_path / 'missing'}: no such file; pass --kubeconfig or set KUBECONFIG"
