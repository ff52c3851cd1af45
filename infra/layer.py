"""Build the one Lambda layer every carpool function uses, without Docker.

Why not ``PythonLayerVersion``: it bundles inside a Docker container and there is no Docker engine in CI
or on most laptops that deploy this. pip can do the same job for a foreign platform as long as every
dependency ships a wheel: ``--platform manylinux2014_aarch64 --implementation cp --python-version 3.12
--only-binary=:all:`` fetches the arm64 CPython 3.12 builds (pydantic-core, PyYAML, wrapt are compiled),
whatever machine runs the build.

What goes in:

* the runtime dependencies of ``pyproject.toml`` minus the CLI-only ones (typer, rich), so the layer
  follows the project's own dependency list instead of a second copy of it;
* minus what the Lambda Python runtime already ships (boto3, botocore, s3transfer) **and** every
  package only they needed (urllib3, python-dateutil, six, ...): aws-xray-sdk declares botocore, so pip
  pulls it in, but a second botocore would shadow the runtime's, cost ~25 MB and drift from it;
* ``shared/carpool`` itself, without ``cli/`` and ``sim/`` (local tools that import typer/rich/moto)
  unless some other module of the package imports them, and without ``__pycache__``.

The slow part (pip) is skipped when a stamp file records the same requirement hash; the carpool copy is
refreshed on every run, but only rewritten when its content changed, so concurrent test workers that
are hashing the asset directory never see it half-written. A file lock serialises builders.

``python -m infra.layer`` builds and prints the unzipped size; ``layer_size_bytes()`` is the number
``bench/`` reports (target: at most 25 MB).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from importlib.metadata import Distribution, distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = REPO_ROOT / "build"
#: The asset folder handed to ``lambda.Code.from_asset``; Lambda mounts its ``python/`` at /opt/python.
LAYER_DIR = BUILD_DIR / "layer"
PACKAGE_SOURCE = REPO_ROOT / "shared" / "carpool"
PYPROJECT = REPO_ROOT / "pyproject.toml"
# Kept outside LAYER_DIR so that bookkeeping never changes the asset hash or ships to Lambda.
STAMP_FILE = BUILD_DIR / "layer.stamp.json"
PACKAGE_STAMP_FILE = BUILD_DIR / "layer.carpool.sha256"
LOCK_FILE = BUILD_DIR / ".layer.lock"

#: Needed by the ``carpool`` CLI only; a Lambda never renders a table.
CLI_ONLY: frozenset[str] = frozenset({"typer", "rich"})
#: Shipped by the Lambda python3.12 runtime itself (/var/runtime).
PROVIDED_BY_RUNTIME: frozenset[str] = frozenset({"boto3", "botocore", "s3transfer"})
#: Subpackages of carpool that run on a laptop only (typer CLI, moto-backed simulation).
LOCAL_ONLY_SUBPACKAGES: tuple[str, ...] = ("cli", "sim")

PYTHON_VERSION = "3.12"
#: manylinux_2_28 is accepted too: Lambda's python3.12 runs on Amazon Linux 2023 (glibc 2.34), and some
#: projects stopped publishing manylinux2014 wheels for aarch64.
PLATFORMS: tuple[str, ...] = ("manylinux2014_aarch64", "manylinux_2_28_aarch64")
#: Environment used to evaluate dependency markers (``; python_version < "3.13"``) for the target.
TARGET_MARKERS: dict[str, str] = {
    "python_version": PYTHON_VERSION,
    "python_full_version": f"{PYTHON_VERSION}.0",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "platform_machine": "aarch64",
    "platform_system": "Linux",
    "sys_platform": "linux",
    "os_name": "posix",
}
#: What Lambda allows for a function and all its layers, unzipped.
LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024
#: carpool's own budget: a small layer keeps cold starts short.
SIZE_TARGET = 25 * 1024 * 1024


class LayerError(RuntimeError):
    """The layer cannot be built (pip failed, a dependency has no wheel, pyproject is unreadable)."""


@dataclass(frozen=True)
class LayerBuild:
    """What a build did, so callers (tests, bench, the CLI) can report it without re-walking the tree."""

    path: Path
    size_bytes: int
    pip_ran: bool
    package_copied: bool
    requirements: tuple[str, ...]
    distributions: tuple[str, ...]
    excluded_subpackages: tuple[str, ...]


def runtime_requirements(pyproject: Path = PYPROJECT) -> list[str]:
    """The project's dependencies that Lambda needs, read from ``pyproject.toml``.

    Reading them (instead of repeating them here) means a dependency added for the library reaches the
    layer without anyone remembering this file.
    """
    try:
        project = tomllib.loads(pyproject.read_text())["project"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as exc:
        raise LayerError(f"cannot read [project].dependencies from {pyproject}: {exc}") from exc
    kept: list[str] = []
    for raw in project.get("dependencies", []):
        name = canonicalize_name(Requirement(raw).name)
        if name in CLI_ONLY or name in PROVIDED_BY_RUNTIME:
            continue
        kept.append(raw)
    return sorted(kept)


def requirements_hash(requirements: Iterable[str]) -> str:
    """Identity of a dependency install: the requirements plus everything that changes pip's answer."""
    payload = json.dumps(
        {
            "requirements": sorted(requirements),
            "python": PYTHON_VERSION,
            "platforms": PLATFORMS,
            "provided": sorted(PROVIDED_BY_RUNTIME),
        },
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def layer_size_bytes(path: Path = LAYER_DIR) -> int:
    """Unzipped size of the built layer in bytes, not counting boto3/botocore (the runtime's).

    Raises ``FileNotFoundError`` naming ``make layer`` when nothing was built yet.
    """
    if not path.is_dir():
        raise FileNotFoundError(f"no layer at {path}: run `make layer` (or `python -m infra.layer`) first")
    site = path / "python"
    total = 0
    for file in _files(path):
        top = file.relative_to(site).parts[0] if file.is_relative_to(site) else ""
        if canonicalize_name(top) in PROVIDED_BY_RUNTIME:
            continue
        total += file.lstat().st_size
    return total


def build_layer(
    *, force: bool = False, build_dir: Path = BUILD_DIR, log: Callable[[str], None] = print
) -> LayerBuild:
    """Build (or refresh) ``build/layer``; idempotent and safe to call from parallel test workers."""
    layer_dir = build_dir / "layer"
    stamp_file = build_dir / STAMP_FILE.name
    package_stamp = build_dir / PACKAGE_STAMP_FILE.name
    build_dir.mkdir(parents=True, exist_ok=True)
    requirements = runtime_requirements()
    key = requirements_hash(requirements)
    with _locked(build_dir / LOCK_FILE.name):
        pip_ran = False
        if force or not _stamp_matches(stamp_file, key, layer_dir):
            log(f"layer: installing {len(requirements)} requirements for cp{PYTHON_VERSION} aarch64 ...")
            kept = _install_dependencies(requirements, build_dir, layer_dir)
            stamp_file.write_text(json.dumps({"hash": key, "requirements": requirements, "distributions": kept}))
            package_stamp.unlink(missing_ok=True)
            pip_ran = True
        else:
            log("layer: dependencies up to date (stamp matches), pip skipped")
        kept = json.loads(stamp_file.read_text())["distributions"]
        copied, excluded = _refresh_package(layer_dir / "python", build_dir, package_stamp)
        size = layer_size_bytes(layer_dir)
    return LayerBuild(
        path=layer_dir,
        size_bytes=size,
        pip_ran=pip_ran,
        package_copied=copied,
        requirements=tuple(requirements),
        distributions=tuple(kept),
        excluded_subpackages=excluded,
    )


# --- dependencies ---------------------------------------------------------------------------------


def _stamp_matches(stamp_file: Path, key: str, layer_dir: Path) -> bool:
    if not (stamp_file.is_file() and (layer_dir / "python").is_dir()):
        return False
    try:
        return json.loads(stamp_file.read_text()).get("hash") == key
    except (OSError, ValueError):
        return False


def _install_dependencies(requirements: list[str], build_dir: Path, layer_dir: Path) -> list[str]:
    """pip-install into a staging folder, prune what the runtime provides, then swap it in."""
    staging = build_dir / "layer.staging"
    shutil.rmtree(staging, ignore_errors=True)
    site = staging / "python"
    command = [
        sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
        "--target", str(site),
        *[arg for platform in PLATFORMS for arg in ("--platform", platform)],
        "--implementation", "cp", "--python-version", PYTHON_VERSION,
        "--only-binary=:all:",
        # .pyc files compiled by the build machine's Python would be for the wrong version anyway.
        "--no-compile",
        *requirements,
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise LayerError(
            "pip could not install the layer dependencies (every one needs an aarch64/cp312 or "
            f"pure-Python wheel):\n{result.stderr.strip() or result.stdout.strip()}"
        )
    kept = _prune_runtime_provided(site, [Requirement(r) for r in requirements])
    shutil.rmtree(site / "bin", ignore_errors=True)  # console scripts are useless in /opt/python
    _swap_in(staging, layer_dir, build_dir)
    return kept


def _prune_runtime_provided(site: Path, roots: list[Requirement]) -> list[str]:
    """Remove every installed distribution not reachable from ``roots`` without passing the runtime's.

    Walks ``Requires-Dist`` with markers and extras evaluated for the target (3.12, aarch64), so an
    optional dependency (``extra == "aws-sdk"``) or a backport for older Pythons does not keep a package.
    Returns the kept distributions as ``name==version``.
    """
    installed: dict[str, Distribution] = {
        canonicalize_name(d.metadata["Name"]): d for d in distributions(path=[str(site)])
    }
    needed: set[str] = set()
    seen: set[tuple[str, frozenset[str]]] = set()
    queue: list[tuple[str, frozenset[str]]] = [(canonicalize_name(r.name), frozenset(r.extras)) for r in roots]
    while queue:
        name, extras = queue.pop()
        if name in PROVIDED_BY_RUNTIME or (name, extras) in seen:
            continue
        seen.add((name, extras))
        needed.add(name)
        dist = installed.get(name)
        if dist is None:
            raise LayerError(f"pip reported success but {name} is not in {site}")
        for raw in dist.requires or []:
            req = Requirement(raw)
            if req.marker is not None and not any(
                req.marker.evaluate({**TARGET_MARKERS, "extra": extra}) for extra in (*extras, "")
            ):
                continue
            queue.append((canonicalize_name(req.name), frozenset(req.extras)))
    for name, dist in installed.items():
        if name not in needed:
            _remove_distribution(site, dist)
    return sorted(f"{name}=={installed[name].version}" for name in needed)


def _remove_distribution(site: Path, dist: Distribution) -> None:
    """Delete the files a distribution's RECORD lists (only inside ``site``), then empty folders."""
    root = site.resolve()
    folders: set[Path] = set()
    for entry in dist.files or []:
        path = (site / entry).resolve()
        if not path.is_relative_to(root) or path == root:
            continue
        folders.update(p for p in path.parents if p.is_relative_to(root) and p != root)
        path.unlink(missing_ok=True)
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            shutil.rmtree(folder / "__pycache__", ignore_errors=True)
            folder.rmdir()  # only succeeds when empty: shared namespace folders survive


# --- the carpool package --------------------------------------------------------------------------


def _refresh_package(site: Path, build_dir: Path, package_stamp: Path) -> tuple[bool, tuple[str, ...]]:
    """Copy ``shared/carpool`` into the layer when its content changed; return (copied, excluded)."""
    excluded = tuple(name for name in LOCAL_ONLY_SUBPACKAGES if not _imported_by_runtime_code(name))
    digest = _tree_digest(PACKAGE_SOURCE, excluded)
    target = site / "carpool"
    if target.is_dir() and package_stamp.is_file() and package_stamp.read_text() == digest:
        return False, excluded
    staging = build_dir / "carpool.staging"
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(PACKAGE_SOURCE, staging, ignore=_package_ignore(excluded))
    _swap_in(staging, target, build_dir)
    package_stamp.write_text(digest)
    return True, excluded


def _package_ignore(excluded: tuple[str, ...]) -> Callable[[str, list[str]], set[str]]:
    source_root = str(PACKAGE_SOURCE)

    def ignore(folder: str, names: list[str]) -> set[str]:
        skipped = {n for n in names if n == "__pycache__" or n.endswith((".pyc", ".pyo"))}
        if folder == source_root:
            skipped.update(n for n in names if n in excluded or n == "__main__.py")
        return skipped

    return ignore


def _package_files(root: Path, excluded: tuple[str, ...]) -> Iterator[Path]:
    for file in sorted(_files(root)):
        parts = file.relative_to(root).parts
        if "__pycache__" in parts or file.suffix in {".pyc", ".pyo"}:
            continue
        if parts[0] in excluded or parts == ("__main__.py",):
            continue
        yield file


def _tree_digest(root: Path, excluded: tuple[str, ...]) -> str:
    digest = hashlib.sha256(repr(excluded).encode())
    for file in _package_files(root, excluded):
        digest.update(str(file.relative_to(root)).encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()


def _imported_by_runtime_code(subpackage: str) -> bool:
    """True when a module outside the local-only subpackages imports ``carpool.<subpackage>``.

    Imports under ``if TYPE_CHECKING:`` do not count: they never run.
    """
    wanted = f"carpool.{subpackage}"
    for file in _package_files(PACKAGE_SOURCE, LOCAL_ONLY_SUBPACKAGES):
        if file.suffix != ".py":
            continue
        relative = file.relative_to(PACKAGE_SOURCE).with_suffix("")
        parts = ["carpool", *relative.parts]
        package = parts[:-1]  # for `x/__init__.py` and `x/y.py` alike, relative imports start at x
        try:
            tree = ast.parse(file.read_text(), filename=str(file))
        except SyntaxError:
            continue  # someone is mid-edit; the import check is best effort
        for module in _runtime_imports(tree, package):
            if module == wanted or module.startswith(wanted + "."):
                return True
    return False


def _runtime_imports(tree: ast.AST, package: list[str]) -> Iterator[str]:
    def is_type_checking(node: ast.If) -> bool:
        test = node.test
        return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        )

    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)
        stack.extend(ast.iter_child_nodes(node))


# --- helpers --------------------------------------------------------------------------------------


def _files(root: Path) -> Iterator[Path]:
    for folder, _dirs, names in os.walk(root):
        for name in names:
            path = Path(folder, name)
            if not path.is_symlink():
                yield path


def _swap_in(staging: Path, target: Path, build_dir: Path) -> None:
    """Replace ``target`` by ``staging`` with two renames, so readers never see a half-copied tree."""
    target.parent.mkdir(parents=True, exist_ok=True)
    old = build_dir / f"{target.name}.old-{os.getpid()}"
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    staging.rename(target)
    shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"


def main(argv: list[str] | None = None) -> int:
    """``python -m infra.layer [--force]``: build, then print the size against the budget."""
    parser = argparse.ArgumentParser(prog="python -m infra.layer", description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="reinstall dependencies even if the stamp matches")
    args = parser.parse_args(argv)
    try:
        build = build_layer(force=args.force)
    except LayerError as exc:
        print(f"layer: {exc}", file=sys.stderr)
        return 1
    status = "within" if build.size_bytes <= SIZE_TARGET else "OVER"
    excluded = ", ".join(f"carpool/{name}" for name in build.excluded_subpackages) or "nothing"
    print(
        f"layer: {build.path.relative_to(REPO_ROOT) if build.path.is_relative_to(REPO_ROOT) else build.path} "
        f"{_mib(build.size_bytes)} unzipped ({build.size_bytes} bytes; {status} the {_mib(SIZE_TARGET)} "
        f"target, Lambda limit {_mib(LAMBDA_UNZIPPED_LIMIT)}); {len(build.distributions)} distributions; "
        f"left out: {excluded}, boto3/botocore (runtime)"
    )
    return 0 if build.size_bytes <= LAMBDA_UNZIPPED_LIMIT else 1


if __name__ == "__main__":
    raise SystemExit(main())
