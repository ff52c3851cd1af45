"""A small TOML writer for Bottlerocket settings (the stdlib reads TOML but cannot write it).

It covers what `tomllib.loads` can hand back for Bottlerocket user data: nested tables, strings,
integers, floats, booleans, dates/times, arrays (inline, nested) and arrays of tables. Output is
deterministic: keys keep the order of the dicts given, scalar keys before sub-tables, and a table that
holds only sub-tables gets no header of its own (`[settings.kubernetes]`, not `[settings]` first).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def dumps(doc: Mapping[str, Any]) -> str:
    """The TOML text of `doc` (a dict as `tomllib.loads` returns it)."""
    out: list[str] = []
    _table(out, (), doc)
    return "\n".join(out).strip("\n") + "\n"


def key(k: str) -> str:
    return k if _BARE_KEY.match(k) else string(k)


def string(s: str) -> str:
    chars = []
    for ch in s:
        if ch in _ESCAPES:
            chars.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            chars.append(f"\\u{ord(ch):04X}")
        else:
            chars.append(ch)
    return '"' + "".join(chars) + '"'


def value(v: Any) -> str:
    """An inline TOML value."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return string(v)
    if isinstance(v, dt.datetime | dt.date | dt.time):
        return v.isoformat()
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{key(k)} = {value(x)}" for k, x in v.items()) + " }" if v else "{}"
    if isinstance(v, Sequence):
        return "[" + ", ".join(value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _is_table_array(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, Mapping) for x in v)


def _table(out: list[str], path: tuple[str, ...], table: Mapping[str, Any], header: str = "[{}]") -> None:
    scalars = [(k, v) for k, v in table.items() if not isinstance(v, Mapping) and not _is_table_array(v)]
    subtables = [(k, v) for k, v in table.items() if isinstance(v, Mapping)]
    arrays = [(k, v) for k, v in table.items() if _is_table_array(v)]
    needs_header = path and (scalars or not (subtables or arrays) or header == "[[{}]]")
    if needs_header:
        out.append("")
        out.append(header.format(".".join(key(p) for p in path)))
    out.extend(f"{key(k)} = {value(v)}" for k, v in scalars)
    for k, sub in subtables:
        _table(out, (*path, k), sub)
    for k, items in arrays:
        for item in items:
            _table(out, (*path, k), item, "[[{}]]")
