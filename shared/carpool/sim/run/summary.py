"""The terminal summary of a run: did the pods get scheduled, on which nodes, at what cost.

Kept short on purpose; `--report` has the charts and `--json` everything.
"""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table

from carpool.sim.run.result import SimResult


def render(result: SimResult) -> Group:
    """A rich renderable: headline, nodes per pool and type, capacity errors, time to capacity, carpool's own
    AWS cost and expectations."""
    pods = result.pods
    ok = pods.pending == 0
    headline = (f"[bold]{result.scenario}[/]: [{'green' if ok else 'red'}]{pods.scheduled}/{pods.total} pods "
                f"scheduled[/], {len(result.instances)} nodes running, hourly cost [bold]${result.hourly_cost:.3f}[/]"
                f"  [dim](slowest pod {pods.max_unbound_seconds:.0f}s, {result.duration_seconds:.0f}s simulated "
                f"in {result.wall_seconds:.1f}s)[/]")
    table = Table(title="Nodes per pool", show_lines=False)
    for col in ("pool", "instance type", "nodes", "$/h each"):
        table.add_column(col, justify="right" if col in ("nodes", "$/h each") else "left")
    prices = {(i.node_pool, i.instance_type): i.hourly_price for i in result.instances}
    for pool, by_type in sorted(result.types_by_pool().items()):
        for itype, count in sorted(by_type.items(), key=lambda kv: (-kv[1], kv[0])):
            table.add_row(pool, itype, str(count), f"{prices.get((pool, itype), 0.0):.4f}")
    parts: list[RenderableType] = [headline, table]
    if result.launch_failures:
        types = sorted({f.instance_type for f in result.launch_failures})
        parts.append(f"[yellow]{len(result.launch_failures)} capacity errors[/] from EC2 "
                     f"({', '.join(types[:6])}{'...' if len(types) > 6 else ''}); carpool fell back.")
    never = [i for i in result.launches if not i.joined]
    if never:
        parts.append(f"[yellow]{len(never)} launched instance(s) never joined[/] "
                     f"({', '.join(sorted({i.instance_type for i in never})[:6])}).")
    if any(result.dead_letters.values()):
        parts.append(f"[red]dead-letter queues not empty:[/] {result.dead_letters}")
    if result.time_to_capacity.pods:
        parts.append(time_to_capacity_table(result))
    parts.append(own_cost_line(result))
    for name, passed in result.expectations.items():
        parts.append(f"expect {name}: {'[green]held[/]' if passed else '[red]did not hold[/]'}")
    return Group(*parts)


def time_to_capacity_table(result: SimResult) -> Table:
    """How long pending pods waited, step by step (the launch steps: pods that went to a new node)."""
    ttc = result.time_to_capacity
    table = Table(title=f"Time to capacity (s): {ttc.pods} pods waited, {ttc.through_new_nodes} for a new node")
    for col in ("step", "pods", "p50", "p99", "max"):
        table.add_column(col, justify="left" if col == "step" else "right")
    for label, d in ttc.steps():
        table.add_row(label, str(d.count), f"{d.p50:g}", f"{d.p99:g}", f"{d.max:g}")
    return table


def own_cost_line(result: SimResult) -> str:
    """carpool's own AWS bill at the run's rate, with its largest items first."""
    cost = result.own_cost
    items = sorted(cost.services.items(), key=lambda kv: -kv[1])
    return (f"carpool's own AWS cost at this rate: [bold]${cost.monthly_usd:.2f}[/] a month ("
            + ", ".join(f"{k} ${v:.2f}" for k, v in items) + ")")


def show(result: SimResult, console: Console | None = None) -> None:
    (console or Console()).print(Panel(render(result), title="carpool simulate", expand=False))
