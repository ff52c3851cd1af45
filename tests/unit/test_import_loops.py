"""No import loops in the library (shared/carpool) or the CDK app (infra), and no module importing
another's private names.

Why a test: a loop makes import order matter (a module sees a half-initialised partner depending on who
was imported first) and ties two modules into one that can only be understood together. Imports are read
from the source (ast), module level and inside functions alike, since a function-level import is still a
dependency that only hides the loop until the function runs. Imports under `if TYPE_CHECKING:` count
too: they never execute, but a module that needs another's types to be read is tied to it all the same,
and a type-only loop is the one a refactoring most often leaves behind. A private name (`_x`) imported
from another module is a dependency on that module's insides, type-only or not, so that check reads
every import.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"carpool": ROOT / "shared" / "carpool", "infra": ROOT / "infra"}


def _modules() -> dict[str, Path]:
    """Dotted module name -> source file, for every module of the walked packages."""
    out: dict[str, Path] = {}
    for name, directory in PACKAGES.items():
        for path in sorted(directory.rglob("*.py")):
            parts = list(path.relative_to(directory).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([name, *parts])] = path
    return out


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, wherever it is: module level, in functions, under `if TYPE_CHECKING:`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _targets(module: str, path: Path, node: ast.Import | ast.ImportFrom, known: dict[str, Path]) -> Iterator[str]:
    """The walked modules an import statement loads: a submodule when the imported name is one, else the
    module the names come from."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name in known:
                yield alias.name
        return
    base = node.module or ""
    if node.level:
        package = _package_of(module, path).split(".")
        anchor = package[: len(package) - (node.level - 1)]
        base = ".".join([*anchor, base] if base else anchor)
    for alias in node.names:
        child = f"{base}.{alias.name}"
        if child in known:
            yield child
        elif base in known:
            yield base


def import_graph() -> dict[str, set[str]]:
    known = _modules()
    graph: dict[str, set[str]] = {m: set() for m in known}
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _imports(tree):
            graph[module].update(t for t in _targets(module, path, node, known) if t != module)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a path that returns to its start) per strongly connected component with a loop."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan; the graph is small enough for recursion
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_cycle_in(graph, component) for component in components]


def _cycle_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest loop through the component's first module (breadth first inside the component)."""
    start = min(component)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(graph[v] & component):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start, *reversed(path[:-1]), start] if v != start else [start, start]
                if w not in parents:
                    parents[w] = v
                    following.append(w)
        frontier = following
    raise AssertionError(f"no loop found in {sorted(component)}")


def test_the_walk_sees_real_imports() -> None:
    graph = import_graph()
    assert "carpool.scheduling.placement" in graph["carpool.scheduling.scheduler"]
    assert "carpool.scheduling.inputs" in graph["carpool.scheduling.pools"]


def test_cycle_finder_reports_a_loop() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_type_checking_and_function_imports_are_dependencies() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import carpool.x\nelse:\n    import carpool.y\n"
        "def f():\n    import carpool.z\n"
    )
    names = [a.name for node in _imports(tree) for a in node.names]
    assert names == ["TYPE_CHECKING", "carpool.x", "carpool.y", "carpool.z"]


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_import_loops(package: str) -> None:
    found = [c for c in cycles(import_graph()) if c[0].split(".")[0] == package]
    assert not found, "import loops:\n" + "\n".join(" -> ".join(c) for c in found)


def private_imports(modules: dict[str, Path]) -> list[str]:
    """`module: from other import _name` for every private name imported from another module."""
    out = []
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.ImportFrom):
                out.extend(
                    f"{module}: from {'.' * node.level}{node.module or ''} import {a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                )
    return out


def test_private_import_finder_sees_type_only_imports(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from a.b import _State, Public\n")
    assert private_imports({"m": source}) == ["m: from a.b import _State"]


def test_no_module_imports_private_names() -> None:
    found = private_imports(_modules())
    assert not found, "private names imported across modules:\n" + "\n".join(found)
