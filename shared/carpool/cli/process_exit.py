"""Ending the `carpool` process without freeing what a command built.

Why: `carpool plan` on 20,000 pods builds millions of small objects (validated pods, scheduler inputs,
the plan). Freeing them one by one when the command returns, and then tearing down every imported
module, took longer than writing the plan (about half a second at 20,000 pods). A command that only
prints its result and ends asks for a quick exit by handing its objects to `keep_until_exit`; the
console entry point then flushes the output streams and ends the process with the command's exit code,
without the teardown.

Only the console entry point ends the process: a command run in-process (tests, `CliRunner`) returns
as usual, and nothing is kept unless the entry point armed the quick exit first.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import NoReturn

_state: dict[str, bool] = {"armed": False}
_kept: list[object] = []


def keep_until_exit(*objects: object) -> None:
    """Keep `objects` alive until the process ends (a no-op unless `run` armed the quick exit)."""
    if _state["armed"]:
        _kept.extend(objects)


def run(command: Callable[[], object]) -> None:
    """Run the command line; when a command asked for the quick exit, end the process right after it."""
    _state["armed"] = True
    try:
        command()
    except SystemExit as exc:
        if _kept:
            _exit_now(exc.code)
        raise
    finally:
        _state["armed"] = False
    if _kept:
        _exit_now(0)


def _exit_now(code: object) -> NoReturn:
    """What the interpreter does with a `SystemExit` code, minus freeing objects and modules."""
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:
        print(code, file=sys.stderr)
        status = 1
    logging = sys.modules.get("logging")
    if logging is not None:
        logging.shutdown()  # what the interpreter's exit handlers would flush
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe or stream: nothing left to deliver
            stream.flush()
    os._exit(status)
