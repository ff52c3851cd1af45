"""The files a command reads or writes, checked before the command does any work.

Why: a command handed a missing file, a directory, a binary or an unwritable report path must say so in
one line and exit 2 (the usage-error code every command uses), not end in a traceback, and not after a
ten-minute simulation whose report then cannot be written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer

#: the exit code of a bad input, as for typer's own usage errors
EXIT_INVALID = 2


class InputFileError(ValueError):
    """A file a command needs cannot be used; the message names the option and the file."""


def fail(message: str) -> typer.Exit:
    """Print `error: message` on stderr; the `typer.Exit(2)` to raise."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=EXIT_INVALID)


def read_text(path: Path, what: str) -> str:
    """The UTF-8 text of `path`; `InputFileError` when it is missing, a directory, binary or empty."""
    if path.is_dir():
        raise InputFileError(f"{what} {path}: is a directory, not a file")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputFileError(f"{what} {path}: no such file") from None
    except OSError as exc:
        raise InputFileError(f"{what} {path}: cannot read ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = "\x00"
    if "\x00" in text:
        raise InputFileError(f"{what} {path}: not a text file (binary content)")
    if not text.strip():
        raise InputFileError(f"{what} {path}: the file is empty")
    return text


def read_yaml(path: Path, what: str) -> Any:
    """The one YAML document of `path`; `InputFileError` with the line of the first syntax error."""
    import yaml

    text = read_text(path, what)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputFileError(f"{what} {path}: not valid YAML: {problem}{where}") from None


def writable_file(path: Path, what: str) -> None:
    """`InputFileError` unless `path` can be written as a file (checked before the work that fills it)."""
    if path.is_dir():
        raise InputFileError(f"{what} {path}: is a directory; give a file name, e.g. {path / 'report.html'}")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise InputFileError(f"{what} {path}: the directory {parent} does not exist")
    existed = path.exists()
    if existed and not os.access(path, os.W_OK) or not existed and not os.access(parent, os.W_OK):
        raise InputFileError(f"{what} {path}: not writable")
    try:  # permissions are not the whole story (root, read-only or virtual file systems): open it
        with path.open("a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise InputFileError(f"{what} {path}: not writable ({exc.strerror or exc})") from None
    if not existed:
        path.unlink(missing_ok=True)
