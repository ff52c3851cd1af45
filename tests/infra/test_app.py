"""The CDK entry point: context in, one stack out, readable errors, outputs for operators."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk.assertions import Template
from cdk_support import Synth
from infra.functions import LayerMissingError, carpool_layer
from infra.layer import LayerBuild
from infra.settings import SettingsError

from infra import app as app_module


def test_build_app_makes_one_stack_named_after_the_cluster(layer: LayerBuild, tmp_path: Path) -> None:
    app, stack = app_module.build_app({"clusterName": "demo"}, outdir=str(tmp_path), nag=False)
    assert stack.stack_name == "carpool-demo"
    assembly = app.synth()
    assert [s.stack_name for s in assembly.stacks] == ["carpool-demo"]
    Template.from_stack(stack).resource_count_is("AWS::Lambda::Function", 5)


def test_build_app_without_cluster_name_fails_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="-c clusterName="):
        app_module.build_app({}, outdir=str(tmp_path))


def test_main_prints_one_line_instead_of_a_trace(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CDK_CONTEXT_JSON", raising=False)
    monkeypatch.delenv("CDK_OUTDIR", raising=False)
    assert app_module.main(["-c", "clusterName=demo", "-c", "nodeRoleArn=not-an-arn"]) == 1
    assert capsys.readouterr().err.strip() == (
        "carpool: context nodeRoleArn='not-an-arn' is malformed; expected something like "
        "arn:aws:iam::123456789012:role/NAME"
    )


def test_cli_context_reads_cdk_json_then_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CDK_CONTEXT_JSON", raising=False)
    monkeypatch.delenv("CDK_OUTDIR", raising=False)
    defaults = json.loads((app_module.REPO_ROOT / "cdk.json").read_text())["context"]
    context = app_module._cli_context(["-c", "clusterName=x", "--context=logLevel=DEBUG"])
    assert context == {**defaults, "clusterName": "x", "logLevel": "DEBUG"}
    with pytest.raises(SettingsError, match="key=value"):
        app_module._cli_context(["-c", "clusterName"])
    monkeypatch.setenv("CDK_OUTDIR", "/tmp/out")
    assert app_module._cli_context(["-c", "clusterName=x"]) == {}  # the CLI passes context itself


def test_cdk_json_runs_the_venv_and_requires_the_cluster_name() -> None:
    cdk_json = json.loads((app_module.REPO_ROOT / "cdk.json").read_text())
    assert cdk_json["app"] == ".venv/bin/python infra/app.py"
    assert "clusterName" not in cdk_json.get("context", {}), "clusterName must be chosen, not defaulted"


def test_missing_layer_tells_the_user_to_run_make_layer(default: Synth, tmp_path: Path) -> None:
    with pytest.raises(LayerMissingError, match="run `make layer`"):
        carpool_layer(default.stack, "AnotherLayer", tmp_path / "no-layer")


def test_outputs_name_what_operators_look_for(default: Synth) -> None:
    outputs = default.template.to_json()["Outputs"]
    for name in ("EventBusName", "StateTableName", "ConfigParameterName", "NodeRoleArn", "InstanceProfileName",
                 "DashboardName", "WatcherFunctionName", "ProvisionerRoleArn"):  # fmt: skip
        assert name in outputs, name
    assert "AlarmTopicArn" not in outputs
