"""`spec.limits`: any resource, never negative (an error naming the field), warnings for limits no
instance type of the pool can reach; the same rules in `carpool validate` (and at `cdk synth`:
tests/infra/test_config_limits.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from carpool.api.loader import ManifestErrors, load
from carpool.app.pools import offered_resources
from carpool.catalog import Catalog
from carpool.cli import app

runner = CliRunner()


def pool_doc(limits: dict[str, Any], families: tuple[str, ...] = ("c5", "m5")) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "np"},
        "spec": {"limits": limits, "template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": list(families)}],
        }}},
    }


@pytest.mark.parametrize(("resource", "value"), [("cpu", "-1"), ("memory", "-512Mi"), ("nodes", -3),
                                                 ("nvidia.com/gpu", "-1")])
def test_a_negative_limit_is_an_error_naming_the_field(resource: str, value: Any) -> None:
    with pytest.raises(ManifestErrors) as info:
        load([pool_doc({"cpu": "10", resource: value})])
    ((path, message),) = [(e.path, e.message) for e in info.value.errors]
    assert path == f"spec.limits[{resource}]"
    assert "must not be negative" in message


def test_limits_on_any_resource_load_and_zero_is_allowed() -> None:
    (pool,) = load([pool_doc({"cpu": "0", "memory": "1Gi", "nodes": 2, "nvidia.com/gpu": 1})]).nodepools
    assert pool.limits() == {"cpu": 0, "memory": 2**30, "nodes": 2, "nvidia.com/gpu": 1}


def test_a_limit_no_admitted_type_can_reach_is_a_warning() -> None:
    catalog = Catalog.snapshot("us-east-1")
    (cpu_pool,) = load([pool_doc({"cpu": "10", "nvidia.com/gpu": 1, "nvidia.com/gpus": 1, "nodes": 3})]).nodepools
    offered = offered_resources(cpu_pool, catalog)
    assert {"cpu", "memory", "pods"} <= offered and "nvidia.com/gpu" not in offered
    warnings = cpu_pool.limit_warnings(offered)
    assert [w.split(":")[0] for w in warnings] == ["spec.limits[nvidia.com/gpu]", "spec.limits[nvidia.com/gpus]"]
    (gpu_pool,) = load([pool_doc({"nvidia.com/gpu": 1}, families=("g4dn",))]).nodepools
    assert gpu_pool.limit_warnings(offered_resources(gpu_pool, catalog)) == []


def test_validate_rejects_negative_limits_and_warns_about_unreachable_ones(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(pool_doc({"cpu": "-1"})))
    result = runner.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 2
    assert "spec.limits[cpu]: invalid limit '-1': must not be negative" in result.output
    odd = tmp_path / "odd.yaml"
    odd.write_text(yaml.safe_dump(pool_doc({"cpu": "10", "nvidia.com/gpus": 1})))
    result = runner.invoke(app, ["validate", str(odd)])
    assert result.exit_code == 0, result.output
    assert "warning: NodePool np: spec.limits[nvidia.com/gpus]: no instance type" in result.output
