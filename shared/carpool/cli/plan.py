"""`carpool plan`: what carpool would launch for these pending pods, and why the rest cannot run.

Offline: NodePools/EC2NodeClasses/DaemonSets/Nodes from `--manifests`, pending pods (or workloads) from
`--pods`, instance types from the shipped catalog snapshot sized per node class, or from a synthetic
`--instance-types` JSON list. `--unavailable TYPE:ZONE:CAPACITY_TYPE` simulates capacity errors.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from carpool.api.loader import ManifestErrors, load
from carpool.app.planning import (
    PlanInputError,
    PlanInputs,
    assemble,
    load_capacity_rows,
    load_synthetic_types,
    plan,
)
from carpool.scheduling.result import PlannedClaim, SchedulingResult
from carpool.scheduling.scheduler import ScheduleOptions

EXIT_INVALID = 2


def _unavailable(values: list[str]) -> list[tuple[str, str, str]]:
    out = []
    for v in values:
        parts = v.split(":")
        if len(parts) != 3 or not all(parts):
            raise typer.BadParameter(f"{v!r}: expected TYPE:ZONE:CAPACITY_TYPE (e.g. c7i-flex.large:us-east-1a:spot)",
                                     param_hint="--unavailable")
        out.append((parts[0], parts[1], parts[2]))
    return out


def plan_command(
    manifests: Annotated[list[Path], typer.Option("--manifests", "-m", help="NodePool/EC2NodeClass/DaemonSet/Node YAML (repeatable).")],
    pods: Annotated[list[Path] | None, typer.Option("--pods", "-p", help="Pending pods or workloads YAML (repeatable).")] = None,
    instance_types: Annotated[Path | None, typer.Option("--instance-types", help="Synthetic instance types JSON (replaces the catalog).")] = None,
    region: Annotated[str, typer.Option("--region", help="Catalog region.")] = "us-east-1",
    unavailable: Annotated[list[str] | None, typer.Option("--unavailable", help="TYPE:ZONE:CAPACITY_TYPE without capacity (repeatable).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    max_instance_types: Annotated[int, typer.Option("--max-instance-types", help="Options listed per claim (0 = all).")] = 60,
    capacity: Annotated[Path | None, typer.Option("--capacity", help="Learned capacity (`carpool capacity --json` output).")] = None,
) -> None:
    """Plan NodeClaims for pending pods (offline; prints claims, cost and a reason per unplaced pod)."""
    err = Console(stderr=True, soft_wrap=True, highlight=False)
    gone = _unavailable(unavailable or [])
    try:
        loaded = load([*manifests, *(pods or [])])
        synthetic = load_synthetic_types(instance_types) if instance_types is not None else None
        catalog = None
        if synthetic is None:
            from carpool.catalog import Catalog

            catalog = Catalog.snapshot(region)
        learned = load_capacity_rows(capacity, datetime.now(UTC)) if capacity is not None else None
        inputs = assemble(loaded, synthetic=synthetic, catalog=catalog, unavailable=gone, learned_by_type=learned)
    except ManifestErrors as exc:
        for e in exc.errors:
            err.print(str(e), markup=False, style="red")
        raise typer.Exit(EXIT_INVALID) from None
    except (PlanInputError, ValueError, LookupError) as exc:
        err.print(str(exc), markup=False, style="red")
        raise typer.Exit(EXIT_INVALID) from None
    result = plan(inputs, ScheduleOptions(max_instance_types=max_instance_types or None))
    if as_json:
        out = result.to_json()
        out["notes"] = {k: v for k, v in inputs.notes.items() if v}
        for key, (server, reason) in inputs.servers.items():
            out["pods"].setdefault(key, {}).update({"server": server, "serverReason": reason})
        for claim_json, claim in zip(out["nodeClaims"], result.claims, strict=True):
            claim_json["capacitySource"] = _source(inputs, claim)
        typer.echo(json.dumps(out, indent=2))
        return
    _print(result, inputs)


def _source(inputs: PlanInputs, claim: PlannedClaim) -> str:
    """learned / extrapolated / default for the claim's cheapest instance type ("synthetic" without a catalog)."""
    if not claim.instance_types:
        return "-"
    return inputs.capacity_sources.get(claim.pool, {}).get(claim.instance_types[0].name, "synthetic")


def _print(result: SchedulingResult, inputs: PlanInputs) -> None:
    out = Console(soft_wrap=True, highlight=False)
    if out.width < 140 and not out.is_terminal:
        out = Console(soft_wrap=True, highlight=False, width=140)
    if result.claims:
        table = Table(box=box.SIMPLE_HEAD)
        for col in ("nodeclaim", "nodepool", "cheapest", "capacity", "zone", "pods", "$/h", "options", "memory from"):
            table.add_column(col)
        for c in result.claims:
            first = c.instance_types[0] if c.instance_types else None
            table.add_row(c.name, c.pool, first.name if first else "-", c.capacity_type or "-",
                          c.zone or (first.zone + "*" if first else "-"), str(len(c.pods)),
                          f"{c.price:.4f}", str(c.option_count), _source(inputs, c))
        out.print(table)
    nominated = result.nominations()
    for target, keys in sorted(nominated.items()):
        out.print(f"{len(keys)} pod(s) fit on {target}", markup=False)
    for key, reasons in sorted(result.unschedulable.items()):
        out.print(f"unschedulable {key}:", markup=False, style="yellow")
        for pool, reason in reasons.items():
            out.print(f"  {pool}: {reason}", markup=False)
    for key, (server, reason) in sorted(inputs.servers.items()):
        if server != "carpool":
            out.print(f"left to {server} {key}: {reason}", markup=False)
    for key in result.opted_out:
        out.print(f"left alone {key}: requires karpenter.sh/nodepool DoesNotExist", markup=False)
    for pool, notes in sorted(inputs.notes.items()):
        for note in notes:
            out.print(f"note ({pool}): {note}", markup=False, style="dim")
    placed = len(result.placements)
    out.print(
        f"{len(result.claims)} nodeclaim(s), {placed} pod(s) placed, {len(result.unschedulable)} unschedulable, "
        f"${result.hourly_cost:.4f}/h, scheduled in {result.seconds * 1000:.1f} ms",
        markup=False,
    )


def register(app: typer.Typer) -> None:
    """Attach this command to the CLI app."""
    app.command("plan")(plan_command)
