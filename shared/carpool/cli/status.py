"""`carpool status`: what the deployed carpool holds, as `kubectl get nodeclaims` and `kubectl describe
nodepool` show it for Karpenter.

Reads the state table (`--table`, or `CARPOOL_TABLE`) and, for the pools' limits, the cluster's NodePools
(their `spec.limits`, what the functions hold usage against), reached as kubectl reaches the cluster
(`--kubeconfig`, `$KUBECONFIG`, `~/.kube/config`; `--context`); when the cluster cannot be read, one
`warning:` line on stderr says why and usage is shown without limits. It shows claims,
each pool's usage against its limits, the learned capacity, offerings marked unavailable and until when,
the EC2NodeClasses that refused a launch with the cause, and the pods carpool could not serve with their
last reasons (`carpool.app.status`). `--json` prints the
same as camelCase JSON and nothing else on stdout. `carpool simulate --status` prints it for the
simulation's local AWS before it stops.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.console import Console, Group
from rich.table import Table

from carpool.app.status import Status

if TYPE_CHECKING:
    from carpool.karpenter_objects import KarpenterObjects

EXIT_USAGE = 2


def _age(seconds: int) -> str:
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _table(title: str, columns: list[str], rows: list[list[str]]) -> Table:
    t = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left")
    for column in columns:
        t.add_column(column)
    for r in rows:
        t.add_row(*r)
    return t


def amount(resource: str, value: int) -> str:
    """A resource as `carpool status` shows it: cpu in cores, memory in Gi, any other resource as counted."""
    if resource == "cpu":
        return f"{value / 1000:g}"
    if resource == "memory":
        return f"{value / 2**30:.1f}Gi"
    return str(value)


def render(status: Status) -> Group:
    """The rich tables of a `Status` (what `carpool status` prints)."""
    parts: list[Table] = [_table(
        "claims (NodeClaims)", ["name", "nodepool", "type", "zone", "capacity", "instance", "node", "age", "state"],
        [[c.name, c.nodepool, c.instance_type or "-", c.zone or "-", c.capacity_type or "-", c.instance_id or "-",
          c.node or "-", _age(c.age_seconds), c.state] for c in status.claims])]
    parts.append(_table("nodepools: usage / limit", ["nodepool", "resource", "usage", "limit"], [
        [p.name, r, amount(r, p.usage.get(r, 0)), amount(r, p.limits[r]) if p.limits and r in p.limits else "-"]
        for p in status.pools for r in sorted({*p.usage, *(p.limits or {})})]))
    if status.not_ready:
        parts.append(_table("EC2NodeClasses not ready (launches refused)", ["nodeclass", "cause", "nodepools", "since",
                                                                          "message"], [
            [e.nodeclass, e.cause, ", ".join(e.nodepools), e.since.strftime("%H:%M:%S"), e.message]
            for e in status.not_ready]))
    if status.pending:
        parts.append(_table("pods carpool cannot serve (last reasons)", ["pod", "since", "reasons"], [
            [p.pod, p.since.strftime("%H:%M:%S"), "; ".join(f"{k}: {v}" for k, v in sorted(p.reasons.items()))]
            for p in status.pending]))
    if status.unavailable:
        parts.append(_table("offerings marked unavailable", ["type", "zone", "capacity", "until", "reason"], [
            [o.instance_type, o.zone, o.capacity_type, o.until.strftime("%H:%M:%S"), o.reason]
            for o in status.unavailable]))
    parts.append(_table("learned capacity", ["type", "image", "samples", "allocatable"], [
        [r.instance_type, r.image_id, str(r.samples), ", ".join(f"{k}={v}" for k, v in sorted(r.allocatable.items()))]
        for r in status.learned]))
    return Group(*parts)


def console() -> Console:
    """Standard output, as wide as the terminal; piped or captured, wide enough not to cut the tables."""
    out = Console(soft_wrap=True)
    return out if out.is_terminal else Console(soft_wrap=True, width=200)


def _fail(message: str) -> typer.Exit:
    Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {message}", highlight=False)
    return typer.Exit(EXIT_USAGE)


def pool_limits(nodepools: Sequence[Mapping[str, Any]]) -> tuple[dict[str, dict[str, int] | None], list[str]]:
    """Each NodePool's `spec.limits` in the library's units (None: unlimited), and a warning for each pool
    whose limits cannot be read (the functions refuse that pool too)."""
    from carpool import resources

    limits: dict[str, dict[str, int] | None] = {}
    warnings: list[str] = []
    for pool in nodepools:
        name = str((pool.get("metadata") or {}).get("name"))
        raw = (pool.get("spec") or {}).get("limits")
        try:
            limits[name] = resources.parse(raw) if raw is not None else None
        except (TypeError, ValueError) as e:
            warnings.append(f"warning: NodePool {name}: spec.limits: {e}; shown without limits")
    return limits, warnings


def cluster_limits(objects: KarpenterObjects) -> tuple[dict[str, dict[str, int] | None], list[str]]:
    """The limits of the cluster's NodePools (`pool_limits`)."""
    from carpool.karpenter_objects import NODEPOOL

    return pool_limits(objects.list_objects(NODEPOOL).items)


def read_deployed(table: str, limits: Mapping[str, Mapping[str, int] | None], now: datetime) -> Status:
    """The status of the carpool whose state table is `table` (boto3 only when this runs)."""
    from carpool.adapters.aws.dynamodb.learned_capacity import DynamoCapacityCache
    from carpool.adapters.aws.dynamodb.ledger import DynamoLedger
    from carpool.adapters.aws.dynamodb.not_ready import DynamoNotReady
    from carpool.adapters.aws.dynamodb.offerings import DynamoOfferings
    from carpool.adapters.aws.dynamodb.reasons import DynamoPodReasons
    from carpool.app import status

    return status.read(DynamoLedger(table), DynamoOfferings(table), DynamoCapacityCache(table),
                       DynamoPodReasons(table), limits, now, DynamoNotReady(table))


def status_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables")] = False,
    table_name: Annotated[str | None, typer.Option("--table", help="State table (default: $CARPOOL_TABLE)")] = None,
    kubeconfig: Annotated[Path | None, typer.Option(
        "--kubeconfig", help="kubeconfig of the cluster, for its NodePools' limits (default: $KUBECONFIG, "
        "else ~/.kube/config)")] = None,
    context: Annotated[str | None, typer.Option("--context", help="kubeconfig context (default: its current one)")] = None,
) -> None:
    """Show carpool's claims, pool usage against limits, node classes that refused a launch, pending pods'
    reasons, unavailable offerings and learned capacity, from its deployed state."""
    table = table_name or os.environ.get("CARPOOL_TABLE", "")
    if not table:
        raise _fail("no state table: pass --table or set CARPOOL_TABLE")
    limits, warnings = _limits_of_the_cluster(kubeconfig, context)
    for warning in warnings:
        Console(stderr=True, soft_wrap=True).print(warning, markup=False, highlight=False, style="yellow")
    try:
        found = read_deployed(table, limits, datetime.now(UTC))
    except Exception as e:  # noqa: BLE001 - any AWS or config failure is one line, not a traceback
        raise _fail(f"cannot read carpool's state ({table}): {type(e).__name__}: {e}") from e
    if as_json:
        typer.echo(found.model_dump_json(by_alias=True, indent=2))
        return
    console().print(render(found))


def _limits_of_the_cluster(kubeconfig: Path | None,
                           context: str | None) -> tuple[dict[str, dict[str, int] | None], list[str]]:
    """The NodePools' limits, or none and the reason the cluster could not be read (status still shows
    what the table holds)."""
    from carpool.adapters.k8s.kubeconfig import KubeconfigError, karpenter_objects

    try:
        return cluster_limits(karpenter_objects(kubeconfig, context))
    except KubeconfigError as e:
        return {}, [f"warning: limits not shown: {e}"]
    except Exception as e:  # noqa: BLE001 - unreachable, forbidden, CRDs not installed: one line, not a traceback
        return {}, [f"warning: limits not shown: cannot list the cluster's NodePools ({type(e).__name__}: {e})"]


def register(app: typer.Typer) -> None:
    """Attach this command to the CLI app."""
    app.command("status")(status_command)
