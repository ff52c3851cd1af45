"""`carpool max-pods`: how many pods, and how much cpu/memory, a node of each instance type offers.

Works offline from the shipped catalog snapshot. Compare with Karpenter, which ignores prefix
delegation: `carpool max-pods m5.large --prefix-delegation` says 110 where Karpenter assumes 29 (the
value AWS's max-pods-calculator.sh gives). kube-reserved memory follows the max pods shown, because
carpool's user data sets both: a small type with a high max pods keeps little memory for pods.
"""

from __future__ import annotations

import enum
from typing import Annotated

import typer
from pydantic import BaseModel, ConfigDict, TypeAdapter
from pydantic.alias_generators import to_camel
from rich import box
from rich.console import Console
from rich.table import Table

from carpool import amifamily
from carpool.catalog import Catalog, SnapshotNotFound, UnknownInstanceType
from carpool.catalog.instance_type import InstanceType
from carpool.quantity import MIB
from carpool.resources import CPU, MEMORY, PODS, Resources
from carpool.sizing import KubeletSettings, NetworkSettings, NodeSize, size_node
from carpool.sizing.reserved import BASE_RESERVED_MIB, MIB_PER_POD

EXIT_USAGE = 2


class FamilyChoice(enum.StrEnum):
    """The `--ami-family` choices: sizing's kinds (`carpool.amifamily`), Windows Server versions as one."""

    al2023 = amifamily.AL2023.kind
    bottlerocket = amifamily.BOTTLEROCKET.kind
    al2 = amifamily.AL2.kind
    windows = amifamily.WINDOWS2022.kind


#: Families whose user data carpool writes (stating max pods and kube-reserved).
RENDERED_FAMILIES = frozenset({FamilyChoice.al2023.value, FamilyChoice.bottlerocket.value, FamilyChoice.al2.value})


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)


class ReservedOut(_Model):
    cpu_millis: int
    memory_mi_b: int


class AllocatableOut(_Model):
    cpu_millis: int
    memory_mi_b: int
    pods: int


class MaxPodsOut(_Model):
    """One row of `--json` output (camelCase keys, memory in MiB, cpu in millicores)."""

    instance_type: str
    arch: str
    vcpus: int
    memory_mi_b: int
    ami_family: str
    max_pods: int
    eni_limited_pods: int
    capacity: AllocatableOut
    kube_reserved: ReservedOut
    system_reserved: ReservedOut
    eviction: ReservedOut
    allocatable: AllocatableOut
    notes: list[str]


_ROWS = TypeAdapter(list[MaxPodsOut])


def _reserved(rl: Resources) -> ReservedOut:
    return ReservedOut(cpu_millis=rl.get(CPU, 0), memory_mi_b=rl.get(MEMORY, 0) // MIB)


def _allocatable(rl: Resources) -> AllocatableOut:
    return AllocatableOut(cpu_millis=rl.get(CPU, 0), memory_mi_b=rl.get(MEMORY, 0) // MIB, pods=rl.get(PODS, 0))


def row(it: InstanceType, ami_family: str, size: NodeSize) -> MaxPodsOut:
    """The output record for one sized type."""
    return MaxPodsOut(
        instance_type=it.name,
        arch=it.arch,
        vcpus=it.vcpus,
        memory_mi_b=it.memory_mib,
        ami_family=ami_family,
        max_pods=size.max_pods,
        eni_limited_pods=size.eni_limited_pods,
        capacity=_allocatable(size.capacity),
        kube_reserved=_reserved(size.kube_reserved),
        system_reserved=_reserved(size.system_reserved),
        eviction=_reserved(size.eviction),
        allocatable=_allocatable(size.allocatable),
        notes=list(size.notes),
    )


def _table(rows: list[MaxPodsOut]) -> Table:
    table = Table(title="Max pods and allocatable (* see notes)", title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("type", no_wrap=True)
    for header in ("vCPU", "memory", "ENI pods", "max pods", "kube-reserved", "allocatable"):
        table.add_column(header, justify="right", no_wrap=True)
    for r in rows:
        table.add_row(
            r.instance_type + ("*" if r.notes else ""),
            str(r.vcpus),
            f"{r.memory_mi_b}Mi",
            str(r.eni_limited_pods),
            str(r.max_pods),
            f"{r.kube_reserved.cpu_millis}m {r.kube_reserved.memory_mi_b}Mi",
            f"{r.allocatable.cpu_millis}m {r.allocatable.memory_mi_b}Mi",
        )
    return table


#: Printed under the table: why memory shrinks as max pods grows, which surprises people on small types.
RESERVATION_NOTE = (
    f"kube-reserved memory is {BASE_RESERVED_MIB}Mi + {MIB_PER_POD}Mi x max pods, for the max pods carpool's user "
    "data sets (AL2023, AL2 and Bottlerocket alike, whatever the AMI's own default), so small types lose room "
    "to a high max pods; lower kubelet.maxPods to trade pods for memory."
)


def _print(rows: list[MaxPodsOut], ami_family: str) -> None:
    """The table, then each type's notes (too long for a table cell)."""
    console = Console(soft_wrap=True)
    if not console.is_terminal:  # piped: rich would assume 80 columns and truncate the numbers
        console = Console(soft_wrap=True, width=120)
    console.print(_table(rows))
    if ami_family in RENDERED_FAMILIES:
        console.print(RESERVATION_NOTE, highlight=False, markup=False)
    for r in rows:
        for note in r.notes:
            console.print(f"* {r.instance_type}: {note}", highlight=False, markup=False)


def _fail(message: str) -> typer.Exit:
    Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {message}", highlight=False)
    return typer.Exit(code=EXIT_USAGE)


#: kubelet.maxPods and kubelet.podsPerCore are int32 with minimum 0 in Karpenter's EC2NodeClass CRD; the
#: reserved ENIs (Karpenter's RESERVED_ENIS setting) are an int that may not be negative
INT32_MAX = 2**31 - 1


def _lookup(catalog: Catalog, names: list[str]) -> list[InstanceType]:
    found, unknown = [], []
    for name in names:
        try:
            found.append(catalog.require(name))
        except UnknownInstanceType as exc:
            unknown.append(str(exc))
    if unknown:
        raise _fail("; ".join(unknown))
    return found


def max_pods(
    instance_types: Annotated[list[str], typer.Argument(metavar="TYPE...", help="Instance types, e.g. m5.large c6g.medium")],
    prefix_delegation: Annotated[bool, typer.Option("--prefix-delegation", help="VPC CNI prefix delegation on")] = False,
    custom_networking: Annotated[bool, typer.Option("--custom-networking", help="VPC CNI custom networking on")] = False,
    reserved_enis: Annotated[int, typer.Option("--reserved-enis", min=0, max=INT32_MAX, help="ENIs not used for pods")] = 0,
    max_pods_override: Annotated[int | None, typer.Option(
        "--max-pods", min=0, max=INT32_MAX, help="kubelet.maxPods override")] = None,
    pods_per_core: Annotated[int | None, typer.Option(
        "--pods-per-core", min=0, max=INT32_MAX, help="kubelet.podsPerCore")] = None,
    ami_family: Annotated[FamilyChoice, typer.Option("--ami-family", case_sensitive=False)] = FamilyChoice.al2023,
    region: Annotated[str, typer.Option("--region", help="Catalog region (offline snapshot)")] = "us-east-1",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table")] = False,
) -> None:
    """Max pods, kube-reserved and allocatable per instance type (offline, from the shipped catalog)."""
    try:
        catalog = Catalog.snapshot(region)
    except SnapshotNotFound as exc:
        raise _fail(str(exc)) from exc
    types = _lookup(catalog, instance_types)
    network = NetworkSettings(prefix_delegation, custom_networking, reserved_enis)
    kubelet = KubeletSettings(max_pods=max_pods_override, pods_per_core=pods_per_core)
    rows = [row(it, ami_family.value, size_node(it, ami_family.value, network, kubelet)) for it in types]
    if as_json:
        typer.echo(_ROWS.dump_json(rows, by_alias=True, indent=2).decode())
        return
    _print(rows, ami_family.value)


def register(app: typer.Typer) -> None:
    """Attach this command to the CLI app."""
    app.command("max-pods")(max_pods)
