"""Bad inputs to the command line: one line on stderr naming the file (and field), exit 2, no traceback.

The `carpool` app is run as a user runs it (typer's CliRunner on the real command group); for
`simulate --report DIR` the run must be refused before the simulation starts, which the test shows by
giving a scenario whose run would take far longer than the test's patience (the check comes first).
"""

from __future__ import annotations

from pathlib import Path
from typing import get_args

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


def _doc(text: str) -> dict[str, object]:
    import yaml

    return dict(yaml.safe_load(text))


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


# -- carpool simulate: a scenario that cannot be run is refused when read, one line a problem -----------
POOL = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "general"},
    "spec": {"template": {"spec": {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}],
    }}},
}
WEB = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
             "template": {"metadata": {"labels": {"app": "web"}},
                          "spec": {"containers": [{"name": "web", "image": "nginx",
                                                   "resources": {"requests": {"cpu": "1"}}}]}}},
}


def _scenario(tmp_path: Path, **fields: object) -> Path:
    """A scenario that runs (for an hour of simulated time) with `fields` replaced."""
    import yaml

    doc: dict[str, object] = {
        "cluster": {"name": "demo"},
        "manifests": [POOL, _doc(NODECLASS)],
        "workload": [{"at": 0, "apply": WEB}],
        "duration": 3600,
    }
    doc.update(fields)
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _simulate_refuses(path: Path, *extra: str) -> str:
    code, stderr = _run("simulate", str(path), "--quiet", *extra)
    assert code == 2, stderr
    line = _one_line(stderr)
    assert line.startswith("error: ")
    return line


def test_simulate_report_that_cannot_be_opened_is_refused_before_the_run(tmp_path: Path) -> None:
    if not Path("/proc").is_dir():
        pytest.skip("needs /proc, where no file can be made")
    line = _simulate_refuses(_scenario(tmp_path), "--report", "/proc/carpool-report.html")
    assert line.startswith("error: --report /proc/carpool-report.html: not writable")


def test_simulate_missing_manifest_file_is_one_line(tmp_path: Path) -> None:
    path = _scenario(tmp_path, manifests=["pools.yaml", _doc(NODECLASS)])
    line = _simulate_refuses(path)
    assert f"{path}: manifests[0]: manifest file 'pools.yaml' not found" in line


def test_simulate_inline_nodepool_with_a_bad_quantity_is_one_line(tmp_path: Path) -> None:
    pool = {**POOL, "spec": {**POOL["spec"], "limits": {"cpu": "abc"}}}  # type: ignore[dict-item]
    line = _simulate_refuses(_scenario(tmp_path, manifests=[pool, _doc(NODECLASS)]))
    assert "manifests[0]#1 (NodePool general): spec.limits[cpu]: Invalid value: \"abc\"" in line


def test_simulate_file_that_is_not_yaml_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text("cluster: {name: demo\nmanifests: [\n")
    line = _simulate_refuses(path)
    assert f"{path}: not valid YAML" in line and "at line 2" in line


def test_simulate_given_a_manifest_says_it_is_one(tmp_path: Path) -> None:
    line = _simulate_refuses(EXAMPLES / "karpenter" / "default.yaml")
    assert "a Kubernetes manifest (NodePool, EC2NodeClass), not a scenario" in line
    assert "carpool validate" in line and "manifests:" in line


def test_simulate_deployment_field_typo_is_refused_with_its_path(tmp_path: Path) -> None:
    web = {**WEB, "spec": {**{k: v for k, v in WEB["spec"].items() if k != "replicas"}, "replica": 20}}  # type: ignore[attr-defined]
    line = _simulate_refuses(_scenario(tmp_path, workload=[{"at": 0, "apply": web}]))
    assert "workload[0].apply#1 (Deployment web): spec.replica: unknown field 'replica'" in line
    assert "did you mean 'replicas'" in line


def test_simulate_repeated_scenario_key_is_refused(tmp_path: Path) -> None:
    path = _scenario(tmp_path)
    path.write_text(path.read_text() + "duration: 60\n")
    assert f"{path}: <root>: duplicate field 'duration'" in _simulate_refuses(path)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"workload": [{"at": 0, "apply": WEB}, {"at": 60, "scale": {"deployment": "api", "replicas": 2}}]},
         "workload[1].scale.deployment: no workload default/api is applied before 60s"),
        ({"workload": [{"at": 60, "delete": {"nodepool": "genral"}}]},
         "workload[0].delete.nodepool: no NodePool 'genral' is applied before 60s (applied: general)"),
        ({"nodeGroups": [{"name": "ng", "instanceType": "m5.large", "zone": "us-east-1f"}]},
         "nodeGroups[0].zone: 'us-east-1f' is not one of the cluster's zones"),
        ({"cluster": {"name": "demo", "zones": ["us-west-2a"]}},
         "cluster.zones[0]: 'us-west-2a' is not a zone of region us-east-1"),
        ({"nodeGroups": [{"name": "ng", "instanceType": "m5.larg"}]},
         "nodeGroups[0].instanceType: 'm5.larg' is not an EC2 instance type (did you mean m5.large"),
        ({"kubelets": [{"nodePool": "genral", "failToJoin": True}]},
         "kubelets[0].nodePool: no NodePool 'genral' in the scenario's manifests (defined: general)"),
        ({"truth": {"memoryOverheadPercent": {"al2-023": 6.0}}},
         "truth.memoryOverheadPercent: 'al2-023' is not an AMI family a node boots as"),
        ({"manifests": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                         "spec": {"containers": [{"name": "c", "image": "nginx"}]}}]},
         "manifests: no NodePool or EC2NodeClass"),
    ],
    ids=["scale-unknown-workload", "delete-unknown-nodepool", "zone-not-the-clusters", "zone-not-in-region", "unknown-instance-type",
         "unknown-nodepool", "unknown-family", "no-config"],
)
def test_simulate_scenario_fields_that_would_do_nothing_or_fail_later(
    tmp_path: Path, fields: dict[str, object], expected: str
) -> None:
    assert expected in _simulate_refuses(_scenario(tmp_path, **fields))


# -- carpool amis --------------------------------------------------------------------------------------
def test_amis_without_ami_file_is_a_usage_error_and_the_help_says_required(nodeclass: Path) -> None:
    code, stderr = _run("amis", "-f", str(nodeclass))
    assert code == 2
    assert _one_line(stderr) == "error: carpool amis: Missing option '--ami-file' (see carpool amis --help)"
    import typer

    group = typer.main.get_command(app)
    command = group.get_command(None, "amis")  # type: ignore[arg-type]
    assert command is not None
    assert next(p for p in command.params if p.name == "ami_file").required


def test_amis_image_file_without_images_says_so(tmp_path: Path, nodeclass: Path) -> None:
    path = tmp_path / "images.yaml"
    path.write_text("images: []\n")
    code, stderr = _run("amis", "-f", str(nodeclass), "--ami-file", str(path))
    assert code == 2
    assert _one_line(stderr) == f"error: --ami-file {path}: the file holds no images (expected a list of {{id, name, arch, ...}})"


def test_amis_cluster_version_must_be_a_minor_version(tmp_path: Path, nodeclass: Path) -> None:
    path = tmp_path / "images.yaml"
    path.write_text("- {id: ami-1, name: x, arch: x86_64, creationDate: '2025-01-01T00:00:00Z'}\n")
    code, stderr = _run("amis", "-f", str(nodeclass), "--ami-file", str(path), "--cluster-version", "banana")
    assert code == 2
    line = _one_line(stderr)
    assert "'--cluster-version'" in line and "'banana' is not a Kubernetes minor version like 1.32" in line


# -- numeric options have a range ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["plan", "-m", str(EXAMPLES / "karpenter" / "default.yaml"), "--max-instance-types", "-5"], "--max-instance-types"),
        (["plan", "-m", str(EXAMPLES / "karpenter" / "default.yaml"), "--max-instance-types", "61"], "--max-instance-types"),
        (["max-pods", "m5.large", "--max-pods", "100000000000"], "--max-pods"),
        (["max-pods", "m5.large", "--pods-per-core", "-1"], "--pods-per-core"),
        (["max-pods", "m5.large", "--reserved-enis", "-1"], "--reserved-enis"),
        (["max-pods", "m5.large", "--reserved-enis", "1e3"], "--reserved-enis"),
    ],
    ids=["max-instance-types-negative", "max-instance-types-over-createfleet", "max-pods-over-int32",
         "pods-per-core-negative", "reserved-enis-negative", "reserved-enis-not-an-int"],
)
def test_numeric_options_out_of_range_are_one_line_exit_2(args: list[str], option: str) -> None:
    code, stderr = _run(*args)
    assert code == 2
    line = _one_line(stderr)
    assert line.startswith(f"error: carpool {args[0]}: Invalid value for '{option}'")


def test_every_numeric_option_of_every_command_has_a_range() -> None:
    import typer

    from carpool.cli import COMMANDS

    group = typer.main.get_command(app)
    unbounded = []
    checked = 0
    for name in COMMANDS:
        command = group.get_command(None, name)  # type: ignore[arg-type]
        assert command is not None
        for param in command.params:
            annotation = param.type_descriptor.annotation  # type: ignore[attr-defined]
            numeric = {int, float} & {annotation, *get_args(annotation)}
            if numeric and (param.min is None or param.max is None):  # type: ignore[attr-defined]
                unbounded.append(f"{name} {param.opts[0]}")
            checked += bool(numeric)
    assert not unbounded, unbounded
    assert checked >= 4  # the walk sees the numeric options there are


def test_plan_unavailable_capacity_type_is_checked() -> None:
    code, stderr = _run("plan", "-m", str(EXAMPLES / "karpenter" / "default.yaml"),
                        "--unavailable", "m5.large:us-east-1a:cheap")
    assert code == 2
    assert "capacity type 'cheap' is not one of spot, on-demand, reserved" in _one_line(stderr)
