"""Turn pydantic validation errors into what a Kubernetes user can act on: a field path and a reason.

pydantic reports locations as tuples (`('spec', 'template', 'spec', 'requirements', 0, 'operator')`)
with terse messages. Users think in YAML paths (`spec.template.spec.requirements[0].operator`) written in
camelCase, and want "unknown field 'requirments'; did you mean 'requirements'?" rather than "Extra inputs
are not permitted". The path is rebuilt by walking the model classes along the location, so list
indices render as `[0]` and map keys (label keys often contain dots) as `[key]`.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

__all__ = ["describe", "describe_all", "field_path"]


def structural_type(tp: Any) -> Any:
    """Strip Annotated[...] and Optional[...] so the structural type is visible."""
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp = get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            members = [a for a in get_args(tp) if a is not type(None)]
            if len(members) != 1:
                return tp
            tp = members[0]
        else:
            return tp


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _model_fields(model: type[BaseModel]) -> dict[str, tuple[str, Any]]:
    """(YAML spelling, annotation) by every spelling a location may use (alias, or attribute name when
    pydantic reports a defaulted field by name)."""
    out: dict[str, tuple[str, Any]] = {}
    for name, info in model.model_fields.items():
        out[info.alias or name] = (info.alias or name, info.annotation)
        out.setdefault(name, (info.alias or name, info.annotation))
    return out


def _aliases(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def _walk(model: type[BaseModel] | None, loc: Sequence[str | int]) -> tuple[str, list[str] | None]:
    """(rendered path, field names known where the last location item was looked up)."""
    out = ""
    node: Any = model
    known: list[str] | None = None
    for item in loc:
        node = structural_type(node)
        origin = get_origin(node)
        if item == "[key]":  # pydantic's marker for "the key itself was invalid"
            continue
        if isinstance(item, int):
            out += f"[{item}]"
            args = get_args(node)
            node = args[0] if origin in (list, tuple, set, frozenset, Sequence) and args else None
            known = None
        elif _is_model(node):
            fields = _model_fields(node)
            known = _aliases(node)
            spelling, node = fields.get(item, (item, None))
            out += f".{spelling}" if out else spelling
        elif origin is dict:
            out += f"[{item}]"
            args = get_args(node)
            node = args[1] if len(args) == 2 else None
            known = None
        else:
            out += f".{item}" if out else str(item)
            node = None
            known = None
    return out, known


def field_path(model: type[BaseModel] | None, loc: Sequence[str | int]) -> str:
    """`spec.template.spec.requirements[0].operator` for a pydantic location under `model`."""
    return _walk(model, loc)[0]


def _short(value: Any) -> str | None:
    if isinstance(value, str | int | float | bool) and len(repr(value)) <= 60:
        return repr(value)
    return None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """"; did you mean 'x'?" for the closest of `known` to a misspelled field name, or ""."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def describe(model: type[BaseModel] | None, error: ErrorDetails) -> tuple[str, str]:
    """(path, message) for one pydantic error."""
    path, known = _walk(model, error["loc"])
    kind = error["type"]
    if kind == "extra_forbidden":
        name = str(error["loc"][-1]) if error["loc"] else "?"
        return path, f"unknown field {name!r} (extra field not in the schema)" + did_you_mean(name, known or ())
    if kind == "missing":
        return path, "required field is missing"
    message = error["msg"]
    if kind == "value_error":
        return path, message.removeprefix("Value error, ")
    got = _short(error.get("input"))
    return path, message if got is None else f"{message} (got {got})"


def describe_all(model: type[BaseModel] | None, exc: ValidationError) -> list[tuple[str, str]]:
    return [describe(model, e) for e in exc.errors(include_url=False)]
