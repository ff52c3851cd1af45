"""The `carpool` command line. Each command lives in its own module with a `register(app)` function."""

from __future__ import annotations

import typer

from carpool.cli import amis, capacity, max_pods, plan, simulate, validate

app = typer.Typer(
    name="carpool",
    help="Serverless Kubernetes node autoscaler for Amazon EKS (Karpenter v1 compatible).",
    no_args_is_help=True,
    add_completion=False,
)

for _module in (validate, plan, max_pods, amis, capacity, simulate):
    _module.register(app)


def main() -> None:  # pragma: no cover - console entry point
    app()
