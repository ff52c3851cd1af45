"""`carpool capacity`: what the learned capacity cache holds.

Every registered node teaches carpool how much memory its (instance type, AMI) really has; this command
shows those records from the state table (`CARPOOL_TABLE`, or `--table`), so you can see why a type is
sized the way it is and how far the learned values are from the 7.5% default. `--json` prints camelCase
rows (memory in MiB, cpu in millicores) and nothing else on stdout.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from rich import box
from rich.console import Console
from rich.table import Table

from carpool.resources import CPU, MEMORY, PODS
from carpool.state.models import CapacityRecord

MIB = 1024 * 1024
EXIT_USAGE = 2


class CapacityRow(BaseModel):
    """One cache record as shown to users."""

    model_config = ConfigDict(populate_by_name=True, frozen=True)

    instance_type: str = Field(alias="instanceType")
    image_id: str = Field(alias="imageId")
    ami_family: str = Field(alias="amiFamily")
    memory_mib: int | None = Field(alias="memoryMiB")
    allocatable_memory_mib: int | None = Field(alias="allocatableMemoryMiB")
    allocatable_cpu_millis: int | None = Field(alias="allocatableCpuMillis")
    allocatable_pods: int | None = Field(alias="allocatablePods")
    samples: int
    source: str = "learned"
    first_seen: datetime = Field(alias="firstSeen")
    last_seen: datetime = Field(alias="lastSeen")
    age_seconds: int = Field(alias="ageSeconds", description="time since the last observation")
    expires_at: datetime = Field(alias="expiresAt")


_ROWS = TypeAdapter(list[CapacityRow])


def _mib(value: int | None) -> int | None:
    return None if value is None else value // MIB


def row(record: CapacityRecord, now: datetime) -> CapacityRow:
    return CapacityRow(
        instance_type=record.instance_type,
        image_id=record.image_id,
        ami_family=record.ami_family,
        memory_mib=_mib(record.capacity.get(MEMORY)),
        allocatable_memory_mib=_mib(record.allocatable.get(MEMORY)),
        allocatable_cpu_millis=record.allocatable.get(CPU),
        allocatable_pods=record.allocatable.get(PODS),
        samples=record.samples,
        first_seen=record.first_seen,
        last_seen=record.last_seen,
        age_seconds=max(0, int((now - record.last_seen).total_seconds())),
        expires_at=record.expires_at,
    )


def rows(records: Iterable[CapacityRecord], now: datetime) -> list[CapacityRow]:
    return [row(r, now) for r in sorted(records, key=lambda r: (r.instance_type, r.image_id))]


def _age(seconds: int) -> str:
    delta = timedelta(seconds=seconds)
    if delta.days:
        return f"{delta.days}d"
    hours, rest = divmod(delta.seconds, 3600)
    return f"{hours}h" if hours else f"{rest // 60}m"


def _cell(value: int | None) -> str:
    return "-" if value is None else str(value)


def table(items: list[CapacityRow]) -> Table:
    t = Table(box=box.SIMPLE_HEAD, title="learned capacity")
    for name, justify in (
        ("instance type", "left"), ("image", "left"), ("ami family", "left"), ("memory MiB", "right"),
        ("allocatable MiB", "right"), ("alloc cpu m", "right"), ("pods", "right"), ("samples", "right"),
        ("source", "left"), ("age", "right"),
    ):  # fmt: skip
        t.add_column(name, justify=justify)  # type: ignore[arg-type]
    for r in items:
        t.add_row(
            r.instance_type, r.image_id, r.ami_family or "-", _cell(r.memory_mib), _cell(r.allocatable_memory_mib),
            _cell(r.allocatable_cpu_millis), _cell(r.allocatable_pods), str(r.samples), r.source,
            _age(r.age_seconds),
        )  # fmt: skip
    return t


def _fail(message: str) -> typer.Exit:
    Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {message}", highlight=False)
    return typer.Exit(EXIT_USAGE)


def capacity(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table")] = False,
    table_name: Annotated[
        str | None, typer.Option("--table", help="State table (default: $CARPOOL_TABLE)")
    ] = None,
) -> None:
    """List the learned capacity cache (memory each instance type and AMI really reported)."""
    name = table_name or os.environ.get("CARPOOL_TABLE", "")
    if not name:
        raise _fail("no state table: pass --table or set CARPOOL_TABLE")
    from carpool.adapters.aws.dynamodb.learned_capacity import DynamoCapacityCache  # boto3 only when needed

    now = datetime.now(UTC)
    try:
        records = DynamoCapacityCache(name).all(now).values()
    except Exception as e:  # noqa: BLE001 - any AWS failure becomes a one-line error, not a traceback
        raise _fail(f"cannot read {name}: {e}") from e
    items = rows(records, now)
    if as_json:
        typer.echo(_ROWS.dump_json(items, by_alias=True, indent=2).decode())
        return
    console = Console(soft_wrap=True)
    if not console.is_terminal:  # piped or captured: do not squeeze the table into 80 columns
        console = Console(soft_wrap=True, width=160)
    if not items:
        console.print("the learned capacity cache is empty (no node has registered yet)")
        return
    console.print(table(items))


def register(app: typer.Typer) -> None:
    """Attach this command to the CLI app."""
    app.command("capacity")(capacity)
