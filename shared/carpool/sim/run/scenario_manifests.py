"""The Kubernetes manifests a scenario names: where each one is read from, and each checked before the run.

A scenario names manifests three ways (a path relative to the scenario file, inline YAML text, inline
documents) in three places (`manifests`, a workload step's `apply`, a race's `apply`). The run reads a
step's manifest only when the step comes due, so a missing file or a NodePool with `cpu: "abc"` would end
a run minutes in with a traceback; `manifest_problems` finds them when the scenario is read, one line each
naming the scenario's field and the document's (`manifests[0]#1 (NodePool p): spec.limits[cpu]: ...`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from carpool.api.loader import ManifestErrors, load
from carpool.sim.cluster.workload import CONFIG_KINDS, WORKLOAD_KINDS, controller_id

#: A manifest source: a path relative to the scenario file, inline YAML text, or inline document(s).
ManifestSource = str | dict[str, Any] | list[dict[str, Any]]

#: how the loader names the one text it is given, replaced by the scenario's field in a message
_INPUT_LABEL = "<input 1>"


class ScenarioError(ValueError):
    """A scenario file that cannot be run; the message names the file and the field."""


def resolve_manifest(src: ManifestSource, base_dir: Path, label: str) -> tuple[str, str]:
    """Turn a manifest source into (label, YAML text). Text with a newline or a colon is inline YAML."""
    if isinstance(src, dict):
        return label, yaml.safe_dump(src, sort_keys=False)
    if isinstance(src, list):
        return label, yaml.safe_dump_all(src, sort_keys=False)
    if "\n" in src or ":" in src:
        return label, src
    path = (base_dir / src).resolve()
    if not path.is_file():
        what = "is a directory, not a file" if path.is_dir() else "not found"
        raise ScenarioError(f"{label}: manifest file {src!r} {what} (looked in {base_dir})")
    return str(path), path.read_text()


@dataclass
class ManifestCheck:
    """What one source holds, as far as the scenario's own checks need: the workloads it applies (by
    their controller id, as the simulated cluster keys them), its NodePools' names, and whether it
    carries carpool's config (NodePools or EC2NodeClasses, applied to the simulated cluster)."""

    problems: list[str] = field(default_factory=list)
    workloads: list[str] = field(default_factory=list)
    nodepools: list[str] = field(default_factory=list)
    config: bool = False


def check_manifest(src: ManifestSource, base_dir: Path, label: str) -> ManifestCheck:
    """Validate one source as carpool's loader does (workloads not expanded: the run does that)."""
    out = ManifestCheck()
    try:
        where, text = resolve_manifest(src, base_dir, label)
    except ScenarioError as exc:
        out.problems.append(str(exc))
        return out
    try:
        load([Path(where)] if where != label else [text if "\n" in text else text + "\n"], expand=False)
    except ManifestErrors as exc:
        prefix = "" if where == label else f"{label}: "
        out.problems.extend(prefix + str(e).replace(_INPUT_LABEL, label, 1) for e in exc.errors)
    # what the source names still counts when a document of it is refused: a step scaling a workload
    # whose manifest has a typo is not a second problem
    for doc in _documents(text):
        kind = doc.get("kind")
        meta = doc.get("metadata") or {}
        out.config = out.config or kind in CONFIG_KINDS
        if kind == "NodePool":
            out.nodepools.append(str(meta.get("name", "")))
        if kind in WORKLOAD_KINDS:
            out.workloads.append(controller_id(kind, meta.get("namespace") or "default", meta.get("name", "")))
    return out


def _documents(text: str) -> list[dict[str, Any]]:
    """The top-level mappings of a text: what the simulated cluster's workload driver keeps to scale (a
    List's items are created, not kept)."""
    try:
        return [doc for doc in yaml.safe_load_all(text) if isinstance(doc, dict)]
    except yaml.YAMLError:
        return []  # the loader said why
