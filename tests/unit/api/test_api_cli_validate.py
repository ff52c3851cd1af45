"""`carpool validate FILE...` through typer's CliRunner."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from carpool.cli import app

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "karpenter"
runner = CliRunner()


def test_good_examples_exit_zero_with_summary() -> None:
    result = runner.invoke(
        app, ["validate", str(EXAMPLES / "default.yaml"), str(EXAMPLES / "bottlerocket.yaml")]
    )
    assert result.exit_code == 0, result.output
    assert "ok: 2 NodePools, 2 EC2NodeClasses" in result.output


def test_typo_exits_two_and_prints_document_and_path() -> None:
    typo = EXAMPLES / "typo.yaml"
    result = runner.invoke(app, ["validate", str(typo)])
    assert result.exit_code == 2
    assert (
        f"{typo}#1 (NodePool typo): spec.template.spec.requirments: unknown field 'requirments'"
        in result.output
    )
    assert "did you mean 'requirements'" in result.output
    assert "ok:" not in result.output


def test_missing_file_exits_two() -> None:
    result = runner.invoke(app, ["validate", "does-not-exist.yaml"])
    assert result.exit_code == 2
    assert "does-not-exist.yaml: file not found" in result.output


def test_dangling_node_class_reference_exits_two(tmp_path: Path) -> None:
    pool = (EXAMPLES / "default.yaml").read_text().split("\n---\n")[0]
    other = (EXAMPLES / "bottlerocket.yaml").read_text().split("\n---\n")[1]
    f = tmp_path / "mixed.yaml"
    f.write_text(pool + "\n---\n" + other)
    result = runner.invoke(app, ["validate", str(f)])
    assert result.exit_code == 2
    assert (
        "spec.template.spec.nodeClassRef.name: EC2NodeClass 'default' is not among the loaded manifests"
        in result.output
    )


def test_nodepool_alone_is_valid_with_a_note(tmp_path: Path) -> None:
    f = tmp_path / "pool.yaml"
    f.write_text((EXAMPLES / "default.yaml").read_text().split("\n---\n")[0])
    result = runner.invoke(app, ["validate", str(f)])
    assert result.exit_code == 0, result.output
    assert "ok: 1 NodePool, 0 EC2NodeClasses" in result.output
    assert "not checked" in result.output


def test_long_paths_are_not_wrapped(tmp_path: Path) -> None:
    f = tmp_path / ("very-long-file-name-" * 5 + ".yaml")
    f.write_text((EXAMPLES / "typo.yaml").read_text())
    result = runner.invoke(app, ["validate", str(f)], env={"COLUMNS": "40"})
    assert result.exit_code == 2
    assert f"{f}#1 (NodePool typo): spec.template.spec.requirments:" in result.output
