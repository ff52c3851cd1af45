"""The `carpool` command line. Each command lives in its own module with a `register(app)` function.

Commands are imported only when invoked: `carpool plan` must not pay for the simulator, the AMI tooling or
the capacity table at start-up (together about 300 ms of imports). `carpool --help` still lists every
command, which does import them all.

A usage error (an option out of its range, a missing option, an unknown command) is one line on stderr
naming the option, and exit 2, like every other bad input (`files.fail`), not typer's boxed usage text.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import typer
from typer._click.exceptions import NoArgsIsHelpError, UsageError
from typer.core import TyperGroup

if TYPE_CHECKING:  # typer ships its own click; the `click` package is not needed at run time
    from typer._click import Command, Context

#: Command name -> the module that registers it, in the order `--help` lists them.
COMMANDS: dict[str, str] = {
    "validate": "carpool.cli.validate",
    "apply": "carpool.cli.apply",
    "plan": "carpool.cli.plan",
    "max-pods": "carpool.cli.max_pods",
    "amis": "carpool.cli.amis",
    "capacity": "carpool.cli.capacity",
    "simulate": "carpool.cli.simulate",
    "status": "carpool.cli.status",
    "release-finalizers": "carpool.cli.release_finalizers",
}


class LazyCommands(TyperGroup):
    """A command group that imports a command's module the first time the command is looked up."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loaded: dict[str, Command] = {}

    def list_commands(self, ctx: Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        module = COMMANDS.get(cmd_name)
        if module is None:
            return None
        if cmd_name not in self._loaded:
            single = typer.Typer()
            importlib.import_module(module).register(single)
            command = typer.main.get_command(single)
            command.name = cmd_name
            self._loaded[cmd_name] = command
        return self._loaded[cmd_name]

    def invoke(self, ctx: Context) -> Any:
        """Run the command; a usage error of its options or arguments becomes one line and exit 2."""
        try:
            return super().invoke(ctx)
        except NoArgsIsHelpError:
            raise  # the help text, as typer shows it
        except UsageError as exc:
            from carpool.cli import files

            where = exc.ctx.command_path if exc.ctx is not None else ctx.command_path
            message = exc.format_message().replace("Value error, ", "").rstrip(".")
            raise files.fail(f"{where}: {message} (see {where} --help)") from None


app = typer.Typer(
    name="carpool",
    cls=LazyCommands,
    help="Serverless Kubernetes node autoscaler for Amazon EKS (Karpenter v1 compatible).",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _carpool() -> None:
    """Serverless Kubernetes node autoscaler for Amazon EKS (Karpenter v1 compatible)."""


def main() -> None:  # pragma: no cover - console entry point
    from carpool.cli import process_exit

    process_exit.run(app)
