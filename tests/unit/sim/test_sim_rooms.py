"""The simulation's three rooms (`carpool.sim`'s docstring) and who may import whom.

`carpool.sim.cluster` stands in for the Kubernetes cluster, `carpool.sim.localaws` for AWS, and
`carpool.sim.run` plays one simulation with both. The run knows all three; the cluster and local AWS know
neither the run nor each other, and share only the neutral modules at `carpool.sim`'s top (`clock`,
`yaml_model`), which import no room. moto is local AWS's business alone: a moto upgrade is reviewed in
one package, whose patches are fingerprinted (docs/moto-patches.md).

Imports are read from the source (ast): module level, inside functions and under `if TYPE_CHECKING:`
alike, since each is a dependency of the module on what it names.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SIM = ROOT / "shared" / "carpool" / "sim"
ROOMS = ("cluster", "localaws", "run")
#: what each room may import of the others (itself and the neutral modules always)
ALLOWED = {"cluster": set(), "localaws": set(), "run": {"cluster", "localaws"}}
#: where moto may be imported: local AWS itself, and the tests of local AWS's patches of moto
MOTO_HOMES = (SIM / "localaws", ROOT / "tests" / "unit" / "sim" / "localaws")
#: the code that must reach moto through local AWS
SCANNED = ("shared", "functions", "infra", "bench", "tools", "tests", "examples")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT / "shared").with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(path: Path) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of everything a file imports, a `from x import y` as both x and x.y."""
    tree = ast.parse(path.read_text(), str(path))
    module = _module_name(path) if path.is_relative_to(ROOT / "shared") else ""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def _room(dotted: str) -> str | None:
    """The room a dotted name is in (`carpool.sim.run.runner` -> run), None outside the rooms."""
    parts = dotted.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["carpool", "sim"] and parts[2] in ROOMS else None


def _sim_files() -> list[Path]:
    return sorted(SIM.rglob("*.py"))


def test_every_module_of_the_simulation_is_in_a_room_or_neutral() -> None:
    assert {p.name for p in SIM.glob("*.py")} == {"__init__.py", "clock.py", "yaml_model.py"}
    assert {p.name for p in SIM.iterdir() if p.is_dir() and p.name != "__pycache__"} == set(ROOMS)


@pytest.mark.parametrize("path", _sim_files(), ids=lambda p: str(p.relative_to(SIM)))
def test_a_room_imports_only_the_rooms_it_may(path: Path) -> None:
    parts = path.relative_to(SIM).parts
    own = parts[0] if len(parts) > 1 else None
    allowed = ALLOWED[own] | {own} if own is not None else set()
    wrong = sorted({f"line {line}: {name}" for line, name in _imported(path)
                    if (room := _room(name)) is not None and room not in allowed})
    assert not wrong, f"{path.relative_to(ROOT)} ({own or 'neutral'}) imports {wrong}"


@pytest.mark.parametrize("room", ROOMS)
def test_a_room_package_imports_nothing_when_imported(room: str) -> None:
    """A room's `__init__` is a docstring: importing `carpool.sim.run.result` must not load the runner, nor
    `carpool.sim.cluster.specs` the cluster (the simulation's and the tests' start-up time)."""
    tree = ast.parse((SIM / room / "__init__.py").read_text())
    assert all(isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) for node in tree.body)


def _python_files() -> Iterator[Path]:
    for top in SCANNED:
        yield from (p for p in (ROOT / top).rglob("*.py") if "__pycache__" not in p.parts)


def test_only_local_aws_imports_moto() -> None:
    wrong = [f"{path.relative_to(ROOT)}:{line}"
             for path in _python_files() if not any(path.is_relative_to(home) for home in MOTO_HOMES)
             for line, name in _imported(path) if name == "moto" or name.startswith("moto.")]
    assert not wrong, f"moto imported outside carpool.sim.localaws (use its public API): {sorted(set(wrong))}"
