"""Build the one Lambda layer every carpool function uses, from source, reproducibly and without Docker.

Why not ``PythonLayerVersion``: it bundles inside a Docker container and there is no Docker engine in CI
or on most laptops that deploy this. pip can do the same job for a foreign platform as long as every
dependency ships a wheel: ``--platform manylinux2014_aarch64 --implementation cp --python-version 3.12
--only-binary=:all:`` installs the arm64 CPython 3.12 builds (pydantic-core, PyYAML, wrapt are compiled),
whatever machine runs the build.

Inputs, and nothing else, decide the layer:

* ``infra/layer-requirements.lock``: every distribution the layer ships, pinned to one version and one
  wheel hash for cp312/aarch64. It is resolved from ``pyproject.toml``'s runtime dependencies minus the
  CLI-only ones (typer, rich) and minus what the Lambda Python runtime already ships (boto3, botocore,
  s3transfer) **and** every package only they need (urllib3, python-dateutil, ...): aws-xray-sdk
  declares botocore, but a second botocore would shadow the runtime's, cost ~25 MB and drift from it.
  ``python -m infra.layer lock`` rewrites it; the build installs it with ``--require-hashes --no-deps``,
  so what ships is exactly what was reviewed.
* ``shared/carpool`` (without ``__pycache__``), of which the layer ships everything but ``cli/`` and
  ``sim/`` (local tools that import typer/rich/moto) unless some runtime module imports them.
* this file, since it decides how the inputs become the layer.
* the CPython minor (and bytecode magic number) that compiles the layer's bytecode, or its absence.

Bytecode: Lambda mounts the layer read-only at ``/opt``, so a layer without ``__pycache__`` makes every
cold start compile carpool, pydantic, Powertools, the X-Ray SDK... from source again (roughly tripling
init time). The build therefore compiles every ``.py`` with a CPython 3.12 interpreter (the runtime's
version: bytecode is only valid for the minor that wrote it), found as ``$CARPOOL_LAYER_PYTHON``,
``python3.12`` on ``PATH`` or a pyenv 3.12; pyc files use PEP 552's *unchecked-hash* mode, which
holds no mtime (reproducible) and is never re-validated against the source (right for an immutable
layer). Without such an interpreter the layer is built without bytecode and a warning says so; the
digest records which case it is, so the two never share a cache entry or an asset hash.

:func:`layer_digest` hashes those inputs (relative paths and contents only, so every checkout of one
commit agrees); the CDK app uses it as the layer's asset hash, so any edit to the library makes a new
layer version and nothing else does. :func:`build_layer` turns the inputs into a folder that is
byte-identical on every build (deterministic bytecode, no absolute paths in ``RECORD``, fixed modes
and mtimes) and keeps it as ``build/layer-<digest>``, so repeated synths copy instead of rebuilding; its
size and the subpackages it leaves out are kept beside it (``layer-<digest>.json``) instead of being
found again by every synth. Wheels are verified against the lock and cached in
``~/.cache/carpool/wheels``, so only the first build on a machine downloads.

``python -m infra.layer`` builds and prints the unzipped size; ``layer_size_bytes()`` is the number
``bench/`` reports (target: at most 35 MB, CPython 3.12 bytecode included). No CDK import here, so that stays fast.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import email.parser
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = REPO_ROOT / "build"
#: Where built layers are kept, one ``layer-<digest>`` folder per set of inputs.
LAYER_CACHE_DIR = BUILD_DIR
#: The default of ``CarpoolStack(layer_dir=...)``: the folder holding the built layers.
LAYER_DIR = LAYER_CACHE_DIR
PACKAGE_SOURCE = REPO_ROOT / "shared" / "carpool"
PYPROJECT = REPO_ROOT / "pyproject.toml"
LOCK_FILE = REPO_ROOT / "infra" / "layer-requirements.lock"
BUILDER_SOURCE = Path(__file__).resolve()
#: Layers kept in the cache besides the one just used; older ones are deleted.
KEEP_CACHED_LAYERS = 3

#: Needed by the ``carpool`` CLI only; a Lambda never renders a table.
CLI_ONLY: frozenset[str] = frozenset({"typer", "rich"})
#: Shipped by the Lambda python3.12 runtime itself (/var/runtime).
PROVIDED_BY_RUNTIME: frozenset[str] = frozenset({"boto3", "botocore", "s3transfer"})
#: Subpackages of carpool that run on a laptop only (typer CLI, moto-backed simulation).
LOCAL_ONLY_SUBPACKAGES: tuple[str, ...] = ("cli", "sim")

PYTHON_VERSION = "3.12"
#: The functions run on arm64 (``infra/functions.py`` ARCHITECTURE). manylinux_2_28 is accepted too:
#: Lambda's python3.12 runs on Amazon Linux 2023 (glibc 2.34), and some projects stopped publishing
#: manylinux2014 wheels for aarch64.
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
#: 1980-01-01T00:00:00Z, the earliest time a zip entry can hold: every built file gets it.
FIXED_MTIME = 315532800
#: Names the interpreter that compiles the layer's bytecode (must be CPython 3.12).
LAYER_PYTHON_ENV = "CARPOOL_LAYER_PYTHON"
#: Where Lambda mounts the layer's ``python/`` folder: the file name recorded in code objects (tracebacks).
LAMBDA_SITE = "/opt/python"

_PIP_TARGET = (
    *[arg for platform in PLATFORMS for arg in ("--platform", platform)],
    "--implementation", "cp", "--python-version", PYTHON_VERSION, "--only-binary=:all:",
)  # fmt: skip
_LOCK_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$")
_HASH = re.compile(r"^--hash=sha256:([0-9a-f]{64})$")


class LayerError(RuntimeError):
    """The layer cannot be built (pip failed, a wheel is missing or does not match the lock)."""


@dataclass(frozen=True)
class LockedRequirement:
    """One line of the lock: a distribution, its exact version and the wheel hashes allowed for it."""

    name: str
    version: str
    hashes: tuple[str, ...]

    @property
    def pin(self) -> str:
        return f"{self.name}=={self.version}"


@dataclass(frozen=True)
class LayerBuild:
    """What a build produced, so callers (tests, bench, the CDK app) can report it without re-walking."""

    path: Path
    digest: str
    size_bytes: int
    #: False when the folder came from the cache.
    built: bool
    distributions: tuple[str, ...]
    excluded_subpackages: tuple[str, ...]
    #: The interpreter whose bytecode ships (``None``: the layer has no bytecode).
    bytecode: LayerPython | None = None


@dataclass(frozen=True)
class LayerPython:
    """A CPython interpreter of the runtime's minor version, which compiles the layer's bytecode."""

    executable: str
    #: ``"3.12"``; bytecode is valid for one minor version only.
    version: str
    #: ``importlib.util.MAGIC_NUMBER`` in hex, the first four bytes of every pyc it writes.
    magic: str

    @property
    def cache_tag(self) -> str:
        """``cpython-312``: the infix of the pyc names the runtime looks for."""
        return "cpython-" + self.version.replace(".", "")


# --- inputs ---------------------------------------------------------------------------------------


def runtime_requirements(pyproject: Path = PYPROJECT) -> list[str]:
    """The project's dependencies that Lambda needs, read from ``pyproject.toml``.

    Reading them (instead of repeating them here) means a dependency added for the library reaches the
    lock, and a test notices when the lock has not been regenerated.
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


def read_lock(lock_file: Path = LOCK_FILE) -> list[LockedRequirement]:
    """Parse the lock (pip's hash-checking requirements format: ``name==version \\ --hash=sha256:...``)."""
    try:
        text = lock_file.read_text()
    except OSError as exc:
        raise LayerError(f"cannot read the layer lock {lock_file}: {exc}; run `python -m infra.layer lock`") from exc
    locked: list[LockedRequirement] = []
    for line in text.replace("\\\n", " ").splitlines():
        tokens = line.split("#", 1)[0].split()
        if not tokens:
            continue
        match = _LOCK_LINE.match(tokens[0])
        hashes = [m.group(1) for m in map(_HASH.match, tokens[1:]) if m]
        if match is None or not hashes or len(hashes) != len(tokens) - 1:
            raise LayerError(f"{lock_file}: expected `name==version --hash=sha256:...`, got {line.strip()!r}")
        locked.append(LockedRequirement(canonicalize_name(match.group(1)), match.group(2), tuple(hashes)))
    if not locked:
        raise LayerError(f"{lock_file} pins nothing; run `python -m infra.layer lock`")
    return locked


def excluded_subpackages(package_source: Path = PACKAGE_SOURCE) -> tuple[str, ...]:
    """The local-only subpackages that no runtime module imports, hence left out of the layer."""
    imported = _local_only_imported_by_runtime_code(package_source)
    return tuple(name for name in LOCAL_ONLY_SUBPACKAGES if name not in imported)


def layer_digest(
    package_source: Path = PACKAGE_SOURCE, lock_file: Path = LOCK_FILE, python: LayerPython | None | str = "find"
) -> str:
    """SHA-256 of everything that decides the layer's content: the library, the lock, this builder and
    the bytecode's Python (``"find"``: the one :func:`find_layer_python` picks; ``None``: no bytecode).

    Only paths relative to their root and file contents enter it, never where the checkout lives or
    when a file was touched, so two clones of one commit agree and any edit to a library file
    (shipped or not: the check costs nothing and cannot be fooled by the import scan) changes it.
    The interpreter enters as its minor version and magic number, not its path or patch release.
    """
    compiler = find_layer_python() if isinstance(python, str) else python
    bytecode = f"{compiler.version}:{compiler.magic}" if compiler else "none"
    digest = hashlib.sha256(b"carpool-layer\0")
    for label, content in (
        ("target", repr((PYTHON_VERSION, PLATFORMS, sorted(PROVIDED_BY_RUNTIME))).encode()),
        ("bytecode", bytecode.encode()),
        ("builder", BUILDER_SOURCE.read_bytes()),
        ("lock", lock_file.read_bytes()),
    ):
        _update(digest, label, content)
    for file in _library_files(package_source):
        _update(digest, "carpool/" + file.relative_to(package_source).as_posix(), file.read_bytes())
    return digest.hexdigest()


def _update(digest: hashlib._Hash, name: str, content: bytes) -> None:
    # Length-prefixed, so no two different trees can produce the same byte stream.
    encoded = name.encode()
    digest.update(len(encoded).to_bytes(8, "big") + encoded + len(content).to_bytes(8, "big") + content)


# --- build ----------------------------------------------------------------------------------------


def build_layer(
    output_dir: Path | None = None,
    *,
    cache_dir: Path = LAYER_CACHE_DIR,
    wheel_cache: Path | None = None,
    package_source: Path = PACKAGE_SOURCE,
    lock_file: Path = LOCK_FILE,
    log: Callable[[str], None] = print,
) -> LayerBuild:
    """Return ``cache_dir/layer-<digest>``, building it first unless it exists; copy it to ``output_dir``.

    Safe to call from parallel test workers and synths: builders of one digest are serialised by a file
    lock and a finished layer appears with one rename, so a reader never sees half a layer.
    """
    python = find_layer_python()
    digest = layer_digest(package_source, lock_file, python)
    cache_dir.mkdir(parents=True, exist_ok=True)
    target = cache_dir / f"layer-{digest}"
    built = False
    with _locked(cache_dir / f".layer-{digest}.lock"):
        facts = _read_facts(target)
        if facts is None:
            if target.is_dir():  # cached by a builder that kept no facts: they follow from the folder
                facts = _LayerFacts(layer_size_bytes(target), excluded_subpackages(package_source))
            else:
                facts = _build(target, digest, package_source, lock_file, wheel_cache, python, log)
                built = True
            _write_facts(target, facts)
        os.utime(target)  # "last used", for pruning; the folder's own mtime is not part of the layer
    if built:  # the cache only grows when a layer is built
        _prune(cache_dir, keep=target)
    if output_dir is not None:
        shutil.copytree(target, output_dir, dirs_exist_ok=True)
    return LayerBuild(
        path=target,
        digest=digest,
        size_bytes=facts.size_bytes,
        built=built,
        distributions=tuple(r.pin for r in read_lock(lock_file)),
        excluded_subpackages=facts.excluded_subpackages,
        bytecode=python,
    )


@dataclass(frozen=True)
class _LayerFacts:
    """What a built layer's digest fixes but costs seconds to find again: kept beside the cached folder.

    The import scan reads the whole library and the size walks ~2000 files; both are functions of the
    inputs the digest covers (the library and this builder) or of the immutable folder itself.
    """

    size_bytes: int
    excluded_subpackages: tuple[str, ...]


def _build(
    target: Path,
    digest: str,
    package_source: Path,
    lock_file: Path,
    wheel_cache: Path | None,
    python: LayerPython | None,
    log: Callable[[str], None],
) -> _LayerFacts:
    """Build into a staging folder and rename it to ``target``: a reader never sees half a layer."""
    log(f"layer: building {target.name[:22]}... (CPython {PYTHON_VERSION}, arm64)")
    if python is None:
        _warn_no_bytecode()
    staging = Path(tempfile.mkdtemp(prefix=f".layer-{digest[:12]}-", dir=target.parent))
    try:
        excluded = _build_into(staging, package_source, lock_file, wheel_cache or default_wheel_cache(), python)
        facts = _LayerFacts(layer_size_bytes(staging), excluded)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return facts


def _facts_file(target: Path) -> Path:
    # Beside the folder, not in it: the folder is the asset, byte for byte.
    return target.with_name(target.name + ".json")


def _read_facts(target: Path) -> _LayerFacts | None:
    """The facts kept for ``target``, or ``None`` when the folder or its facts are missing or unreadable."""
    if not target.is_dir():
        return None
    try:
        raw = json.loads(_facts_file(target).read_text())
        return _LayerFacts(int(raw["size_bytes"]), tuple(str(name) for name in raw["excluded_subpackages"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_facts(target: Path, facts: _LayerFacts) -> None:
    content = {"size_bytes": facts.size_bytes, "excluded_subpackages": list(facts.excluded_subpackages)}
    staging = target.with_name(f".{target.name}.json.tmp")
    staging.write_text(json.dumps(content))
    staging.replace(_facts_file(target))


def default_wheel_cache() -> Path:
    """``$CARPOOL_WHEEL_CACHE``, else ``$XDG_CACHE_HOME/carpool/wheels`` (``~/.cache/...``).

    Shared by every checkout on the machine: the lock's hashes, not the folder, vouch for each wheel.
    """
    if configured := os.environ.get("CARPOOL_WHEEL_CACHE"):
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "carpool" / "wheels"


def _build_into(
    staging: Path, package_source: Path, lock_file: Path, wheel_cache: Path, python: LayerPython | None
) -> tuple[str, ...]:
    """Install, copy the library, compile; return the local-only subpackages left out."""
    site = staging / "python"  # Lambda mounts a layer at /opt; /opt/python is on sys.path
    locked = read_lock(lock_file)
    fetch_wheels(locked, lock_file, wheel_cache)
    _pip(
        "install", "--isolated", "--no-index", "--find-links", str(wheel_cache), "--target", str(site),
        *_PIP_TARGET, "--no-deps", "--require-hashes",
        # pip would compile with the build machine's Python (maybe the wrong minor, always with mtimes)
        "--no-compile", "--quiet", "-r", str(lock_file),
        failure="pip could not install the locked layer dependencies",
    )  # fmt: skip
    shutil.rmtree(site / "bin", ignore_errors=True)  # console scripts are useless in /opt/python
    excluded = excluded_subpackages(package_source)
    for file in _library_files(package_source):
        relative = file.relative_to(package_source)
        if relative.parts[0] in excluded or relative.parts == ("__main__.py",):
            continue
        destination = site / "carpool" / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(file.read_bytes())
    _make_reproducible(site)
    if python is not None:
        compile_bytecode(site, python)
    _normalise_metadata(staging)
    return excluded


def fetch_wheels(locked: Iterable[LockedRequirement], lock_file: Path, wheel_cache: Path) -> None:
    """Make sure ``wheel_cache`` holds a wheel matching the lock for every pin; download what is missing."""
    wheel_cache.mkdir(parents=True, exist_ok=True)
    with _locked(wheel_cache / ".lock"):
        have = {_sha256(path) for path in wheel_cache.glob("*.whl")}
        missing = [r.pin for r in locked if not have.intersection(r.hashes)]
        if not missing:
            return
        _pip(
            "download", "--dest", str(wheel_cache), *_PIP_TARGET, "--no-deps", "--require-hashes",
            "--quiet", "-r", str(lock_file),
            failure=f"pip could not download {', '.join(missing)} (every one needs a cp312/aarch64 or "
            "pure-Python wheel matching the lock's hash)",
        )  # fmt: skip


def _pip(*args: str, failure: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pip", *args, "--disable-pip-version-check"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise LayerError(f"{failure}:\n{result.stderr.strip() or result.stdout.strip()}")


def _make_reproducible(site: Path) -> None:
    """Drop what differs between two installs of the same wheels: stray bytecode and paths outside ``site``.

    pip lists console scripts in ``RECORD`` as ``../../bin/x`` with the hash of a script whose shebang
    names the build machine's interpreter; those scripts are not shipped, so their lines go.
    """
    for cache in sorted(site.rglob("__pycache__"), reverse=True):
        shutil.rmtree(cache)
    for compiled in [*site.rglob("*.pyc"), *site.rglob("*.pyo")]:
        compiled.unlink()
    for record in site.glob("*.dist-info/RECORD"):
        lines = record.read_text().splitlines()
        kept = [line for line in lines if not line.startswith(("../", "/")) and "__pycache__" not in line]
        record.write_text("".join(f"{line}\n" for line in kept))
    for direct_url in site.glob("*.dist-info/direct_url.json"):
        direct_url.unlink()  # names the local wheel's path


def _normalise_metadata(root: Path) -> None:
    """Same mode and mtime for every entry, so a zip (or a hash of one) depends on contents alone."""
    for folder, dirs, names in os.walk(root):
        for name in names:
            path = Path(folder, name)
            executable = path.stat().st_mode & 0o100
            path.chmod(0o755 if executable else 0o644)
            os.utime(path, (FIXED_MTIME, FIXED_MTIME))
        for name in dirs:
            Path(folder, name).chmod(0o755)
    for folder, _dirs, _names in os.walk(root, topdown=False):
        os.utime(folder, (FIXED_MTIME, FIXED_MTIME))
    root.chmod(0o755)  # mkdtemp made it 0700; copytree passes it on to CDK's asset folder


def _prune(cache_dir: Path, keep: Path) -> None:
    """Delete all but the most recently used built layers (each is ~20 MB)."""
    layers = sorted(
        (p for p in cache_dir.glob("layer-*") if p.is_dir() and p != keep),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in layers[KEEP_CACHED_LAYERS:]:
        shutil.rmtree(old, ignore_errors=True)
        _facts_file(old).unlink(missing_ok=True)


# --- bytecode -------------------------------------------------------------------------------------

_PROBE = (
    "import sys, importlib.util as u; "
    "print(sys.implementation.name, '%d.%d' % sys.version_info[:2], u.MAGIC_NUMBER.hex())"
)


def find_layer_python() -> LayerPython | None:
    """The CPython 3.12 that compiles the layer's bytecode, or ``None`` when this machine has none.

    ``$CARPOOL_LAYER_PYTHON`` wins and must be CPython 3.12 (a wrong one is an error, not a silent
    layer without bytecode); otherwise the first CPython 3.12 among this interpreter, ``python3.12``
    on ``PATH`` and pyenv's 3.12 installs. Each candidate is asked for its version rather than trusted
    by name: a pyenv shim named python3.12 may not run, or may run another version.
    """
    return _find_layer_python(os.environ.get(LAYER_PYTHON_ENV, ""), os.environ.get("PATH", ""))


@lru_cache(maxsize=8)
def _find_layer_python(configured: str, path: str) -> LayerPython | None:
    if configured:
        python = probe_python(configured)
        if python is None:
            raise LayerError(f"{LAYER_PYTHON_ENV}={configured} is not a CPython {PYTHON_VERSION} interpreter")
        return python
    pyenv_root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    candidates = [
        sys.executable,
        shutil.which(f"python{PYTHON_VERSION}", path=path),
        *sorted(map(str, pyenv_root.glob(f"versions/{PYTHON_VERSION}.*/bin/python{PYTHON_VERSION}")), reverse=True),
    ]
    for candidate in candidates:
        if candidate and (python := probe_python(candidate)):
            return python
    return None


def probe_python(executable: str) -> LayerPython | None:
    """``executable`` as a :class:`LayerPython` if it runs and is CPython 3.12, else ``None``."""
    try:
        result = subprocess.run([executable, "-I", "-c", _PROBE], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    fields = result.stdout.split()
    if result.returncode != 0 or len(fields) != 3 or fields[:2] != ["cpython", PYTHON_VERSION]:
        return None
    return LayerPython(executable=executable, version=fields[1], magic=fields[2])


def compile_bytecode(site: Path, python: LayerPython) -> None:
    """Write ``__pycache__/<module>.cpython-312.pyc`` next to every ``.py`` under ``site``.

    unchecked-hash pyc files carry a source hash instead of an mtime and are loaded without reading
    the source again, so they are reproducible and valid on a read-only ``/opt``. ``-d`` records
    ``/opt/python/...`` as the file name in code objects instead of the staging folder, which would
    make each build differ. Every ``.py`` of the layer is an importable module name (wheels ship no
    scripts into ``python/``; the tests check this), so nothing is skipped.
    """
    result = subprocess.run(
        [python.executable, "-I", "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash",
         "-d", LAMBDA_SITE, str(site)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise LayerError(
            f"{python.executable} could not compile the layer:\n{result.stdout.strip() or result.stderr.strip()}"
        )


def _warn_no_bytecode() -> None:
    print(
        f"layer: WARNING: no CPython {PYTHON_VERSION} interpreter found (checked ${LAYER_PYTHON_ENV}, "
        f"python{PYTHON_VERSION} on PATH, pyenv): building the layer WITHOUT bytecode, so every cold start "
        f"compiles its ~1000 modules from source (init roughly 3x slower). Install Python {PYTHON_VERSION} "
        f"(e.g. `uv python install {PYTHON_VERSION}` or `pyenv install {PYTHON_VERSION}`) or set "
        f"{LAYER_PYTHON_ENV}, then synth again.",
        file=sys.stderr,
    )


def layer_size_bytes(path: Path) -> int:
    """Unzipped size of a built layer in bytes, not counting boto3/botocore (the runtime's)."""
    if not path.is_dir():
        raise FileNotFoundError(f"no layer at {path}: build one with `python -m infra.layer`")
    site = path / "python"
    total = 0
    for file in _files(path):
        top = file.relative_to(site).parts[0] if file.is_relative_to(site) else ""
        if canonicalize_name(top) in PROVIDED_BY_RUNTIME:
            continue
        total += file.lstat().st_size
    return total


# --- the lock -------------------------------------------------------------------------------------


def write_lock(
    lock_file: Path = LOCK_FILE, *, pyproject: Path = PYPROJECT, wheel_cache: Path | None = None
) -> list[LockedRequirement]:
    """Resolve the runtime requirements for cp312/aarch64 and write them, with wheel hashes, to the lock.

    pip resolves with ``--platform``, but evaluates environment markers for the machine it runs on; so
    the dependency walk below re-evaluates every ``Requires-Dist`` for the target and downloads what the
    host's markers hid, until the set is closed. The downloaded wheels seed the wheel cache.
    """
    roots = [Requirement(r) for r in runtime_requirements(pyproject)]
    cache = wheel_cache or default_wheel_cache()
    with tempfile.TemporaryDirectory(prefix="carpool-lock-") as tmp:
        folder = Path(tmp)
        wanted = [str(r) for r in roots]
        while wanted:
            _pip("download", "--dest", str(folder), *_PIP_TARGET, "--quiet", *wanted,
                 failure="pip could not resolve the layer dependencies for cp312/aarch64")  # fmt: skip
            wheels = _wheels_by_name(folder)
            needed, wanted = _closure(roots, wheels)
        locked = [
            LockedRequirement(name, str(parse_wheel_filename(wheels[name].name)[1]), (_sha256(wheels[name]),))
            for name in sorted(needed)
        ]
        cache.mkdir(parents=True, exist_ok=True)
        for name in needed:
            if not (cache / wheels[name].name).exists():
                shutil.copy2(wheels[name], cache / wheels[name].name)
    header = (
        "# The Lambda layer's dependencies for CPython 3.12 on arm64 (manylinux), exactly as shipped.\n"
        "# Generated by `python -m infra.layer lock` from pyproject.toml's runtime dependencies, without\n"
        "# typer/rich (CLI only) and boto3/botocore/s3transfer and what only they need (Lambda's runtime).\n"
    )
    body = "".join(
        f"{r.pin} \\\n" + " \\\n".join(f"    --hash=sha256:{h}" for h in r.hashes) + "\n" for r in locked
    )
    lock_file.write_text(header + body)
    return locked


def _wheels_by_name(folder: Path) -> dict[str, Path]:
    return {str(parse_wheel_filename(p.name)[0]): p for p in sorted(folder.glob("*.whl"))}


def _closure(roots: list[Requirement], wheels: dict[str, Path]) -> tuple[set[str], list[str]]:
    """Distributions the target needs from ``roots`` (not descending into the runtime's), and the
    requirements among them that have no wheel yet."""
    needed: set[str] = set()
    missing: list[str] = []
    seen: set[tuple[str, frozenset[str]]] = set()
    queue = [(r, frozenset(r.extras)) for r in roots]
    while queue:
        requirement, extras = queue.pop()
        name = canonicalize_name(requirement.name)
        if name in PROVIDED_BY_RUNTIME or (name, extras) in seen:
            continue
        seen.add((name, extras))
        needed.add(name)
        if name not in wheels:
            missing.append(str(requirement))
            continue
        for raw in _requires_dist(wheels[name]):
            dependency = Requirement(raw)
            if dependency.marker is None or any(
                dependency.marker.evaluate({**TARGET_MARKERS, "extra": extra}) for extra in (*extras, "")
            ):
                queue.append((dependency, frozenset(dependency.extras)))
    return needed, sorted(set(missing))


def _requires_dist(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        metadata = email.parser.BytesParser().parsebytes(archive.read(name))
    return metadata.get_all("Requires-Dist") or []


# --- the carpool package --------------------------------------------------------------------------


def _library_files(root: Path) -> Iterator[Path]:
    """Every file of the library in a stable order, without bytecode caches."""
    for file in sorted(_files(root), key=lambda p: p.relative_to(root).as_posix()):
        parts = file.relative_to(root).parts
        if "__pycache__" in parts or file.suffix in {".pyc", ".pyo"}:
            continue
        yield file


#: Any import of ``carpool.cli``/``carpool.sim`` (absolute, relative, ``from carpool import sim``) spells
#: the subpackage as a whole identifier, so a module without one of these words cannot import it.
_LOCAL_ONLY_WORD = re.compile(r"\b(?:" + "|".join(map(re.escape, LOCAL_ONLY_SUBPACKAGES)) + r")\b")


def _local_only_imported_by_runtime_code(package_source: Path = PACKAGE_SOURCE) -> set[str]:
    """The local-only subpackages that some module outside them imports (``__main__`` never ships).

    Imports under ``if TYPE_CHECKING:`` do not count: they never run. One pass over the library; only
    modules naming a local-only subpackage at all are parsed (parsing all of them took seconds).
    """
    imported: set[str] = set()
    for file in _library_files(package_source):
        relative = file.relative_to(package_source)
        if file.suffix != ".py" or relative.parts[0] in LOCAL_ONLY_SUBPACKAGES or relative.name == "__main__.py":
            continue
        text = file.read_text()
        if not _LOCAL_ONLY_WORD.search(text):
            continue
        parts = ["carpool", *relative.with_suffix("").parts]
        package = parts[:-1]  # for `x/__init__.py` and `x/y.py` alike, relative imports start at x
        try:
            tree = ast.parse(text, filename=str(file))
        except SyntaxError:
            continue  # someone is mid-edit; the digest still covers the file
        for module in _runtime_imports(tree, package):
            for name in LOCAL_ONLY_SUBPACKAGES:
                wanted = f"carpool.{name}"
                if module == wanted or module.startswith(wanted + "."):
                    imported.add(name)
    return imported


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


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
    """``python -m infra.layer [build|lock]``: build (and print the size), or regenerate the lock."""
    parser = argparse.ArgumentParser(prog="python -m infra.layer", description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", choices=("build", "lock"), default="build")
    args = parser.parse_args(argv)
    try:
        if args.command == "lock":
            locked = write_lock()
            print(f"layer: locked {len(locked)} distributions in {LOCK_FILE.relative_to(REPO_ROOT)}")
            return 0
        build = build_layer()
    except LayerError as exc:
        print(f"layer: {exc}", file=sys.stderr)
        return 1
    status = "within" if build.size_bytes <= SIZE_TARGET else "OVER"
    excluded = ", ".join(f"carpool/{name}" for name in build.excluded_subpackages) or "nothing"
    print(
        f"layer: {build.path} {_mib(build.size_bytes)} unzipped ({build.size_bytes} bytes; {status} the "
        f"{_mib(SIZE_TARGET)} target, Lambda limit {_mib(LAMBDA_UNZIPPED_LIMIT)}); "
        f"{len(build.distributions)} distributions; left out: {excluded}, boto3/botocore (runtime); "
        f"bytecode: {build.bytecode.cache_tag + ' (unchecked-hash)' if build.bytecode else 'NONE'}"
    )
    return 0 if build.size_bytes <= LAMBDA_UNZIPPED_LIMIT else 1


if __name__ == "__main__":
    raise SystemExit(main())
