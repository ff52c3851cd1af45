"""The CDK entry point: context in, one stack out, readable errors, outputs for operators."""

from __future__ import annotations

import json
import tarfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Annotations, Match, Template
from aws_cdk.cx_api import CloudAssembly
from cdk_support import SKIP_BUNDLING, Synth
from infra.layer import LayerBuild, layer_digest
from infra.settings import SettingsError
from infra.stack import CarpoolStack
from packaging.version import Version

from infra import app as app_module


@dataclass(frozen=True)
class BundledSynth:
    """``cdk synth -c clusterName=demo`` as the app runs it, layer bundling included."""

    stack: CarpoolStack
    assembly: CloudAssembly
    template: dict[str, Any]
    #: The library's digest before and after the synth (other work may edit the library meanwhile).
    digests: tuple[str, str]


@pytest.fixture(scope="module")
def bundled(layer: LayerBuild, tmp_path_factory: pytest.TempPathFactory) -> BundledSynth:
    """One bundling synth (seconds: the layer is copied into the assembly) for every test of it."""
    before = layer_digest()
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("CLUSTER_NAME", "from-env")  # -c wins
        outdir = tmp_path_factory.mktemp("cdk.out")
        app, stack = app_module.build_app({"clusterName": "demo"}, outdir=str(outdir), nag=False)
        assembly = app.synth()
    return BundledSynth(stack, assembly, Template.from_stack(stack).to_json(), (before, layer_digest()))


def _unchanged_library(bundled: BundledSynth) -> str:
    digest, after = bundled.digests
    if digest != after or layer_digest() != digest:  # pragma: no cover - the library was edited meanwhile
        pytest.skip("the library changed during the synth")
    return digest


def test_build_app_makes_one_stack_named_after_the_cluster(bundled: BundledSynth) -> None:
    assert bundled.stack.stack_name == "carpool-demo"
    assert [s.stack_name for s in bundled.assembly.stacks] == ["carpool-demo"]
    assert len(Template.from_json(bundled.template).find_resources("AWS::Lambda::Function")) == 5
    assert "ClusterNameRequired" not in bundled.template.get("Rules", {})


def test_synth_builds_the_layer_from_the_library(bundled: BundledSynth) -> None:
    """No separate build step: the synthesized asset folder is the layer of the current library."""
    (resource,) = Template.from_json(bundled.template).find_resources("AWS::Lambda::LayerVersion").values()
    key = resource["Properties"]["Content"]["S3Key"]
    asset = Path(bundled.assembly.directory) / ("asset." + key.removesuffix(".zip"))
    digest = _unchanged_library(bundled)
    built = app_module.REPO_ROOT / "build" / f"layer-{digest}"
    assert (asset / "python" / "carpool" / "__init__.py").read_bytes() == (built / "python" / "carpool" / "__init__.py").read_bytes()
    assert sorted(p.relative_to(asset) for p in asset.rglob("*")) == sorted(p.relative_to(built) for p in built.rglob("*"))


def test_a_synth_without_bundling_writes_the_same_template(bundled: BundledSynth, tmp_path: Path) -> None:
    """Why the other CDK tests may skip bundling: the layer's asset hash is its input digest, not a
    fingerprint of the staged folder, so the template does not depend on whether the layer was staged."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("CLUSTER_NAME", "from-env")
        app, stack = app_module.build_app({"clusterName": "demo", **SKIP_BUNDLING}, outdir=str(tmp_path), nag=False)
        skipped = Template.from_stack(stack).to_json()
    _unchanged_library(bundled)
    (resource,) = Template.from_json(skipped).find_resources("AWS::Lambda::LayerVersion").values()
    assert not (tmp_path / ("asset." + resource["Properties"]["Content"]["S3Key"].removesuffix(".zip"))).exists()
    assert skipped == bundled.template  # the layer's S3 key included


def test_cluster_name_defaults_to_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTER_NAME", "karpenter-demo")
    app, stack = app_module.build_app({"aws:cdk:bundling-stacks": []}, outdir=str(tmp_path), nag=False)
    assert stack.stack_name == "carpool-karpenter-demo"
    assert stack.settings.cluster_name == "karpenter-demo"


def test_without_any_cluster_name_the_app_is_an_undeployable_placeholder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cdk ls`, `cdk bootstrap` and `cdk synth` work; CloudFormation refuses to create the stack."""
    monkeypatch.delenv("CLUSTER_NAME", raising=False)
    # skip bundling as `cdk ls` does: the placeholder still synthesizes
    app, stack = app_module.build_app({"aws:cdk:bundling-stacks": []}, outdir=str(tmp_path), nag=False)
    assert stack.stack_name == "carpool-clusterName-not-set"
    assembly = app.synth()
    template = assembly.get_stack_by_name(stack.stack_name).template
    (assertion,) = template["Rules"]["ClusterNameRequired"]["Assertions"]
    left, right = assertion["Assert"]["Fn::Equals"]
    assert left != right  # always false: the rule rejects every create and update
    assert "-c clusterName=" in assertion["AssertDescription"]
    warnings = Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp("-c clusterName="))
    assert len(warnings) == 1


def test_an_invalid_cluster_name_from_the_environment_is_rejected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLUSTER_NAME", "not a name")
    with pytest.raises(SettingsError, match="clusterName='not a name'"):
        app_module.build_app({}, outdir=str(tmp_path))


def test_main_prints_one_line_instead_of_a_trace(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CDK_CONTEXT_JSON", raising=False)
    monkeypatch.delenv("CDK_OUTDIR", raising=False)
    assert app_module.main(["-c", "clusterName=demo", "-c", "nodeRoleArn=not-an-arn"]) == 2
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


#: The aws-cdk-lib release whose recommended flags cdk.json carries (`cdk init`'s context for it).
FLAGS_FROM = "2.275.0"


def recommended_flags() -> tuple[str, dict[str, Any]]:
    """The installed aws-cdk-lib's version and ``recommended-feature-flags.json`` (what `cdk init` writes)."""
    import aws_cdk

    bundle = next(Path(aws_cdk.__file__).parent.glob("_jsii/aws-cdk-lib@*.jsii.tgz"))
    with tarfile.open(bundle) as archive:
        member = archive.extractfile("package/recommended-feature-flags.json")
        assert member is not None
        flags = json.load(member)
    return bundle.name.removeprefix("aws-cdk-lib@").removesuffix(".jsii.tgz"), flags


def test_cdk_json_carries_the_recommended_feature_flags() -> None:
    context = json.loads((app_module.REPO_ROOT / "cdk.json").read_text())["context"]
    version, recommended = recommended_flags()
    configured = {key: value for key, value in context.items() if key.startswith("@aws-cdk")}
    # every configured flag has the recommended value (a flag this aws-cdk-lib no longer has is stale)
    assert {k: v for k, v in configured.items() if recommended.get(k, v) != v} == {}
    missing = sorted(set(recommended) - set(configured))
    if missing and Version(version) > Version(FLAGS_FROM):
        warnings.warn(f"aws-cdk-lib {version} recommends flags cdk.json lacks: {missing}", stacklevel=1)
    else:
        assert missing == [], "run `npx aws-cdk@2 flags --set --unconfigured --recommended`"


def test_cdk_json_runs_the_venv_and_requires_the_cluster_name() -> None:
    cdk_json = json.loads((app_module.REPO_ROOT / "cdk.json").read_text())
    assert cdk_json["app"] == ".venv/bin/python infra/app.py"
    assert "clusterName" not in cdk_json.get("context", {}), "clusterName must be chosen, not defaulted"


def test_a_layer_that_cannot_be_built_ends_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """pip failing inside CDK's bundling (a jsii callback) still reads as a carpool error, not a trace."""
    lock = tmp_path / "broken.lock"
    lock.write_text("pydantic==2.0\n")  # no hash: rejected before pip runs
    monkeypatch.setattr("infra.layer_asset.LOCK_FILE", lock)
    monkeypatch.delenv("CDK_CONTEXT_JSON", raising=False)
    monkeypatch.delenv("CDK_OUTDIR", raising=False)
    monkeypatch.setattr(app_module, "REPO_ROOT", tmp_path)  # write cdk.out there, read no cdk.json
    assert app_module.main(["-c", "clusterName=demo"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("carpool: the Lambda layer could not be built:"), err
    assert "pydantic==2.0" in err[-1]


def test_outputs_name_what_operators_look_for(default: Synth) -> None:
    outputs = default.template.to_json()["Outputs"]
    assert "ConfigParameterName" not in outputs  # the config lives in the cluster
    for name in ("EventBusName", "StateTableName", "NodeRoleArn", "NodeRoleName", "InstanceProfileName",
                 "DashboardName", "WatcherFunctionName", "ProvisionerRoleArn", "AlarmTopicArn"):  # fmt: skip
        assert name in outputs, name


def test_a_synth_without_an_alarm_subscriber_warns_and_one_with_an_email_does_not(default: Synth, full: Synth) -> None:
    """Alarms nobody hears are no alarms: the synth says so (full sets -c alarmEmail)."""
    def unheard(synth: Synth) -> list[Any]:
        return Annotations.from_stack(synth.stack).find_warning("*", Match.string_like_regexp("no alarm subscriber"))

    assert len(unheard(default)) == 1 and unheard(full) == []


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "not a text file (binary content)"),
        (b"# nothing here yet\n", "holds no document"),
        (b"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n",
         "(Deployment web): kind: a config holds only NodePool and EC2NodeClass documents"),
    ],
    ids=["binary", "empty", "deployment"],
)
def test_a_bad_config_file_ends_with_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], content: bytes, expected: str
) -> None:
    config = tmp_path / "pools.yaml"
    config.write_bytes(content)
    monkeypatch.delenv("CDK_CONTEXT_JSON", raising=False)
    monkeypatch.delenv("CDK_OUTDIR", raising=False)
    monkeypatch.setattr(app_module, "REPO_ROOT", tmp_path)  # write cdk.out there, read no cdk.json
    assert app_module.main(["-c", "clusterName=demo", "-c", f"configFile={config}"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    # one line a problem, each naming the file, as `carpool validate` prints them (the Deployment alone is
    # two: its kind, and no NodePool)
    assert len(lines) == (2 if b"Deployment" in content else 1), lines
    assert all(str(config) in line for line in lines) and expected in lines[0]
