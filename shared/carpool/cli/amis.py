"""`carpool amis`: which AMI each instance type gets from each EC2NodeClass, and which are not offered.

Offline there is no SSM or EC2, so `--ami-file` lists the images the node classes' aliases and terms
resolve to (YAML or JSON list of `{id, name, arch, variant?, creationDate, deprecated?, parameter?,
owner?, tags?}`); resolution and mapping then run exactly as in the provisioning Lambda, through an
in-memory AmiSource. This is the command to run when a GPU image is suspected on a non-GPU type.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from carpool.amis import (
    AmiRejection,
    AmiSelectionError,
    AmiSource,
    ResolvedAmi,
    alias_of,
    explain_mapping,
    family_of,
    map_instance_types,
    parse_entries,
    resolve,
    source_from_entries,
)
from carpool.amis.mapping import InstanceTypeLike
from carpool.cli import files

#: a Kubernetes minor version, as the stack's `clusterVersion` context accepts it (`infra/settings.py`)
KUBERNETES_MINOR = re.compile(r"1\.\d{1,3}")


@dataclass
class NodeClassReport:
    name: str
    family: str
    amis: list[ResolvedAmi] = field(default_factory=list)
    mapping: dict[str, ResolvedAmi] = field(default_factory=dict)
    not_offered: dict[str, list[AmiRejection]] = field(default_factory=dict)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "family": self.family,
            "error": self.error,
            "amis": [_ami_json(a) for a in self.amis],
            "instanceTypes": {k: self.mapping[k].id for k in sorted(self.mapping)},
            "notOffered": {
                k: [{"ami": r.ami.id, "variant": r.ami.variant, "arch": r.ami.arch, "reason": r.reason} for r in v]
                for k, v in sorted(self.not_offered.items())
            },
        }


def _ami_json(a: ResolvedAmi) -> dict[str, Any]:
    return {
        "id": a.id,
        "name": a.name,
        "arch": a.arch,
        "variant": a.variant,
        "creationDate": a.creation_date,
        "deprecated": a.deprecated,
        "source": a.source,
    }


def _name(nodeclass: Any) -> str:
    return str(getattr(getattr(nodeclass, "metadata", None), "name", None) or "?")


def build_report(
    nodeclasses: Iterable[Any],
    source: AmiSource,
    cluster_version: str,
    instance_types: Sequence[InstanceTypeLike],
    now: datetime,
) -> list[NodeClassReport]:
    """Resolve each node class's AMIs and map the instance types; errors are reported per node class."""
    reports = []
    for nc in nodeclasses:
        report = NodeClassReport(_name(nc), "?")
        try:
            report.family = family_of(nc)
            report.amis = resolve(nc, cluster_version, source, now=now)
        except AmiSelectionError as exc:
            report.error = str(exc)
            reports.append(report)
            continue
        report.mapping = map_instance_types(report.amis, instance_types)
        report.not_offered = explain_mapping(report.amis, instance_types)
        reports.append(report)
    return reports


def render_text(reports: Sequence[NodeClassReport], cluster_version: str) -> str:
    lines: list[str] = []
    for r in reports:
        lines.append(f"EC2NodeClass {r.name} ({r.family}, Kubernetes {cluster_version})")
        if r.error:
            lines.append(f"  error: {r.error}")
            continue
        lines.append("  AMIs (best first):")
        width = max((len(a.id) for a in r.amis), default=0)
        for a in r.amis:
            flag = "  DEPRECATED" if a.deprecated else ""
            lines.append(f"    {a.id:<{width}}  {a.arch:<5} {a.variant:<8} {a.creation_date:<24} {a.name}{flag}")
        lines.append("  Instance types:")
        # Keyed by the mapped AMI itself, not its id: one image can serve two variants (x86 standard
        # Bottlerocket also serves neuron types) and both should show.
        by_ami: dict[tuple[str, str, str], list[str]] = {}
        for it in sorted(r.mapping):
            a = r.mapping[it]
            by_ami.setdefault((a.id, a.arch, a.variant), []).append(it)
        for (ami_id, arch, variant), names in by_ami.items():
            lines.append(f"    {ami_id} ({arch} {variant}): {', '.join(names)}")
        if r.not_offered:
            lines.append("  Not offered (no AMI fits):")
            for it, rejections in sorted(r.not_offered.items()):
                lines.append(f"    {it}:")
                lines.extend(f"      {rej.ami.id} ({rej.ami.arch} {rej.ami.variant}): {rej.reason}" for rej in rejections)
                if not rejections:
                    lines.append("      the node class resolved no AMI")
    return "\n".join(lines)


# -- glue -------------------------------------------------------------------------------------------
def _fail(message: str) -> typer.Exit:
    return files.fail(message)


def _load_nodeclasses(paths: Sequence[Path]) -> list[Any]:
    try:
        from carpool.api import loader  # type: ignore[attr-defined]
    except ImportError as exc:
        raise _fail("manifest loading (carpool.api.loader) is not available in this build") from exc
    try:
        manifests = loader.load([str(p) for p in paths])
    except getattr(loader, "ManifestErrors", ()) as exc:
        for error in getattr(exc, "errors", [exc]):
            typer.echo(f"error: {error}", err=True)
        raise typer.Exit(code=2) from exc
    nodeclasses = list(getattr(manifests, "nodeclasses", []))
    if not nodeclasses:
        raise _fail("no EC2NodeClass found in the given manifests")
    return nodeclasses


def _load_instance_types(names: Sequence[str] | None) -> list[Any]:
    try:
        from carpool.catalog import Catalog  # type: ignore[attr-defined]
    except ImportError as exc:
        raise _fail("the instance-type catalog (carpool.catalog) is not available in this build") from exc
    types = Catalog.snapshot().types
    if not names:
        return [types[n] for n in sorted(types)]
    unknown = [n for n in names if n not in types]
    if unknown:
        hints = [f"{n} (did you mean {', '.join(m)}?)" if (m := difflib.get_close_matches(n, list(types), 3)) else n
                 for n in unknown]
        raise _fail(f"unknown instance type(s): {'; '.join(hints)}")
    return [types[n] for n in names]


def _load_ami_file(path: Path, nodeclasses: Sequence[Any], cluster_version: str) -> AmiSource:
    try:
        raw = files.read_yaml(path, "--ami-file")
    except files.InputFileError as exc:
        raise _fail(str(exc)) from None
    records = raw.get("images", []) if isinstance(raw, dict) else raw
    if not isinstance(records, list):
        raise _fail(f"--ami-file {path}: expected a list of images (or images: [...])")
    if not records:
        raise _fail(f"--ami-file {path}: the file holds no images (expected a list of {{id, name, arch, ...}})")
    for index, record in enumerate(records):
        if not isinstance(record, dict):
            raise _fail(f"--ami-file {path}: record #{index}: expected a mapping (id, name, arch, ...)")
    aliases = []
    for nc in nodeclasses:
        try:
            if (alias := alias_of(nc)) is not None:
                aliases.append(alias)
        except AmiSelectionError:
            pass  # reported per node class by build_report
    try:
        return source_from_entries(parse_entries(records), aliases, cluster_version)
    except AmiSelectionError as exc:
        raise _fail(f"{path}: {exc}") from exc
    except (TypeError, ValueError) as exc:  # a field of the wrong shape (tags not a mapping, ...)
        raise _fail(f"--ami-file {path}: malformed record: {exc}") from None


def _minor_version(value: str) -> str:
    """`--cluster-version` as a Kubernetes minor version (`1.32`), as the stack's `clusterVersion` context."""
    if not KUBERNETES_MINOR.fullmatch(value):
        raise typer.BadParameter(f"{value!r} is not a Kubernetes minor version like 1.32")
    return value


def amis_command(
    manifests: Annotated[list[Path], typer.Option("--manifests", "-f", help="Manifest file(s); repeat the option.")],
    ami_file: Annotated[Path, typer.Option(
        "--ami-file", help="Images the aliases/terms resolve to (required: offline, carpool cannot query SSM or EC2).")],
    cluster_version: Annotated[str, typer.Option(
        "--cluster-version", callback=_minor_version, help="Kubernetes minor version, e.g. 1.32.")] = "1.32",
    instance_types: Annotated[str | None, typer.Option("--instance-types", help="Comma-separated; default all.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show which AMI each instance type gets, and why the others are not offered."""
    nodeclasses = _load_nodeclasses(manifests)
    source = _load_ami_file(ami_file, nodeclasses, cluster_version)
    names = [n.strip() for n in instance_types.split(",") if n.strip()] if instance_types else None
    types = _load_instance_types(names)
    reports = build_report(nodeclasses, source, cluster_version, types, datetime.now(UTC))
    if as_json:
        typer.echo(json.dumps({"clusterVersion": cluster_version, "nodeClasses": [r.to_json() for r in reports]}, indent=2))
    else:
        typer.echo(render_text(reports, cluster_version))
    if any(r.error for r in reports):
        raise typer.Exit(code=1)


def register(app: typer.Typer) -> None:
    """Attach this command to the CLI app."""
    app.command("amis")(amis_command)
