"""`carpool simulate SCENARIO`: run carpool's real handlers against local AWS and a simulated cluster.

This is how users try carpool without an AWS account, and how each capability is proven end to end.
`--json` prints the machine-readable result (and nothing else on stdout), `--report` writes a
self-contained HTML page, `--quiet` drops the progress bar and the summary. All three state what carpool
itself would cost on AWS per month at the run's rate (`ownCost`: per service, Lambda per function).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from carpool.cli import files
from carpool.sim.run.scenario import ScenarioError, load_scenario


def register(app: typer.Typer) -> None:
    """Attach this command to the CLI app."""
    app.command("simulate")(simulate)


def simulate(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML (see examples/).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")] = False,
    report: Annotated[Path | None, typer.Option("--report", help="Write a self-contained HTML report here.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary.")] = False,
    status: Annotated[bool, typer.Option(
        "--status", help="After the summary, what `carpool status` shows on the simulation's state.")] = False,
) -> None:
    """Simulate a scenario: pods, NodePools and capacity errors played against carpool's Lambdas."""
    from carpool.sim.run import report as report_page
    from carpool.sim.run import summary
    from carpool.sim.run.runner import simulate as run

    err = Console(stderr=True)
    try:
        files.read_text(scenario, "scenario")  # missing, a directory, binary: said in one line
        if report is not None:
            files.writable_file(report, "--report")  # before the run, not after it
    except files.InputFileError as exc:
        raise files.fail(str(exc)) from None
    try:
        sc = load_scenario(scenario)
    except ScenarioError as exc:  # one line a problem, each naming the file and the field
        for line in str(exc).splitlines():
            typer.echo(f"error: {line}", err=True)
        raise typer.Exit(files.EXIT_INVALID) from None
    show_progress = not quiet and sys.stderr.isatty()
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed:.0f}/"
                  "{task.total:.0f}s simulated"), TimeElapsedColumn(), console=err, disable=not show_progress,
                  transient=True) as bar:
        task = bar.add_task(sc.name, total=sc.duration)
        result = run(sc, progress=lambda now, _total: bar.update(task, completed=now))
    if report is not None:
        report_page.write(result, str(report))
        if not quiet and not as_json:
            err.print(f"report written to {report}")
    if as_json:
        sys.stdout.write(json.dumps(result.to_json_dict(), indent=2) + "\n")
    elif not quiet:
        summary.show(result, Console())
    if status and not as_json and result.status is not None:
        from carpool.cli.status import console, render

        console().print(render(result.status))
    if result.expectations and not all(result.expectations.values()):
        raise typer.Exit(1)
