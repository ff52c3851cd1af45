"""The NodePool/EC2NodeClass YAML stored in SSM: default, size limit, structure, library validation."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml
from cdk_support import POOLS_YAML
from infra.config import MAX_PARAMETER_BYTES, ConfigError, PoolLimit, default_config, load_config
from infra.settings import Settings


def settings_for(tmp_path: Path, text: str | None = None, **context: str) -> Settings:
    values = {"clusterName": "demo", **context}
    if text is not None:
        (tmp_path / "pools.yaml").write_text(text)
        values["configFile"] = str(tmp_path / "pools.yaml")
    return Settings.from_context(values)


def test_default_config_uses_the_discovery_tags_and_role(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, subnetTag="tier=private", securityGroupTag="carpool=demo")
    pool, node_class = yaml.safe_load_all(default_config(settings, "my-node-role"))
    assert node_class["spec"]["role"] == "my-node-role"
    assert node_class["spec"]["subnetSelectorTerms"] == [{"tags": {"tier": "private"}}]
    assert node_class["spec"]["securityGroupSelectorTerms"] == [{"tags": {"carpool": "demo"}}]
    assert node_class["spec"]["amiSelectorTerms"] == [{"alias": "al2023@latest"}]
    assert pool["apiVersion"] == "karpenter.sh/v1" and node_class["apiVersion"] == "karpenter.k8s.aws/v1"


def test_limits_become_pool_alarms(tmp_path: Path) -> None:
    config = load_config(settings_for(tmp_path, POOLS_YAML), "ignored")
    assert config.text == POOLS_YAML
    assert config.nodepools == ("general", "gpu", "unlimited")
    assert config.pool_limits == (
        PoolLimit("general", "cpu"),
        PoolLimit("general", "memory"),
        PoolLimit("gpu", "nvidia.com/gpu"),
    )


def test_default_config_declares_limits(tmp_path: Path) -> None:
    config = load_config(settings_for(tmp_path), "role")
    assert config.source == "built-in default"
    assert config.pool_limits == (PoolLimit("default", "cpu"), PoolLimit("default", "memory"))


def test_config_larger_than_an_advanced_parameter_is_refused(tmp_path: Path) -> None:
    text = POOLS_YAML + "#" + "x" * MAX_PARAMETER_BYTES + "\n"
    with pytest.raises(ConfigError, match="ADVANCED tier"):
        load_config(settings_for(tmp_path, text), "role")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: [unclosed", "not valid YAML"),
        ("apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: x}\n", "no NodePool"),
        ("- just\n- a list\n", "every document needs a kind"),
        ("kind: NodePool\nspec: {}\n", "has no metadata.name"),
    ],
)
def test_unusable_config_fails_at_synth(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(settings_for(tmp_path, text, validateConfig="false"), "role")


@pytest.mark.skipif(importlib.util.find_spec("carpool.api.loader") is None, reason="library loader not written yet")
def test_library_validation_names_the_bad_field(tmp_path: Path) -> None:
    bad = POOLS_YAML.replace("operator: In, values: [spot]", "operator: Sometimes, values: [spot]")
    with pytest.raises(ConfigError, match="general"):
        load_config(settings_for(tmp_path, bad), "role")
    # The same file passes when validation is switched off (escape hatch for a library bug).
    load_config(settings_for(tmp_path, bad, validateConfig="false"), "role")
