"""The NodePool/EC2NodeClass YAML stored in SSM: default, size limit, structure, library validation."""

from __future__ import annotations

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


def test_config_larger_than_every_part_is_refused(tmp_path: Path) -> None:
    import random

    noise = random.Random(3)  # comments that do not compress
    text = POOLS_YAML + "".join(f"# {noise.getrandbits(400):x}\n" for _ in range(8000))
    with pytest.raises(ConfigError, match="too large to store: .* more than 100 parameters"):
        load_config(settings_for(tmp_path, text), "role")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: [unclosed", "invalid YAML"),
        ("apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: x}\n", "spec: required field is missing"),
        ("- just\n- a list\n", "expected a Kubernetes object with apiVersion and kind"),
        ("apiVersion: karpenter.sh/v1\nkind: NodePool\nspec: {}\n", "spec.template: Required value"),
    ],
)
def test_unusable_config_fails_at_synth(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(settings_for(tmp_path, text), "role")


def test_library_validation_names_the_bad_field(tmp_path: Path) -> None:
    bad = POOLS_YAML.replace("operator: In, values: [spot]", "operator: Sometimes, values: [spot]")
    with pytest.raises(ConfigError, match="general"):
        load_config(settings_for(tmp_path, bad), "role")


def test_synth_refuses_what_validate_refuses_with_the_same_line(tmp_path: Path) -> None:
    """One verdict: a NodePool naming an EC2NodeClass the config lacks, a volume size without its unit and
    an int32 overflow stop the synth with the lines `carpool validate` prints for the same file."""
    from typer.testing import CliRunner

    from carpool.cli import app

    docs = list(yaml.safe_load_all(POOLS_YAML))
    pool = next(d for d in docs if d["kind"] == "NodePool")
    pool["spec"]["template"]["spec"]["nodeClassRef"]["name"] = "missing"
    nodeclass = next(d for d in docs if d["kind"] == "EC2NodeClass")
    nodeclass["spec"]["kubelet"] = {"maxPods": 100000000000}
    text = yaml.safe_dump_all(docs, sort_keys=False)
    settings = settings_for(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(settings, "role")
    synth_lines = str(info.value).splitlines()
    assert any("spec.kubelet.maxPods: Invalid value: 100000000000: must be a 32-bit integer" in line
               for line in synth_lines), synth_lines
    result = CliRunner().invoke(app, ["validate", str(tmp_path / "pools.yaml")])
    assert result.exit_code == 2
    validate_lines = [line for line in result.output.splitlines() if not line.endswith(("error", "errors"))]
    assert validate_lines == synth_lines
    nodeclass["spec"].pop("kubelet")
    (tmp_path / "pools.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))
    with pytest.raises(ConfigError, match=r"nodeClassRef.name: EC2NodeClass 'missing' is not among"):
        load_config(settings, "role")


# -- one-line errors for bad config files (exit 2 from infra/app.py) ---------------------------------------
def _config_error(tmp_path: Path, content: str | bytes, **context: str) -> str:
    path = tmp_path / "pools.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    settings = Settings.from_context({"clusterName": "demo", "configFile": str(path), **context})
    with pytest.raises(ConfigError) as info:
        load_config(settings, "role")
    message = str(info.value)
    assert "\n" not in message, message
    return message


def test_a_binary_config_file_is_one_line(tmp_path: Path) -> None:
    message = _config_error(tmp_path, b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03+I-.\x01\x00")
    assert message.endswith("pools.yaml: not a text file (binary content); expected NodePool/EC2NodeClass YAML")


@pytest.mark.parametrize("content", ["", "\n\n", "# all pools moved elsewhere\n---\n"])
def test_an_empty_config_file_is_refused(tmp_path: Path, content: str) -> None:
    assert "holds no document" in _config_error(tmp_path, content)


def test_a_repeated_key_is_refused_as_the_api_server_refuses_it(tmp_path: Path) -> None:
    repeated = POOLS_YAML.replace("  name: general\n", "  name: general\n  name: general-2\n", 1)
    assert repeated != POOLS_YAML
    message = _config_error(tmp_path, repeated)
    assert 'pools.yaml#1: metadata: duplicate field "name" (again at line' in message


def test_a_document_of_another_kind_is_refused_not_stored(tmp_path: Path) -> None:
    deployment = "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 3}\n"
    message = _config_error(tmp_path, POOLS_YAML + deployment)
    assert "(Deployment web): kind: a config holds only NodePool and EC2NodeClass documents" in message


def test_200_nodepools_are_accepted_and_stored_in_parts(tmp_path: Path) -> None:
    from carpool import config_parts

    pool, node_class = list(yaml.safe_load_all(default_config(settings_for(tmp_path), "role")))
    pools = []
    for i in range(200):
        doc = yaml.safe_load(yaml.safe_dump(pool))
        doc["metadata"]["name"] = f"team-{i:03d}"
        doc["spec"]["limits"] = {"cpu": str(100 + i), "memory": f"{400 + i}Gi"}
        pools.append(doc)
    text = yaml.safe_dump_all([*pools, node_class], sort_keys=False)
    assert len(text.encode()) > 10 * MAX_PARAMETER_BYTES
    config = load_config(settings_for(tmp_path, text), "role")
    assert len(config.nodepools) == 200 and len(config.pool_limits) == 400
    pointer = config_parts.pointer_of(config.index_value)
    assert pointer is not None and pointer.parts == len(config.parts) >= 1  # ~100 KB of YAML compresses well
    assert config_parts.decode(pointer, list(config.parts)) == text
