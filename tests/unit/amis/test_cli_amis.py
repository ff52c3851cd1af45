"""`carpool amis`. The manifest loader and catalog are built concurrently, so the command tests plug
stand-ins in at exactly the two import points the command uses."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
import typer
from stand_ins import NOW, Term, itype, nodeclass
from typer.testing import CliRunner

import carpool.api
import carpool.catalog
from carpool.amis import parse_entries, source_from_entries
from carpool.amis.aliases import parse_alias
from carpool.cli import amis as cli_amis

AMI_FILE = """
- {id: ami-std-x86, name: bottlerocket-aws-k8s-1.32-x86_64-v1.32.0, arch: amd64, creationDate: "2025-03-01T00:00:00Z"}
- {id: ami-std-arm, name: bottlerocket-aws-k8s-1.32-aarch64-v1.32.0, arch: arm64, creationDate: "2025-03-01T00:00:00Z"}
- {id: ami-nv-x86, name: bottlerocket-aws-k8s-1.32-nvidia-x86_64-v1.32.0, arch: x86_64, variant: nvidia, creationDate: "2025-03-02T00:00:00Z"}
- {id: ami-nv-old, name: bottlerocket-aws-k8s-1.32-nvidia-x86_64-v1.31.0, arch: amd64, creationDate: "2025-01-02T00:00:00Z"}
"""


def _entries():  # type: ignore[no-untyped-def]
    import yaml

    return parse_entries(yaml.safe_load(AMI_FILE))


def test_source_from_entries_points_alias_paths_at_the_best_entry() -> None:
    src = source_from_entries(_entries(), [parse_alias("bottlerocket@latest")], "1.32")
    assert src.get_parameter("/aws/service/bottlerocket/aws-k8s-1.32-nvidia/x86_64/latest/image_id") == "ami-nv-x86"
    assert src.get_parameter("/aws/service/bottlerocket/aws-k8s-1.32/arm64/latest/image_id") == "ami-std-arm"
    assert src.get_parameter("/aws/service/bottlerocket/aws-k8s-1.32-nvidia/arm64/latest/image_id") is None


def test_build_report_and_text() -> None:
    src = source_from_entries(_entries(), [parse_alias("bottlerocket@latest")], "1.32")
    bad = nodeclass(Term(alias="ubuntu@latest"), name="broken")
    its = [itype("m5.large"), itype("g5.xlarge", gpus=1), itype("g5g.xlarge", "arm64", gpus=1)]
    reports = cli_amis.build_report([nodeclass(Term(alias="bottlerocket@latest")), bad], src, "1.32", its, NOW)
    ok, broken = reports
    assert {k: v.id for k, v in ok.mapping.items()} == {"m5.large": "ami-std-x86", "g5.xlarge": "ami-nv-x86"}
    assert set(ok.not_offered) == {"g5g.xlarge"}
    assert broken.error and "unknown family" in broken.error
    text = cli_amis.render_text(reports, "1.32")
    assert "ami-nv-x86 (amd64 nvidia): g5.xlarge" in text
    assert "ami-std-x86 (amd64 standard): m5.large" in text
    assert "g5g.xlarge:" in text and "error: alias 'ubuntu@latest'" in text
    js = ok.to_json()
    assert js["instanceTypes"] == {"g5.xlarge": "ami-nv-x86", "m5.large": "ami-std-x86"}
    assert js["notOffered"]["g5g.xlarge"][0]["reason"]


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:  # a group, so `amis` is a subcommand as in the real CLI
        pass

    cli_amis.register(app)
    return app


@pytest.fixture
def wired(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    loader = types.ModuleType("carpool.api.loader")
    loader.load = lambda paths: types.SimpleNamespace(  # type: ignore[attr-defined]
        nodeclasses=[nodeclass(Term(alias="bottlerocket@latest"))]
    )
    monkeypatch.setitem(sys.modules, "carpool.api.loader", loader)
    monkeypatch.setattr(carpool.api, "loader", loader, raising=False)
    catalog = types.SimpleNamespace(types={t.name: t for t in (itype("m5.large"), itype("g5.xlarge", gpus=1))})
    monkeypatch.setattr(carpool.catalog, "Catalog", types.SimpleNamespace(snapshot=lambda: catalog), raising=False)
    (tmp_path / "amis.yaml").write_text(AMI_FILE)
    (tmp_path / "nc.yaml").write_text("kind: EC2NodeClass\n")
    return tmp_path


def test_command_json(wired: Path) -> None:
    result = CliRunner().invoke(
        _app(), ["amis", "-f", str(wired / "nc.yaml"), "--ami-file", str(wired / "amis.yaml"), "--json"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["nodeClasses"][0]["instanceTypes"] == {"g5.xlarge": "ami-nv-x86", "m5.large": "ami-std-x86"}


def test_command_unknown_instance_type(wired: Path) -> None:
    result = CliRunner().invoke(
        _app(),
        ["amis", "-f", str(wired / "nc.yaml"), "--ami-file", str(wired / "amis.yaml"), "--instance-types", "zz.huge"],
    )
    assert result.exit_code == 2
    assert "unknown instance type(s): zz.huge" in result.output


def test_command_without_loader_fails_clearly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "carpool.api.loader", None)  # import raises ImportError
    monkeypatch.delattr(carpool.api, "loader", raising=False)
    (tmp_path / "a.yaml").write_text("[]")
    result = CliRunner().invoke(_app(), ["amis", "-f", str(tmp_path / "a.yaml"), "--ami-file", str(tmp_path / "a.yaml")])
    assert result.exit_code == 2
    assert "carpool.api.loader" in result.output


def test_command_requires_ami_file(tmp_path: Path) -> None:
    result = CliRunner().invoke(_app(), ["amis", "-f", str(tmp_path / "x.yaml")])
    assert result.exit_code == 2
    assert "Missing option '--ami-file'" in result.output
