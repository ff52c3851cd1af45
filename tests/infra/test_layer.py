"""The layer built from source without Docker: locked, reproducible, hashed by its inputs, right platform."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from bench.lambda_package import LAYER_TARGET_BYTES
from infra.functions import FUNCTIONS_DIR
from infra.layer import (
    LAMBDA_UNZIPPED_LIMIT,
    LAYER_PYTHON_ENV,
    LOCK_FILE,
    PACKAGE_SOURCE,
    PROVIDED_BY_RUNTIME,
    REPO_ROOT,
    TARGET_MARKERS,
    LayerBuild,
    LayerError,
    LayerPython,
    build_layer,
    default_wheel_cache,
    find_layer_python,
    layer_digest,
    layer_size_bytes,
    read_lock,
    runtime_requirements,
)
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

from infra import layer as layer_module

AARCH64 = 183  # ELF e_machine


def copy_library(destination: Path) -> Path:
    """A snapshot of the library (other work may edit the real one while the tests run)."""
    target = destination / "carpool"
    shutil.copytree(PACKAGE_SOURCE, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return target


@pytest.fixture
def library(tmp_path: Path) -> Path:
    return copy_library(tmp_path / "src")


# --- the lock -------------------------------------------------------------------------------------


def test_lock_pins_every_runtime_requirement_of_pyproject() -> None:
    locked = {r.name: r for r in read_lock()}
    for raw in runtime_requirements():
        requirement = Requirement(raw)
        pin = locked.get(canonicalize_name(requirement.name))
        assert pin is not None, f"{raw} is not in {LOCK_FILE.name}: run `python -m infra.layer lock`"
        assert requirement.specifier.contains(pin.version, prereleases=True), (raw, pin.version)
    assert {"pydantic", "pydantic-core", "pyyaml", "aws-lambda-powertools", "aws-xray-sdk", "lightkube"} <= set(locked)
    assert not set(locked) & {"boto3", "botocore", "s3transfer", "urllib3", "python-dateutil", "six", "typer", "rich"}
    for pin in locked.values():
        assert pin.hashes and all(len(h) == 64 for h in pin.hashes), pin


def test_lock_is_closed_under_the_targets_dependencies(layer: LayerBuild) -> None:
    """The build installs with --no-deps: a dependency missing from the lock would be missing in Lambda.

    Walks Requires-Dist from pyproject's runtime requirements (extras included) with the target's markers.
    """
    locked = {r.name: r for r in read_lock()}
    by_hash = {layer_module._sha256(p): p for p in default_wheel_cache().glob("*.whl")}
    wheels = {name: next(by_hash[h] for h in pin.hashes if h in by_hash) for name, pin in locked.items()}
    queue = [Requirement(raw) for raw in runtime_requirements()]
    reached: set[tuple[str, frozenset[str]]] = set()
    while queue:
        requirement = queue.pop()
        name = canonicalize_name(requirement.name)
        if name in PROVIDED_BY_RUNTIME or (name, frozenset(requirement.extras)) in reached:
            continue
        reached.add((name, frozenset(requirement.extras)))
        assert name in locked, f"{requirement} is needed but not pinned in {LOCK_FILE.name}"
        assert requirement.specifier.contains(locked[name].version, prereleases=True), (str(requirement), locked[name])
        assert str(parse_wheel_filename(wheels[name].name)[1]) == locked[name].version
        for raw in layer_module._requires_dist(wheels[name]):
            dependency = Requirement(raw)
            if dependency.marker is None or any(
                dependency.marker.evaluate({**TARGET_MARKERS, "extra": e}) for e in (*requirement.extras, "")
            ):
                queue.append(dependency)
    assert {name for name, _extras in reached} == set(locked)  # and nothing pinned that nothing needs


def test_read_lock_rejects_a_pin_without_hash(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    lock.write_text("pydantic==2.0 \\\n    --hash=sha256:" + "a" * 64 + "\npyyaml==6.0\n")
    with pytest.raises(LayerError, match="pyyaml==6.0"):
        read_lock(lock)
    lock.write_text("# nothing\n")
    with pytest.raises(LayerError, match="pins nothing"):
        read_lock(lock)


# --- the digest (the asset hash) ------------------------------------------------------------------


def test_editing_a_library_file_changes_the_digest(library: Path) -> None:
    before = layer_digest(library, LOCK_FILE)
    module = library / "labels.py"
    original = module.read_bytes()
    module.write_bytes(original + b"\n# changed\n")
    edited = layer_digest(library, LOCK_FILE)
    assert edited != before
    module.write_bytes(original)
    assert layer_digest(library, LOCK_FILE) == before
    (library / "sim" / "extra.py").write_text("X = 1\n")  # not shipped, still an input: always a new layer
    assert layer_digest(library, LOCK_FILE) not in {before, edited}


def test_renaming_a_file_changes_the_digest(library: Path) -> None:
    before = layer_digest(library, LOCK_FILE)
    (library / "labels.py").rename(library / "labels2.py")
    assert layer_digest(library, LOCK_FILE) != before


def test_bytecode_and_mtimes_do_not_change_the_digest(library: Path) -> None:
    before = layer_digest(library, LOCK_FILE)
    cache = library / "__pycache__"
    cache.mkdir(exist_ok=True)
    (cache / "labels.cpython-311.pyc").write_bytes(b"\x00junk")
    (library / "stray.pyc").write_bytes(b"junk")
    os.utime(library / "labels.py", (1_000_000, 1_000_000))
    assert layer_digest(library, LOCK_FILE) == before


def test_changing_the_lock_changes_the_digest(library: Path, tmp_path: Path) -> None:
    lock = tmp_path / "layer-requirements.lock"
    lock.write_bytes(LOCK_FILE.read_bytes())
    before = layer_digest(library, lock)
    lock.write_text(lock.read_text().replace("pyyaml==6.0.3", "pyyaml==6.0.2"))
    assert layer_digest(library, lock) != before


def test_two_checkouts_in_different_directories_agree(tmp_path: Path) -> None:
    """Each copy computes the digest in its own interpreter, from its own infra/layer.py."""
    snapshot_infra = tmp_path / "snapshot" / "infra"
    shutil.copytree(REPO_ROOT / "infra", snapshot_infra, ignore=shutil.ignore_patterns("__pycache__"))
    snapshot_library = copy_library(tmp_path / "snapshot")
    digests = []
    for root in (tmp_path / "a" / "carpool", tmp_path / "b" / "deeper" / "checkout"):
        shutil.copytree(snapshot_infra, root / "infra")
        shutil.copytree(snapshot_library, root / "shared" / "carpool")
        os.utime(root / "shared" / "carpool" / "labels.py", (2_000_000_000, 2_000_000_000))
        result = subprocess.run(
            [sys.executable, "-c", "from infra.layer import layer_digest, REPO_ROOT; print(REPO_ROOT, layer_digest())"],
            cwd=root, env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True, check=True,
        )  # fmt: skip
        where, digest = result.stdout.split()
        assert Path(where) == root  # each copy hashed its own files
        digests.append(digest)
    assert digests[0] == digests[1]


# --- the build ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_two_builds_from_the_same_inputs_are_byte_identical(
    layer: LayerBuild, layer_source: Path, tmp_path: Path
) -> None:
    """A fresh build from the inputs of the session's layer equals it byte for byte, and is then cached.

    The session's layer is the other build: made by this session or an earlier one (another process,
    maybe another checkout), which makes the comparison stricter, not looser. What ships of the library
    given, rather than the one next to infra/, is checked by the build without bytecode below.
    """
    fresh = build_layer(cache_dir=tmp_path / "fresh", package_source=layer_source, log=lambda _m: None)
    assert fresh.built and fresh.path == tmp_path / "fresh" / f"layer-{fresh.digest}"
    assert fresh.digest == layer.digest == layer_digest(layer_source, LOCK_FILE)
    tree = snapshot(fresh.path)
    assert any(path.startswith("python/pydantic_core/") for path in tree)
    assert tree == snapshot(layer.path)
    assert (fresh.size_bytes, fresh.excluded_subpackages) == (layer.size_bytes, layer.excluded_subpackages)
    # a synth of the same inputs copies the cached layer into CDK's asset folder instead of rebuilding
    asset = tmp_path / "cdk.out" / "asset.x-building"
    asset.mkdir(parents=True)
    again = build_layer(asset, cache_dir=tmp_path / "fresh", package_source=layer_source, log=lambda _m: None)
    assert again.built is False
    assert snapshot(asset) == tree
    assert (again.size_bytes, again.excluded_subpackages) == (fresh.size_bytes, fresh.excluded_subpackages)


def test_a_cached_layer_without_its_facts_gets_them_back(
    layer: LayerBuild, layer_source: Path, tmp_path: Path
) -> None:
    """Size and left-out subpackages are kept beside a cached layer; lost or unreadable, they are found again."""
    cache = tmp_path / "cache"
    cached = cache / layer.path.name
    shutil.copytree(layer.path, cached, symlinks=True, copy_function=os.link)  # read only here
    facts = cached.with_name(cached.name + ".json")
    older = [cache / f"layer-old{age}" for age in range(layer_module.KEEP_CACHED_LAYERS + 2)]
    for age, folder in enumerate(older):
        folder.mkdir()
        os.utime(folder, (1_000_000 + age, 1_000_000 + age))
    size = layer_size_bytes(cached)
    for damaged in (None, "{not json", '{"size_bytes": 1}'):
        if damaged is None:
            facts.unlink(missing_ok=True)
        else:
            facts.write_text(damaged)
        found = build_layer(cache_dir=cache, package_source=layer_source, log=lambda _m: None)
        assert not found.built and found.path == cached
        assert found.size_bytes == size == layer.size_bytes
        assert found.excluded_subpackages == layer.excluded_subpackages
        assert found.excluded_subpackages == layer_module.excluded_subpackages(layer_source)
        assert json.loads(facts.read_text()) == {
            "size_bytes": layer.size_bytes, "excluded_subpackages": list(layer.excluded_subpackages)
        }
    assert all(folder.is_dir() for folder in older)  # only a build makes the cache grow, so only a build prunes it


def snapshot(root: Path) -> dict[str, tuple[bytes, int, int]]:
    """Relative path -> (content, mode, mtime) of every file and folder below ``root``."""
    entries: dict[str, tuple[bytes, int, int]] = {}
    for path in sorted(root.rglob("*")):
        stat = path.lstat()
        content = path.read_bytes() if path.is_file() else b""
        entries[path.relative_to(root).as_posix()] = (content, stat.st_mode, int(stat.st_mtime))
    return entries


def test_the_built_layer_has_no_machine_specific_content(layer: LayerBuild) -> None:
    """Bytecode names its source as Lambda mounts it (/opt/python/...), never the build folder."""
    site = layer.path / "python"
    build_paths = [str(REPO_ROOT).encode(), str(layer.path.parent).encode(), b"/.layer-"]  # .layer-: staging
    for compiled in site.rglob("*.pyc"):
        content = compiled.read_bytes()
        assert not any(path in content for path in build_paths), compiled
    if layer.bytecode is not None:
        assert b"/opt/python/carpool/labels.py" in (site / "carpool/__pycache__/labels.cpython-312.pyc").read_bytes()
    assert not list(site.glob("*.dist-info/direct_url.json"))
    for record in site.glob("*.dist-info/RECORD"):
        for line in record.read_text().splitlines():
            assert not line.startswith(("/", "../")), f"{record.parent.name}: {line}"
    for path in layer.path.rglob("*"):
        assert int(path.lstat().st_mtime) == layer_module.FIXED_MTIME, path


def test_cache_keeps_only_the_most_recent_layers(tmp_path: Path) -> None:
    for age, name in enumerate(("layer-a", "layer-b", "layer-c", "layer-d", "layer-e")):
        (tmp_path / name).mkdir()
        (tmp_path / f"{name}.json").write_text("{}")
        os.utime(tmp_path / name, (1_000_000 + age, 1_000_000 + age))
    layer_module._prune(tmp_path, keep=tmp_path / "layer-a")
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["layer-a", "layer-c", "layer-d", "layer-e"]
    assert sorted(p.stem for p in tmp_path.glob("*.json")) == ["layer-a", "layer-c", "layer-d", "layer-e"]


# --- what the layer contains ----------------------------------------------------------------------


def test_layer_holds_the_locked_distributions_and_not_the_runtimes(layer: LayerBuild) -> None:
    site = layer.path / "python"
    installed = set()
    for folder in site.glob("*.dist-info"):
        name, version = folder.name.removesuffix(".dist-info").rsplit("-", 1)
        installed.add(f"{canonicalize_name(name)}=={version}")
    assert installed == {r.pin for r in read_lock()} == set(layer.distributions)
    top_level = {p.name.lower() for p in site.iterdir()}
    for absent in ("boto3", "botocore", "s3transfer", "urllib3", "dateutil", "six.py", "typer", "rich", "moto", "bin"):
        assert absent not in top_level, absent


def test_native_extensions_are_built_for_arm64_cpython_312(layer: LayerBuild) -> None:
    extensions = list((layer.path / "python").rglob("*.so"))
    assert any("pydantic_core" in str(p) for p in extensions)
    for extension in extensions:
        assert "cpython-312-aarch64" in extension.name or "abi3" in extension.name, extension.name
        header = extension.read_bytes()[:20]
        assert header[:4] == b"\x7fELF"
        assert int.from_bytes(header[18:20], "little") == AARCH64, extension


def test_carpool_package_is_copied_without_local_only_parts(layer: LayerBuild, layer_source: Path) -> None:
    copy = layer.path / "python" / "carpool"
    source = layer_source  # what the layer was built from (the checkout may have been edited since)
    assert (copy / "__init__.py").read_bytes() == (source / "__init__.py").read_bytes()
    assert (copy / "catalog" / "data").is_dir()
    assert sorted(p.name for p in (copy / "catalog" / "data").iterdir()) == sorted(
        p.name for p in (source / "catalog" / "data").iterdir()
    )
    assert not (copy / "__main__.py").exists()
    for name in layer.excluded_subpackages:
        assert not (copy / name).exists()
    assert set(layer.excluded_subpackages) <= {"cli", "sim"}


def test_size_is_reported_and_within_the_budget(layer: LayerBuild) -> None:
    size = layer_size_bytes(layer.path)
    total = sum(p.stat().st_size for p in layer.path.rglob("*") if p.is_file() and not p.is_symlink())
    assert size == total == layer.size_bytes  # nothing of boto3's to exclude: it is not there
    assert 0 < size <= LAYER_TARGET_BYTES < LAMBDA_UNZIPPED_LIMIT
    print(f"layer size: {size / 1024 / 1024:.1f} MiB")


def test_size_of_a_missing_layer_says_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="python -m infra.layer"):
        layer_size_bytes(tmp_path / "nothing")


def test_wheels_are_downloaded_only_when_the_cache_lacks_a_locked_one(
    layer: LayerBuild, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache is trusted by hash, not by file name: a same-named impostor counts as missing."""
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(layer_module, "_pip", lambda *args, failure: calls.append(args))
    cache = tmp_path / "wheels"
    cache.mkdir()
    for wheel in default_wheel_cache().glob("*.whl"):  # the session's build fetched every locked wheel
        shutil.copy2(wheel, cache)
    locked = read_lock()
    layer_module.fetch_wheels(locked, LOCK_FILE, cache)
    assert calls == []
    real = next(p for p in cache.glob("*.whl") if layer_module._sha256(p) in locked[0].hashes)
    real.unlink()
    with zipfile.ZipFile(real, "w") as archive:
        archive.writestr("evil.py", "print('not the locked wheel')\n")
    layer_module.fetch_wheels(locked, LOCK_FILE, cache)
    assert [c[0] for c in calls] == ["download"] and "--require-hashes" in calls[0]


# --- imports --------------------------------------------------------------------------------------


def imports(code: str, package: list[str]) -> set[str]:
    return set(layer_module._runtime_imports(ast.parse(code), package))


def test_import_scan_resolves_relative_imports_and_skips_type_checking() -> None:
    package = ["carpool", "app"]
    assert "carpool.cli" in imports("from .. import cli", package)
    assert "carpool.sim.runner" in imports("from ..sim import runner", package)
    assert "carpool.cli" in imports("import carpool.cli", package)
    guarded = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from carpool.sim import x\n"
    assert not any(m.startswith("carpool.sim") for m in imports(guarded, package))


def test_a_runtime_import_of_a_local_only_package_keeps_it(tmp_path: Path) -> None:
    package = tmp_path / "carpool"
    (package / "cli").mkdir(parents=True)
    (package / "sim").mkdir()
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text("from carpool.cli import main\n")  # never shipped: does not count
    (package / "cli" / "__init__.py").write_text("import typer\n")
    (package / "sim" / "__init__.py").write_text("")
    (package / "app.py").write_text("from .sim import runner\n")
    assert layer_module.excluded_subpackages(package) == ("cli",)


def test_every_spelling_of_an_import_is_found_and_a_mere_mention_is_not(tmp_path: Path) -> None:
    """Only modules naming ``cli``/``sim`` as a word are parsed: each way to import one still names it."""
    for code, kept in [
        ("from carpool import sim\n", "sim"),
        ("import carpool.cli.main\n", "cli"),
        ("from . import cli as c\n", "cli"),
        ("from .sim.runner import SimRunner\n", "sim"),
        ('"""a simulation, via the cli-like simulator"""\nsimulate = cli_name = 1\n', None),
    ]:
        package = tmp_path / str(len(list(tmp_path.iterdir()))) / "carpool"
        for name in ("cli", "sim"):
            (package / name).mkdir(parents=True)
            (package / name / "__init__.py").write_text("")
        (package / "__init__.py").write_text("")
        (package / "app.py").write_text(code)
        expected = tuple(name for name in ("cli", "sim") if name != kept)
        assert layer_module.excluded_subpackages(package) == expected, code


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


# --- bytecode -------------------------------------------------------------------------------------

#: PEP 552: flags bit 0 = hash-based, bit 1 = check_source; unchecked-hash sets bit 0 only.
UNCHECKED_HASH = 0b01


@pytest.fixture(scope="session")
def python312() -> str:
    """A CPython 3.12 (the Lambda runtime's version) to check the bytecode with, found as the build does."""
    python = find_layer_python()
    if python is None:
        pytest.skip(f"no CPython 3.12 interpreter here (set {LAYER_PYTHON_ENV} or put python3.12 on PATH)")
    return python.executable


def run312(python312: str, code: str, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python312, "-I", "-B", "-c", code, *args], capture_output=True, text=True, check=True, **kwargs
    )  # fmt: skip


def test_every_module_has_unchecked_hash_bytecode_for_cpython_312(layer: LayerBuild, python312: str) -> None:
    """Each pyc: 3.12's magic (asked of a 3.12 interpreter), unchecked-hash flags, the hash of the shipped source."""
    site = layer.path / "python"
    assert layer.bytecode is not None and layer.bytecode.cache_tag == "cpython-312"
    magic = bytes.fromhex(run312(python312, "import importlib.util; print(importlib.util.MAGIC_NUMBER.hex())").stdout)
    sources = sorted(site.rglob("*.py"))
    assert len(sources) > 500
    expected_pycs = set()
    for source in sources:
        pyc = source.parent / "__pycache__" / f"{source.stem}.cpython-312.pyc"
        expected_pycs.add(pyc)
        header = pyc.read_bytes()[:16]
        assert header[:4] == magic, pyc
        assert int.from_bytes(header[4:8], "little") == UNCHECKED_HASH, pyc
    assert set(site.rglob("*.pyc")) == expected_pycs  # no other version's bytecode, no pyc without a source
    # the source hash in each header is the one 3.12 computes for the file that ships beside it
    mismatched = run312(python312, (
        "import sys, importlib.util as u\n"
        "for path in sys.stdin.read().split():\n"
        "    pyc = u.cache_from_source(path)\n"
        "    if open(pyc, 'rb').read()[8:16] != u.source_hash(open(path, 'rb').read()): print(path)\n"
    ), input="\n".join(map(str, sources))).stdout  # fmt: skip
    assert mismatched == ""


def test_every_python_file_of_the_layer_is_an_importable_module(layer: LayerBuild) -> None:
    """Why the build compiles every .py: none is a script or template Python would never import."""
    site = layer.path / "python"
    for source in site.rglob("*.py"):
        parts = source.relative_to(site).with_suffix("").parts
        assert all(part.isidentifier() for part in parts), source


def test_the_runtime_loads_the_bytecode_without_reading_the_source(
    layer: LayerBuild, python312: str, tmp_path: Path
) -> None:
    """A copy whose sources raise if executed still imports: 3.12 ran the shipped pyc, unchecked.

    Pure-Python packages only: the layer's native extensions are arm64 and this machine may not be.
    """
    copy = tmp_path / "python"
    for package in ("jmespath", "typing_extensions.py", "annotated_types"):
        source = layer.path / "python" / package
        if source.is_dir():
            shutil.copytree(source, copy / package)
        else:
            copy.mkdir(exist_ok=True)
            shutil.copy2(source, copy / package)
            (copy / "__pycache__").mkdir(exist_ok=True)
            shutil.copy2(source.parent / "__pycache__" / f"{source.stem}.cpython-312.pyc", copy / "__pycache__")
    for source in copy.rglob("*.py"):
        source.write_text("raise RuntimeError('the source ran, not the bytecode')\n")
    probe = (
        "import sys, os; sys.path.insert(0, sys.argv[1]);"
        "import jmespath, typing_extensions, annotated_types;"
        "assert jmespath.search('a.b', {'a': {'b': 7}}) == 7;"
        "print(jmespath.__cached__, os.path.exists(jmespath.__cached__), typing_extensions.__cached__)"
    )
    cached, exists, te_cached = run312(python312, probe, str(copy)).stdout.split()
    assert cached == str(copy / "jmespath" / "__pycache__" / "__init__.cpython-312.pyc") and exists == "True"
    assert te_cached.endswith("__pycache__/typing_extensions.cpython-312.pyc")


def test_the_digest_says_whether_and_for_which_python_the_bytecode_was_compiled(library: Path) -> None:
    py312 = LayerPython(executable="/usr/bin/python3.12", version="3.12", magic="cb0d0d0a")
    elsewhere = LayerPython(executable="/opt/other/bin/python3.12", version="3.12", magic="cb0d0d0a")
    py313 = LayerPython(executable="/usr/bin/python3.13", version="3.13", magic="f30d0d0a")
    with_bytecode = layer_digest(library, LOCK_FILE, py312)
    assert layer_digest(library, LOCK_FILE, elsewhere) == with_bytecode  # where it is installed does not matter
    assert layer_digest(library, LOCK_FILE, None) != with_bytecode
    assert layer_digest(library, LOCK_FILE, py313) not in {with_bytecode, layer_digest(library, LOCK_FILE, None)}


def test_a_configured_interpreter_that_is_not_cpython_312_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if sys.version_info[:2] == (3, 12):  # pragma: no cover - the venv is another version here
        pytest.skip("this interpreter is 3.12, the one the check accepts")
    for configured in (sys.executable, str(tmp_path / "missing-python")):
        monkeypatch.setenv(LAYER_PYTHON_ENV, configured)
        with pytest.raises(LayerError, match=LAYER_PYTHON_ENV):
            find_layer_python()
    assert layer_module.probe_python(sys.executable) is None


def test_a_configured_cpython_312_is_used(python312: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LAYER_PYTHON_ENV, python312)
    python = find_layer_python()
    assert python is not None and python.executable == python312 and python.version == "3.12"


@pytest.mark.slow
def test_without_a_312_interpreter_the_layer_is_built_without_bytecode_and_says_so(
    library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Also: the build ships the library it is given, not the one next to infra/."""
    labels = library / "labels.py"
    labels.write_text(labels.read_text() + "\nMARKER = 'edited'\n")
    monkeypatch.setattr(layer_module, "find_layer_python", lambda: None)
    build = build_layer(cache_dir=tmp_path, package_source=library, log=lambda _m: None)
    assert build.built and build.bytecode is None
    assert b"MARKER = 'edited'" in (build.path / "python" / "carpool" / "labels.py").read_bytes()
    assert not list(build.path.rglob("*.pyc")) and not list(build.path.rglob("__pycache__"))
    assert build.digest == layer_digest(library, LOCK_FILE, None)
    warning = capsys.readouterr().err
    assert "WITHOUT bytecode" in warning and LAYER_PYTHON_ENV in warning and "python3.12" in warning
