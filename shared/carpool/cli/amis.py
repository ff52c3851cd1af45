"""`carpool amis` (not yet implemented)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Attach this command to the CLI app."""
