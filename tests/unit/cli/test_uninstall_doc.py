"""docs/uninstall.md's `carpool` commands are ones the CLI has, with options it takes: each is run as a
user runs it (typer's CliRunner on the real command group) with no kubeconfig to be found, so it gets as
far as looking for the cluster and says which file it lacks (a wrong option would be a usage error first)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from carpool.cli import app

DOC = Path(__file__).resolve().parents[3] / "docs" / "uninstall.md"


def commands() -> list[list[str]]:
    out = []
    for line in DOC.read_text().splitlines():
        line = line.strip()
        if line.startswith(".venv/bin/carpool "):
            out.append(shlex.split(line.split("#", 1)[0])[1:])
    return out


def test_the_doc_shows_the_release_with_and_without_a_dry_run() -> None:
    assert [c[0] for c in commands()] == ["release-finalizers", "release-finalizers"]
    assert "--dry-run" in commands()[0] and "--dry-run" not in commands()[1]


@pytest.mark.parametrize("args", commands(), ids=" ".join)
def test_each_command_parses_and_reaches_for_the_cluster(args: list[str], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "no-kubeconfig"
    monkeypatch.setenv("KUBECONFIG", str(missing))
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert f"kubeconfig {missing}: no such file" in result.output
