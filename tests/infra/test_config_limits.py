"""The deployed config's NodePool limits at `cdk synth`: a negative limit stops the deploy naming the
field; a limit no admitted instance type can reach is carried as a warning."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from infra.config import ConfigError, load_config
from infra.settings import Settings

NODECLASS = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
             "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                      "subnetSelectorTerms": [{"tags": {"a": "b"}}], "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}}


def pool(limits: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "np"},
            "spec": {"limits": limits, "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["c5"]}]}}}}


def settings_for(tmp_path: Path, docs: list[dict[str, Any]], **context: str) -> Settings:
    (tmp_path / "pools.yaml").write_text(yaml.safe_dump_all(docs))
    return Settings.from_context({"clusterName": "demo", "configFile": str(tmp_path / "pools.yaml"), **context})


def test_a_negative_limit_fails_the_synth(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, [pool({"cpu": "-4"}), NODECLASS])
    with pytest.raises(ConfigError, match=r"\(NodePool np\): spec.limits\[cpu\]: invalid limit '-4'"):
        load_config(settings, "role")


def test_an_unreachable_limit_is_a_warning_not_an_error(tmp_path: Path) -> None:
    config = load_config(settings_for(tmp_path, [pool({"cpu": "4", "amd.com/gpu": 1}), NODECLASS]), "role")
    assert config.pool_limits and [w for w in config.warnings if "spec.limits[amd.com/gpu]" in w]
    assert not [w for w in config.warnings if "spec.limits[cpu]" in w]
