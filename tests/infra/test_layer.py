"""The layer built without Docker: right platform, runtime-provided packages left out, idempotent."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from infra.functions import FUNCTIONS_DIR
from infra.layer import (
    LAMBDA_UNZIPPED_LIMIT,
    LayerBuild,
    build_layer,
    layer_size_bytes,
    requirements_hash,
    runtime_requirements,
)

from infra import layer as layer_module

AARCH64 = 183  # ELF e_machine


def test_requirements_come_from_pyproject_without_cli_or_boto(layer: LayerBuild) -> None:
    names = {r.split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip() for r in runtime_requirements()}
    assert {"pydantic", "pyyaml", "aws-lambda-powertools", "lightkube"} <= names
    assert not names & {"typer", "rich", "boto3", "botocore"}
    assert layer.requirements == tuple(runtime_requirements())


def test_runtime_provided_and_cli_packages_are_not_shipped(layer: LayerBuild) -> None:
    site = layer.path / "python"
    top_level = {p.name.lower() for p in site.iterdir()}
    for absent in ("boto3", "botocore", "s3transfer", "urllib3", "dateutil", "six.py", "typer", "rich", "moto", "bin"):
        assert absent not in top_level, absent
    shipped = {d.split("==")[0] for d in layer.distributions}
    assert {"pydantic", "pydantic-core", "pyyaml", "aws-lambda-powertools", "aws-xray-sdk", "lightkube", "jmespath"} <= shipped
    assert not shipped & {"boto3", "botocore", "s3transfer", "urllib3", "python-dateutil", "six"}


def test_native_extensions_are_built_for_arm64_cpython_312(layer: LayerBuild) -> None:
    extensions = list((layer.path / "python").rglob("*.so"))
    assert any("pydantic_core" in str(p) for p in extensions)
    for extension in extensions:
        assert "cpython-312-aarch64" in extension.name or "abi3" in extension.name, extension.name
        header = extension.read_bytes()[:20]
        assert header[:4] == b"\x7fELF"
        assert int.from_bytes(header[18:20], "little") == AARCH64, extension


def test_carpool_package_is_copied_without_local_only_parts(layer: LayerBuild) -> None:
    copy = layer.path / "python" / "carpool"
    source = layer_module.PACKAGE_SOURCE
    assert (copy / "__init__.py").read_bytes() == (source / "__init__.py").read_bytes()
    assert (copy / "catalog" / "data").is_dir()
    assert sorted(p.name for p in (copy / "catalog" / "data").iterdir()) == sorted(
        p.name for p in (source / "catalog" / "data").iterdir()
    )
    assert not list(copy.rglob("__pycache__")) and not list(copy.rglob("*.pyc"))
    for name in layer.excluded_subpackages:
        assert not (copy / name).exists()
    assert set(layer.excluded_subpackages) <= {"cli", "sim"}


def test_second_build_skips_pip(layer: LayerBuild) -> None:
    again = build_layer(log=lambda _message: None)
    assert again.pip_ran is False
    assert again.distributions == layer.distributions


def test_package_copy_is_rewritten_only_when_the_source_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(Uses a stand-in package: the real one is being edited while tests run.)"""
    source = tmp_path / "src" / "carpool"
    (source / "catalog" / "data").mkdir(parents=True)
    (source / "__pycache__").mkdir()
    (source / "__init__.py").write_text("VERSION = 1\n")
    (source / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"junk")
    (source / "catalog" / "data" / "prices.json").write_text("{}")
    monkeypatch.setattr(layer_module, "PACKAGE_SOURCE", source)
    site, build, stamp = tmp_path / "layer" / "python", tmp_path / "build", tmp_path / "build" / "stamp"
    build.mkdir()

    assert layer_module._refresh_package(site, build, stamp)[0] is True
    assert (site / "carpool" / "catalog" / "data" / "prices.json").is_file()
    assert not (site / "carpool" / "__pycache__").exists()
    assert layer_module._refresh_package(site, build, stamp)[0] is False
    (source / "__init__.py").write_text("VERSION = 2\n")
    assert layer_module._refresh_package(site, build, stamp)[0] is True
    assert (site / "carpool" / "__init__.py").read_text() == "VERSION = 2\n"
    assert sorted(p.name for p in build.iterdir()) == ["stamp"]  # no staging leftovers


def test_size_is_reported_and_within_lambda_limits(layer: LayerBuild) -> None:
    size = layer_size_bytes(layer.path)
    total = sum(p.stat().st_size for p in layer.path.rglob("*") if p.is_file() and not p.is_symlink())
    assert size == total  # nothing of boto3's to exclude: it is not there
    assert 0 < size < LAMBDA_UNZIPPED_LIMIT
    print(f"layer size: {size / 1024 / 1024:.1f} MiB")


def test_size_of_a_missing_layer_says_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="make layer"):
        layer_size_bytes(tmp_path / "nothing")


def test_requirements_hash_changes_with_the_requirements() -> None:
    assert requirements_hash(["a", "b"]) == requirements_hash(["b", "a"])
    assert requirements_hash(["a"]) != requirements_hash(["a>=2"])


def imports(code: str, package: list[str]) -> set[str]:
    return set(layer_module._runtime_imports(ast.parse(code), package))


def test_import_scan_resolves_relative_imports_and_skips_type_checking() -> None:
    package = ["carpool", "app"]
    assert "carpool.cli" in imports("from .. import cli", package)
    assert "carpool.sim.runner" in imports("from ..sim import runner", package)
    assert "carpool.cli" in imports("import carpool.cli", package)
    guarded = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from carpool.sim import x\n"
    assert not any(m.startswith("carpool.sim") for m in imports(guarded, package))


def test_a_runtime_import_of_a_local_only_package_keeps_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "carpool"
    (package / "cli").mkdir(parents=True)
    (package / "sim").mkdir()
    (package / "__init__.py").write_text("")
    (package / "cli" / "__init__.py").write_text("import typer\n")
    (package / "sim" / "__init__.py").write_text("")
    (package / "app.py").write_text("from .sim import runner\n")
    monkeypatch.setattr(layer_module, "PACKAGE_SOURCE", package)
    assert layer_module._imported_by_runtime_code("sim") is True
    assert layer_module._imported_by_runtime_code("cli") is False


def test_every_import_of_shipped_code_is_in_the_layer_or_the_runtime(layer: LayerBuild) -> None:
    """A handler importing a CLI-only or test-only package would pass locally and fail in Lambda."""
    site = layer.path / "python"
    provided = {p.name.split(".")[0].split("-")[0] for p in site.iterdir()}
    allowed = set(sys.stdlib_module_names) | provided | {"boto3", "botocore", "s3transfer", "__future__"}
    shipped = [(f, ["carpool", *f.relative_to(site / "carpool").parent.parts]) for f in (site / "carpool").rglob("*.py")]
    shipped += [(f, []) for f in FUNCTIONS_DIR.glob("*/handler.py")]
    missing: dict[str, set[str]] = {}
    for file, package in shipped:
        try:
            tree = ast.parse(file.read_text())
        except SyntaxError:  # pragma: no cover - someone is mid-edit
            continue
        for module in layer_module._runtime_imports(tree, package):
            top = module.split(".")[0]
            if top and top not in allowed:
                missing.setdefault(top, set()).add(str(file))
    assert missing == {}
