"""`carpool validate FILE...`: check Karpenter v1 (and Kubernetes) manifests the way carpool will read them.

Judges the files with `carpool.api.config.load_config`, the verdict synth and the functions give (Karpenter's
CRD schema, then carpool's models). Prints every problem as `document: path: message` and exits 2, so it can gate a CI pipeline; exits 0
with a one-line summary when everything loads. Negative `spec.limits` are errors; limits on a resource
no instance type the pool admits offers (a typo such as `nvidia.com/gpus`) are warnings. NodePool -> EC2NodeClass references are checked when the
files include at least one EC2NodeClass (a NodePool file alone is still worth validating).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from carpool.api.config import load_config
from carpool.api.loader import ManifestError, ManifestErrors
from carpool.api.nodepool import NodePool

EXIT_INVALID = 2


def validate(
    files: Annotated[
        list[Path],
        typer.Argument(help="YAML/JSON manifests or directories of them (NodePool, EC2NodeClass, Pod, ...)."),
    ],
) -> None:
    """Validate Karpenter v1 NodePool/EC2NodeClass YAML (and pods, workloads, nodes) as carpool reads them."""
    out = Console(soft_wrap=True, highlight=False)
    err = Console(stderr=True, soft_wrap=True, highlight=False)
    try:
        manifests = load_config(files, complete=False)  # the verdict synth and the functions give
    except ManifestErrors as exc:
        _report(err, exc.errors)
        raise typer.Exit(EXIT_INVALID) from None
    for warning in limit_warnings(manifests.nodepools):
        err.print(warning, markup=False, style="yellow")
    out.print(f"ok: {manifests.summary()}", markup=False)
    if manifests.nodepools and not manifests.nodeclasses:
        out.print("note: no EC2NodeClass given, nodeClassRef references were not checked", markup=False)


def limit_warnings(nodepools: list[NodePool], region: str = "us-east-1") -> list[str]:
    """`warning: NodePool <name>: spec.limits.<resource>: ...` for limits no admitted instance type can
    reach (checked against the shipped catalog; a warning, not an error, because the limit is harmless and
    Karpenter accepts it too)."""
    if not any(p.spec.limits for p in nodepools):
        return []
    from carpool.app.pools import offered_resources  # the catalog and sizing are only needed here
    from carpool.catalog import Catalog

    catalog = Catalog.snapshot(region)
    return [f"warning: NodePool {pool.name}: {w}" for pool in nodepools if pool.spec.limits
            for w in pool.limit_warnings(offered_resources(pool, catalog))]


def _report(console: Console, errors: list[ManifestError]) -> None:
    for e in errors:
        console.print(str(e), markup=False, style="red")
    console.print(f"{len(errors)} error{'s' if len(errors) != 1 else ''}", markup=False, style="bold red")


def register(app: typer.Typer) -> None:
    """Attach this command to the CLI app."""
    app.command("validate")(validate)
