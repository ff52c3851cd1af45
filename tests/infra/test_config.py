"""``-c configFile=F``: checked once at synth with the library's verdict, never stored, its apply printed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from aws_cdk.assertions import Annotations, Match
from cdk_support import POOLS_YAML, Synth
from infra.config_file import ConfigError, check_config_file


def write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "pools.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_a_valid_file_is_judged_and_said_how_to_apply(tmp_path: Path) -> None:
    path = write(tmp_path, POOLS_YAML)
    checked = check_config_file(path)
    assert [p.name for p in checked.manifests.nodepools] == ["general", "gpu", "unlimited"]
    line = checked.how_to_apply()
    assert line.startswith(f"configFile {path}: ok: 3 NodePools, 1 EC2NodeClass; the stack does not store it")
    assert f"kubectl apply -f {path}" in line and f"carpool apply -f {path}" in line


def test_the_template_is_the_same_with_and_without_the_file(
    synth: Callable[..., Synth], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One source of truth: the file changes nothing a deploy writes; the synth only says how to apply it."""
    path = write(tmp_path, POOLS_YAML)  # its node class names KarpenterNodeRole-prod
    context = {"clusterName": "demo", "nodeClassRoles": "KarpenterNodeRole-*"}
    with_file, without = synth({**context, "configFile": str(path)}, nag=False), synth(context, nag=False)
    assert json.dumps(with_file.template.to_json(), sort_keys=True) == json.dumps(without.template.to_json(),
                                                                                 sort_keys=True)
    err = capsys.readouterr().err
    assert f"carpool: configFile {path}: ok: 3 NodePools" in err and "kubectl apply -f" in err
    infos = Annotations.from_stack(with_file.stack).find_info("*", Match.string_like_regexp("does not store it"))
    assert len(infos) == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: [unclosed", "invalid YAML"),
        ("apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: x}\n", "spec: required field is missing"),
        ("- just\n- a list\n", "expected a Kubernetes object with apiVersion and kind"),
        ("apiVersion: karpenter.sh/v1\nkind: NodePool\nspec: {}\n", "spec.template: Required value"),
    ],
)
def test_an_unusable_file_fails_the_check(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_config_file(write(tmp_path, text))


def test_the_check_refuses_what_validate_refuses_with_the_same_lines(tmp_path: Path) -> None:
    """One verdict: a NodePool naming an EC2NodeClass the file lacks and an int32 overflow stop the synth
    with the lines `carpool validate` prints for the same file."""
    from typer.testing import CliRunner

    from carpool.cli import app

    docs = list(yaml.safe_load_all(POOLS_YAML))
    pool = next(d for d in docs if d["kind"] == "NodePool")
    pool["spec"]["template"]["spec"]["nodeClassRef"]["name"] = "missing"
    nodeclass = next(d for d in docs if d["kind"] == "EC2NodeClass")
    nodeclass["spec"]["kubelet"] = {"maxPods": 100000000000}
    path = write(tmp_path, yaml.safe_dump_all(docs, sort_keys=False))
    with pytest.raises(ConfigError) as info:
        check_config_file(path)
    synth_lines = str(info.value).splitlines()
    assert any("spec.kubelet.maxPods: Invalid value: 100000000000: must be a 32-bit integer" in line
               for line in synth_lines), synth_lines
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    validate_lines = [line for line in result.output.splitlines() if not line.endswith(("error", "errors"))]
    assert validate_lines == synth_lines
    nodeclass["spec"].pop("kubelet")
    write(tmp_path, yaml.safe_dump_all(docs, sort_keys=False))
    with pytest.raises(ConfigError, match=r"nodeClassRef.name: EC2NodeClass 'missing' is not among"):
        check_config_file(path)


def test_a_binary_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        check_config_file(write(tmp_path, b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03+I-.\x01\x00"))
    assert str(info.value).endswith("pools.yaml: not a text file (binary content); expected NodePool/EC2NodeClass YAML")


@pytest.mark.parametrize("content", ["", "\n\n", "# all pools moved elsewhere\n---\n"])
def test_an_empty_file_is_refused(tmp_path: Path, content: str) -> None:
    with pytest.raises(ConfigError, match="holds no document"):
        check_config_file(write(tmp_path, content))


def test_a_repeated_key_is_refused_as_the_api_server_refuses_it(tmp_path: Path) -> None:
    repeated = POOLS_YAML.replace("  name: general\n", "  name: general\n  name: general-2\n", 1)
    assert repeated != POOLS_YAML
    with pytest.raises(ConfigError, match=r'pools.yaml#1: metadata: duplicate field "name" \(again at line'):
        check_config_file(write(tmp_path, repeated))


def test_a_document_of_another_kind_is_refused(tmp_path: Path) -> None:
    deployment = "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 3}\n"
    with pytest.raises(ConfigError, match=r"\(Deployment web\): kind: a config holds only NodePool and EC2NodeClass"):
        check_config_file(write(tmp_path, POOLS_YAML + deployment))


def test_a_negative_limit_is_refused_naming_the_field(tmp_path: Path) -> None:
    bad = POOLS_YAML.replace('cpu: "64"', 'cpu: "-4"')
    assert bad != POOLS_YAML
    with pytest.raises(ConfigError, match=r"\(NodePool general\): spec.limits\[cpu\]: invalid limit '-4'"):
        check_config_file(write(tmp_path, bad))


def test_an_unreachable_limit_is_a_warning_not_an_error(tmp_path: Path) -> None:
    text = POOLS_YAML.replace('memory: 256Gi', 'memory: 256Gi\n    amd.com/gpu: "1"')
    checked = check_config_file(write(tmp_path, text))
    assert [w for w in checked.warnings if "spec.limits[amd.com/gpu]" in w]
    assert not [w for w in checked.warnings if "spec.limits[cpu]" in w]
