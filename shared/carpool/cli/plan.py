"""`carpool plan`: what carpool would launch for these pending pods, and why the rest cannot run.

Offline: NodePools/EC2NodeClasses/DaemonSets/Nodes from `--manifests`, pending pods (or workloads) from
`--pods`, instance types from the shipped catalog snapshot sized per node class, or from a synthetic
`--instance-types` JSON list. `--unavailable TYPE:ZONE:CAPACITY_TYPE` simulates capacity errors.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from carpool import cyclic_gc
from carpool import labels as wk
from carpool.api.loader import ManifestErrors, Manifests, load
from carpool.app import offline_limits
from carpool.app.offline_planning import (
    PlanInputError,
    PlanInputs,
    assemble,
    load_capacity_rows,
    load_synthetic_types,
    plan,
)
from carpool.cli.process_exit import keep_until_exit
from carpool.cli.status import amount
from carpool.launch.fleet import MAX_INSTANCE_TYPES
from carpool.scheduling.result import PlannedClaim, SchedulingResult
from carpool.scheduling.scheduler import ScheduleOptions

if TYPE_CHECKING:
    from rich.console import Console

EXIT_INVALID = 2
#: the capacity types an offering has (`karpenter.sh/capacity-type`)
CAPACITY_TYPES = (wk.CAPACITY_SPOT, wk.CAPACITY_ON_DEMAND, wk.CAPACITY_RESERVED)


def _unavailable(values: list[str]) -> list[tuple[str, str, str]]:
    out = []
    for v in values:
        parts = v.split(":")
        if len(parts) != 3 or not all(parts):
            raise typer.BadParameter(f"{v!r}: expected TYPE:ZONE:CAPACITY_TYPE (e.g. c7i-flex.large:us-east-1a:spot)",
                                     param_hint="--unavailable")
        if parts[2] not in CAPACITY_TYPES:
            raise typer.BadParameter(f"{v!r}: capacity type {parts[2]!r} is not one of {', '.join(CAPACITY_TYPES)}",
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
    max_instance_types: Annotated[int, typer.Option(
        "--max-instance-types", min=0, max=MAX_INSTANCE_TYPES,
        help=f"Options listed per claim (0 = all; CreateFleet takes at most {MAX_INSTANCE_TYPES}).")] = MAX_INSTANCE_TYPES,
    capacity: Annotated[Path | None, typer.Option("--capacity", help="Learned capacity (`carpool capacity --json` output).")] = None,
) -> None:
    """Plan NodeClaims for pending pods (offline; prints claims, cost and a reason per unplaced pod)."""
    gone = _unavailable(unavailable or [])
    clock = Stopwatch()
    with cyclic_gc.paused():  # 100,000 loaded pods stay alive: see carpool.cyclic_gc
        try:
            loaded = load([*manifests, *(pods or [])])
            clock.lap("load")
            inputs = plan_inputs(loaded, instance_types=instance_types, region=region, unavailable=gone,
                                 capacity=capacity)
            clock.lap("catalog")
        except ManifestErrors as exc:
            err = _console(stderr=True)
            for e in exc.errors:
                err.print(str(e), markup=False, style="red")
            raise typer.Exit(EXIT_INVALID) from None
        except (PlanInputError, ValueError, LookupError) as exc:
            _console(stderr=True).print(str(exc), markup=False, style="red")
            raise typer.Exit(EXIT_INVALID) from None
        result = plan(inputs, ScheduleOptions(max_instance_types=max_instance_types or None))
        clock.lap("solve")
        keep_until_exit(loaded, inputs, result)
        if as_json:
            typer.echo(render_json(result, inputs, clock))
            return
        _print(result, inputs)


def _console(*, stderr: bool = False) -> Console:
    """rich is imported only for messages and the table: the `--json` path never needs it."""
    from rich.console import Console

    return Console(stderr=stderr, soft_wrap=True, highlight=False)


class Stopwatch:
    """Wall time per stage of one command, from its start (the interpreter's start-up is not included)."""

    def __init__(self) -> None:
        self.start = self.last = time.perf_counter()
        self.stages: dict[str, float] = {}

    def lap(self, stage: str) -> float:
        now = time.perf_counter()
        self.stages[stage] = now - self.last
        self.last = now
        return self.stages[stage]

    @property
    def total(self) -> float:
        return time.perf_counter() - self.start


def plan_inputs(loaded: Manifests, *, instance_types: Path | None, region: str,
                unavailable: list[tuple[str, str, str]], capacity: Path | None) -> PlanInputs:
    """Instance types (synthetic list or the shipped catalog) and the scheduler's inputs."""
    synthetic = load_synthetic_types(instance_types) if instance_types is not None else None
    catalog = None
    if synthetic is None:
        from carpool.catalog import Catalog

        catalog = Catalog.snapshot(region)
    learned = load_capacity_rows(capacity, datetime.now(UTC)) if capacity is not None else None
    return assemble(loaded, synthetic=synthetic, catalog=catalog, unavailable=unavailable, learned_by_type=learned)


def render_json(result: SchedulingResult, inputs: PlanInputs, clock: Stopwatch) -> str:
    """The `--json` plan; `wallSeconds` is the command's time up to the plan being rendered (reading,
    validating, catalog, scheduling and rendering), `schedulingSeconds` the solver's share of it."""
    out = result.to_json()
    out["notes"] = {k: v for k, v in inputs.notes.items() if v}
    for key, (server, reason) in inputs.servers.items():
        out["pods"].setdefault(key, {}).update({"server": server, "serverReason": reason})
    for claim_json, claim in zip(out["nodeClaims"], result.claims, strict=True):
        claim_json["capacitySource"] = _source(inputs, claim)
    out["limits"] = {pool: {r: {"usage": u, "limit": lim} for r, (u, lim) in used.items()}
                     for pool, used in _limited_usage(result, inputs).items()}
    text = dumps_lines(out)  # the clock stops after the rendering it reports on
    return f'{text[:-2]},\n  "wallSeconds": {round(clock.total, 6)}\n}}'



def dumps_lines(value: dict[str, Any]) -> str:
    """JSON with the top level and each collection's entries on their own line (one claim, one pod per
    line). `json.dumps(indent=...)` runs the pure-Python encoder, which took longer than the solver on
    20,000 pods; each entry here goes through the C encoder."""
    dumps = _entry_encoder()
    lines = []
    for key, item in value.items():
        head = f"  {dumps(key)}: "
        if isinstance(item, list) and item:
            body = ",\n".join(f"    {dumps(v)}" for v in item)
            lines.append(f"{head}[\n{body}\n  ]")
        elif isinstance(item, dict) and item:
            body = ",\n".join(f"    {dumps(k)}: {dumps(v)}" for k, v in item.items())
            lines.append(f"{head}{{\n{body}\n  }}")
        else:
            lines.append(head + dumps(item))
    return "{\n" + ",\n".join(lines) + "\n}"


def _entry_encoder() -> Callable[[Any], str]:
    """`json.dumps` with its defaults, for many small values: `json.dumps` sets up a new C encoder on
    every call, which cost more than encoding a pod's entry; this one is set up once. Where the C
    encoder is missing (it is optional in CPython), `json.dumps` itself."""
    from json import encoder

    make = getattr(encoder, "c_make_encoder", None)  # typeshed does not declare the optional C part
    if make is None:
        return json.dumps
    base = json.JSONEncoder()
    as_string = encoder.encode_basestring_ascii
    encode = make({}, base.default, as_string, None, base.key_separator, base.item_separator, False, False, True)

    def dumps(value: Any) -> str:
        if isinstance(value, str):
            return as_string(value)
        return "".join(encode(value, 0))

    return dumps


def _source(inputs: PlanInputs, claim: PlannedClaim) -> str:
    """learned / extrapolated / default for the claim's cheapest instance type ("synthetic" without a catalog)."""
    if not claim.instance_types:
        return "-"
    return inputs.capacity_sources.get(claim.pool, {}).get(claim.instance_types[0].name, "synthetic")


def _print(result: SchedulingResult, inputs: PlanInputs) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

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
    for pool, used in sorted(_limited_usage(result, inputs).items()):
        shown = ", ".join(f"{r} {amount(r, u)} / {amount(r, lim)}" for r, (u, lim) in sorted(used.items()))
        out.print(f"limits ({pool}) once these claims run as their cheapest options: {shown}", markup=False)
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


def _limited_usage(result: SchedulingResult, inputs: PlanInputs) -> dict[str, dict[str, tuple[int, int]]]:
    """Each limited pool's usage of every resource it limits, with its limit, once the planned claims run
    as their cheapest options (what the provisioner's ledger holds then: `offline_limits.launched_usage`)."""
    usage = offline_limits.launched_usage(inputs.pools, result.claims)
    return {p.name: {r: (usage[p.name].get(r, 0), lim) for r, lim in p.limits.items()}
            for p in inputs.pools if p.limits}


def register(app: typer.Typer) -> None:
    """Attach this command to the CLI app."""
    app.command("plan")(plan_command)
