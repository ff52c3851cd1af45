"""The `carpool` commands the README shows run as shown, on files the repository has.

A reader copies these first; a command naming a file the repository lacks, or printing something else than
the README says, is the first thing that makes them stop trusting the rest. Two checks:

- every `.venv/bin/carpool ...` line in a code block names only input files that exist;
- every ```` ```console ```` block is a transcript: each `$ .venv/bin/carpool ...` command is run as a user runs
  it (typer's CliRunner on the real command group, from the repository root) and must print the lines shown
  under it, in order. A line `...` stands for lines left out, a line ending in `...` for the rest of that
  line. A transcript whose last line is `N error(s)` exits 2, the others 0.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from carpool.cli import app

REPO = Path(__file__).resolve().parents[3]
README = REPO / "README.md"
CARPOOL = ".venv/bin/carpool"
#: options whose value is a file carpool writes, not one it reads
OUTPUTS = {"--report"}
ELLIPSIS = "..."


@dataclass(frozen=True)
class Transcript:
    command: list[str]
    shown: list[str]


def code_blocks(markdown: str) -> list[tuple[str, list[str]]]:
    """(language, lines) of every fenced block."""
    blocks: list[tuple[str, list[str]]] = []
    language: str | None = None
    lines: list[str] = []
    for line in markdown.splitlines():
        fence = re.match(r"^\s*```(\w*)\s*$", line)
        if fence and language is None:
            language, lines = fence.group(1), []
        elif fence and language is not None:
            blocks.append((language, lines))
            language = None
        elif language is not None:
            lines.append(line)
    return blocks


def carpool_commands(markdown: str) -> list[list[str]]:
    """The arguments of every carpool command line in a code block (a console block's `$ ` prompt dropped)."""
    found = []
    for _language, lines in code_blocks(markdown):
        for line in lines:
            text = line.strip().removeprefix("$ ")
            if text.startswith(CARPOOL + " "):
                found.append(shlex.split(text, comments=True)[1:])
    return found


def transcripts(markdown: str) -> list[Transcript]:
    out: list[Transcript] = []
    for language, lines in code_blocks(markdown):
        if language != "console":
            continue
        for line in lines:
            if line.startswith("$ "):
                argv = shlex.split(line[2:])
                assert argv[0] == CARPOOL, f"README console block runs {argv[0]}, not carpool: {line}"
                out.append(Transcript(argv[1:], []))
            elif line.strip():
                assert out, f"README console block has output before any command: {line}"
                out[-1].shown.append(line)
    return out


def _same(shown: str, printed: str) -> bool:
    """Equal but for runs of spaces (table padding); a shown line ending in `...` is a prefix."""
    shown, printed = " ".join(shown.split()), " ".join(printed.split())
    if shown.endswith(ELLIPSIS) and shown != ELLIPSIS:
        return printed.startswith(shown[: -len(ELLIPSIS)].rstrip())
    return shown == printed


def mismatch(shown: list[str], printed: list[str]) -> str | None:
    """Why ``printed`` is not what ``shown`` shows (None when it is): lines in order, `...` skipping any."""
    printed = [line for line in printed if line.strip()]
    at, skipping = 0, False
    for line in shown:
        if line.strip() == ELLIPSIS:
            skipping = True
            continue
        while skipping and at < len(printed) and not _same(line, printed[at]):
            at += 1
        if at >= len(printed) or not _same(line, printed[at]):
            return f"expected {line.strip()!r}, got {printed[at].strip() if at < len(printed) else 'the end'!r}"
        at, skipping = at + 1, False
    if not skipping and at < len(printed):
        return f"printed more than shown, from {printed[at].strip()!r}"
    return None


def test_mismatch_reads_ellipses_and_padding() -> None:
    printed = ["", "  a   b  ", "c 1", "d", "e", "total in 5 ms"]
    assert mismatch(["a b", "c 1", ELLIPSIS, "total in ..."], printed) is None
    assert mismatch(["a b", "d"], printed) == "expected 'd', got 'c 1'"
    assert mismatch(["a b", "c 1"], printed) == "printed more than shown, from 'd'"
    assert mismatch(["a b", ELLIPSIS, "f"], printed) == "expected 'f', got 'the end'"


def test_every_file_a_readme_command_reads_exists() -> None:
    commands = carpool_commands(README.read_text())
    assert len(commands) >= 5, commands  # validate, plan, amis, max-pods, simulate at least
    missing = [
        f"carpool {' '.join(argv)}: {arg}"
        for argv in commands
        for before, arg in zip(["", *argv], argv, strict=False)
        if before not in OUTPUTS and re.search(r"\.(ya?ml|json)$", arg) and not (REPO / arg).is_file()
    ]
    assert not missing, missing


TRANSCRIPTS = transcripts(README.read_text())


@pytest.mark.parametrize("transcript", TRANSCRIPTS, ids=[" ".join(t.command[:2]) for t in TRANSCRIPTS])
def test_a_readme_transcript_is_what_the_command_prints(
    transcript: Transcript, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(app, transcript.command)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    fails = bool(re.fullmatch(r"\d+ errors?", transcript.shown[-1].strip()))
    assert result.exit_code == (2 if fails else 0), result.output
    problem = mismatch(transcript.shown, result.output.splitlines())
    assert problem is None, f"carpool {' '.join(transcript.command)}: {problem}\n{result.output}"


def test_the_readme_shows_both_a_passing_and_a_failing_validate() -> None:
    validates = [t for t in TRANSCRIPTS if t.command[0] == "validate"]
    assert {t.shown[-1].strip().endswith("errors") for t in validates} == {True, False}
