"""Bad inputs to the command line: one line on stderr naming the file (and field), exit 2, no traceback.

The `carpool` app is run as a user runs it (typer's CliRunner on the real command group); for
`simulate --report DIR` the run must be refused before the simulation starts, which the test shows by
giving a scenario whose run would take far longer than the test's patience (the check comes first).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from carpool.cli import app

NODECLASS = """\
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: node-role
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"""
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stderr.strip()


def _one_line(stderr: str) -> str:
    assert "Traceback" not in stderr
    assert len(stderr.splitlines()) == 1, stderr
    return stderr


@pytest.fixture
def nodeclass(tmp_path: Path) -> Path:
    path = tmp_path / "nodeclass.yaml"
    path.write_text(NODECLASS)
    return path


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "no such file"),
        ("DIR", "is a directory"),
        (b"\x7fELF\x02\x01\x01\x00\x00\x00\xff\xfe", "not a text file"),
        ("- id: ami-1\n  name: [unclosed\n", "not valid YAML"),
        ("images: {id: ami-1}\n", "expected a list of images"),
        ("- just-a-string\n", "record #0: expected a mapping"),
        ("", "the file is empty"),
    ],
    ids=["missing", "directory", "binary", "malformed-yaml", "not-a-list", "not-a-record", "empty"],
)
def test_amis_ami_file_problems_are_one_line_exit_2(
    tmp_path: Path, nodeclass: Path, content: str | bytes | None, expected: str
) -> None:
    path = tmp_path / "images.yaml"
    if content == "DIR":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    code, stderr = _run("amis", "-f", str(nodeclass), "--ami-file", str(path))
    assert code == 2
    line = _one_line(stderr)
    assert line.startswith("error: --ami-file") and str(path) in line and expected in line


def test_simulate_binary_scenario_is_one_line_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    code, stderr = _run("simulate", str(path))
    assert code == 2
    assert "not a text file" in _one_line(stderr) and str(path) in stderr


def test_simulate_report_directory_is_refused_before_the_run(tmp_path: Path) -> None:
    code, stderr = _run("simulate", str(EXAMPLES / "flex-first.yaml"), "--report", str(tmp_path), "--quiet")
    assert code == 2
    line = _one_line(stderr)
    assert line.startswith("error: --report") and "is a directory" in line


def test_simulate_report_in_a_missing_directory_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "nowhere" / "r.html"
    code, stderr = _run("simulate", str(EXAMPLES / "flex-first.yaml"), "--report", str(target), "--quiet")
    assert code == 2 and "does not exist" in _one_line(stderr)


def test_validate_refuses_duplicate_keys_as_the_api_server_does(tmp_path: Path) -> None:
    path = tmp_path / "pool.yaml"
    path.write_text(NODECLASS.replace("  role: node-role\n", "  role: node-role\n  role: other-role\n"))
    code, stderr = _run("validate", str(path))
    assert code == 2
    assert f'{path}#1: spec: duplicate field "role" (again at line 6)' in stderr


def test_validate_refuses_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing yet\n")
    code, stderr = _run("validate", str(path))
    assert code == 2 and f"{path}: the file holds no document" in stderr


def test_validate_refuses_a_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "pool.yaml"
    path.write_bytes(b"\xff\xfe\x00binary")
    code, stderr = _run("validate", str(path))
    assert code == 2 and f"{path}: not a text file" in stderr
