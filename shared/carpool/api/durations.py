"""Karpenter's duration strings ("720h", "30s", "1h30m", "Never") as whole seconds.

Karpenter's CRDs only accept integer hours, minutes and seconds (not Go's full syntax such as "1.5h" or
"500ms"), so carpool accepts exactly that and reports anything else the way the API server would.
"""

from __future__ import annotations

import re
from typing import Annotated, Final

from pydantic import AfterValidator

__all__ = ["NEVER", "Duration", "DurationError", "NillableDuration", "format_duration", "parse_duration"]

NEVER: Final = "Never"
_DURATION = re.compile(r"^(\d+[hms])+$")
_PART = re.compile(r"(\d+)([hms])")
_SECONDS = {"h": 3600, "m": 60, "s": 1}


class DurationError(ValueError):
    """A duration string Karpenter would reject."""


def parse_duration(text: str) -> int | None:
    """Seconds in `text`, or None for "Never". Raises DurationError for anything else."""
    if text == NEVER:
        return None
    if not isinstance(text, str) or not _DURATION.match(text):
        raise DurationError(
            f"invalid duration {text!r}: expected hours/minutes/seconds such as '30s', '720h', '1h30m', or 'Never'"
        )
    return sum(int(n) * _SECONDS[unit] for n, unit in _PART.findall(text))


def format_duration(seconds: int | None) -> str:
    """The shortest Karpenter spelling of `seconds` ("Never" for None): 5400 -> "1h30m"."""
    if seconds is None:
        return NEVER
    if seconds == 0:
        return "0s"
    out = []
    for unit, size in _SECONDS.items():
        n, seconds = divmod(seconds, size)
        if n:
            out.append(f"{n}{unit}")
    return "".join(out)


def _finite(text: str) -> str:
    if parse_duration(text) is None:
        raise DurationError("'Never' is not allowed here; give a duration such as '30s'")
    return text


def _nillable(text: str) -> str:
    parse_duration(text)
    return text


#: A duration string that must be finite (`terminationGracePeriod`).
Duration = Annotated[str, AfterValidator(_finite)]
#: A duration string that may be "Never" (`expireAfter`, `consolidateAfter`).
NillableDuration = Annotated[str, AfterValidator(_nillable)]
