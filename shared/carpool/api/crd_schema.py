"""Karpenter's own CRD schemas, applied to NodePool and EC2NodeClass documents as the API server applies them.

Why: a user's manifest must get the verdict a Karpenter cluster would give it, then carpool's own. The
pydantic models alone drifted from the CRDs (a `volumeSize: 100` without a unit passed and became a 1 GiB
volume; `maxPods: 100000000000` passed a field the CRD says is int32). So each document is first checked
against the `openAPIV3Schema` of Karpenter's CRD (types, int32/int64 and date-time formats, patterns,
enums, minimums and maximums, lengths and item counts, required fields, defaults, and the CEL rules,
`carpool.api.cel_rules`), and only a document that passes goes on to the models, which add carpool's own
refusals.

Three verdicts on a field, never confused:
- in neither the CRD nor carpool: a typo, `unknown field 'x'` (with the closest CRD field);
- in Karpenter's CRD but not in carpool's model (a field or an enum value): `not supported by carpool`,
  named, never accepted and dropped;
- in both: the CRD's constraints, then the model's.

Errors read like kube-apiserver's (`spec.kubelet.maxPods: Invalid value: 100000000000: ...`). The schemas
ship as compact JSON (`crds/karpenter-<version>.json`, descriptions dropped), written from Karpenter's CRD
files by `tools/crd_schemas.py`; a unit test holds it to those files. Cost at a cold start (measured on the
development machine): reading it 0.7 ms, the first NodePool and EC2NodeClass 3 ms (the models' support
views are built then), each further NodePool 0.25 ms.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from functools import cache
from pathlib import Path
from typing import Any, Final, Literal, get_args, get_origin

from pydantic import BaseModel

from carpool.api import cel_rules
from carpool.api.errors import did_you_mean, structural_type

__all__ = [
    "KARPENTER_VERSION",
    "Admitted",
    "Problem",
    "admit",
    "check",
    "compact",
    "karpenter_kinds",
    "schema_of",
]

#: the Karpenter release whose CRDs carpool follows
KARPENTER_VERSION: Final = "v1.14.1"
_DATA: Final = Path(__file__).with_name("crds") / f"karpenter-{KARPENTER_VERSION}.json"
_INT32: Final = (-(2**31), 2**31 - 1)
_INT64: Final = (-(2**63), 2**63 - 1)
_DATE_TIME = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})\Z", re.ASCII
)
#: what the words of a type error call each JSON type
_JSON_TYPES: Final = {bool: "boolean", int: "integer", float: "number", str: "string", dict: "object", list: "array"}
#: the document's own blocks carpool does not judge: the API server's `status`, validated by nobody on create
_SKIPPED_ROOT_FIELDS: Final = frozenset({"status"})


@dataclass(frozen=True, slots=True)
class Problem:
    """One refusal: the field path (`spec.kubelet.maxPods`) and the reason, as kube-apiserver words it."""

    path: str
    message: str


# -- the shipped schemas ------------------------------------------------------------------------------------
def compact(crds: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """What `crds/` ships from Karpenter's CRD documents: each served version's `openAPIV3Schema` without
    its descriptions, by "<apiVersion> <kind>", and every kind the CRDs define."""
    schemas: dict[str, Any] = {}
    for crd in crds:
        spec = crd["spec"]
        for version in spec["versions"]:
            if version.get("served", True):
                key = f"{spec['group']}/{version['name']} {spec['names']['kind']}"
                schemas[key] = _without_descriptions(version["schema"]["openAPIV3Schema"])
    return {"karpenterVersion": KARPENTER_VERSION, "schemas": dict(sorted(schemas.items()))}


def _without_descriptions(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_descriptions(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [_without_descriptions(v) for v in node]
    return node


@cache
def _shipped() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(_DATA.read_text(encoding="utf-8"))
    return loaded


def schema_of(api_version: str, kind: str) -> dict[str, Any] | None:
    """The CRD's schema for `kind` at `api_version`, or None when Karpenter defines no such kind."""
    found: dict[str, Any] | None = _shipped()["schemas"].get(f"{api_version} {kind}")
    return found


def karpenter_kinds() -> list[tuple[str, str]]:
    """(apiVersion, kind) of every kind Karpenter's CRDs define."""
    return [tuple(key.split(" ", 1)) for key in _shipped()["schemas"]]  # type: ignore[misc]


# -- what carpool's models support, by the same paths -----------------------------------------------------
@dataclass(slots=True)
class _Support:
    """What a model accepts at one node of the schema: fields (an object), items or values (a list, a map),
    allowed values (an enum); None where the model says nothing narrower."""

    fields: dict[str, _Support] | None = None
    each: _Support | None = None
    literals: frozenset[Any] | None = None


@cache
def _model_support(model: type[BaseModel]) -> _Support | None:
    """Built once per model (a few hundred microseconds), on the first document of its kind."""
    return _support(model)


def _support(tp: Any) -> _Support | None:
    tp = structural_type(tp)
    origin = get_origin(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return _Support(fields={info.alias or name: _support(info.annotation) or _Support()
                                for name, info in tp.model_fields.items()})
    if origin is Literal:
        return _Support(literals=frozenset(get_args(tp)))
    if origin in (list, Sequence, tuple, set, frozenset):
        args = get_args(tp)
        return _Support(each=_support(args[0])) if args else None
    if origin is dict:
        args = get_args(tp)
        return _Support(each=_support(args[1])) if len(args) == 2 else None
    return None


# -- the check ---------------------------------------------------------------------------------------------
def check(api_version: str, kind: str, doc: Mapping[str, Any], model: type[BaseModel]) -> list[Problem]:
    """Every way `doc` breaks Karpenter's CRD for its kind, or uses what `model` does not support.

    [] when the document passes, or when Karpenter defines no such kind (nothing to hold it to)."""
    schema = schema_of(api_version, kind)
    if schema is None:
        return []
    walk = _Walk(kind)
    root = {k: v for k, v in doc.items() if k not in _SKIPPED_ROOT_FIELDS}
    walk.node(schema, root, "", _model_support(model))
    return walk.problems


@dataclass(frozen=True, slots=True)
class Admitted:
    """What the API server makes of a custom resource it is given: the object as it would store it
    (unknown fields pruned, defaults applied), the fields it pruned, and its refusals (none: stored)."""

    obj: dict[str, Any]
    pruned: list[str]
    problems: list[Problem]


def admit(api_version: str, kind: str, doc: Mapping[str, Any], *, with_status: bool = False) -> Admitted:
    """`doc` as kube-apiserver admits a custom resource of Karpenter's CRD, knowing only the CRD (no
    carpool verdicts): fields the schema does not name are pruned (`structural/pruning`; with no
    `fieldValidation=Strict` the server drops them, at most warning), nulls of fields that are not
    nullable are dropped, the schema's defaults are applied (`structural/defaulting`), then the schema and
    its CEL rules judge what is left. `status` is judged only with `with_status` (the status
    subresource's update); `metadata` is the API server's own, never pruned here. A kind without a schema
    is admitted as it is."""
    obj = json.loads(json.dumps(dict(doc), default=str))
    schema = schema_of(api_version, kind)
    if schema is None:
        return Admitted(obj, [], [])
    pruned: list[str] = []
    for key in [k for k in obj if k not in ("apiVersion", "kind", "metadata")]:
        if key not in (schema.get("properties") or {}):
            pruned.append(key)
            del obj[key]
        else:
            obj[key] = _defaulted(schema["properties"][key], obj[key], key, pruned)
    for key, prop in (schema.get("properties") or {}).items():
        if key not in obj and "default" in prop:
            obj[key] = _defaulted(prop, json.loads(json.dumps(prop["default"])), key, pruned)
    walk = _Walk(kind)
    root = {k: v for k, v in obj.items() if with_status or k not in _SKIPPED_ROOT_FIELDS}
    walk.node(schema, root, "", None)
    return Admitted(obj, pruned, walk.problems)


def _defaulted(schema: Mapping[str, Any], value: Any, path: str, pruned: list[str]) -> Any:
    """`value` pruned and defaulted as the API server does it, top down: in an object, unknown fields and
    nulls go, absent fields with a default get it (then are defaulted inside in turn)."""
    if isinstance(value, dict):
        properties = schema.get("properties")
        values = schema.get("additionalProperties")
        if properties is not None:
            out: dict[str, Any] = {}
            for key, item in value.items():
                if key not in properties:
                    pruned.append(_child(path, str(key)))
                elif item is not None:
                    out[key] = _defaulted(properties[key], item, _child(path, str(key)), pruned)
            for key, prop in properties.items():
                if key not in out and "default" in prop:
                    out[key] = _defaulted(prop, json.loads(json.dumps(prop["default"])), _child(path, key), pruned)
            return out
        if isinstance(values, Mapping):
            return {k: _defaulted(values, v, f"{path}[{k}]", pruned) for k, v in value.items() if v is not None}
        return value
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_defaulted(schema["items"], item, f"{path}[{i}]", pruned) for i, item in enumerate(value)]
    return value


def _show(value: Any) -> str:
    """A value as kube-apiserver quotes it: strings in double quotes, numbers bare, objects by type."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        shown = value if len(value) <= 80 else value[:60] + f"... ({len(value)} characters)"
        return json.dumps(shown)
    return json.dumps(_type_name(value))


def _type_name(value: Any) -> str:
    if isinstance(value, datetime | date):
        return "string"
    return next((name for tp, name in _JSON_TYPES.items() if isinstance(value, tp)), type(value).__name__)


def _is_integer(value: Any) -> bool:
    """JSON integers; a float with no fraction is one too, as the API server's decoder reads `110.0`."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _is_type(value: Any, name: str) -> bool:
    if name == "string":
        return isinstance(value, str | datetime | date)  # YAML timestamps reach the API server as strings
    if name == "integer":
        return _is_integer(value)
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "object":
        return isinstance(value, Mapping)
    if name == "array":
        return isinstance(value, list)
    return True


_PATTERNS: dict[str, re.Pattern[str]] = {}
_QUANTITY = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
_QUALIFIED = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
#: what a pattern the CRDs repeat asks for, in words (the error still quotes the pattern, as the API server)
_PATTERN_WORDS: Final = {
    _QUANTITY: 'a quantity such as "500m", "2" or "1Gi"',
    r"^(([0-9]+(s|m|h))+|Never)$": 'a duration such as "30s", "1h30m" or "Never"',
    r"^([0-9]+(s|m|h))+$": 'a duration such as "30s" or "1h30m"',
    _QUALIFIED: 'a qualified name such as "example.com/key"',
    r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$": "at most a label value: letters, digits, '-', '_' and '.'",
    r"^((100|[0-9]{1,2})%|[0-9]+)$": 'a node count such as "5" or a percentage up to "100%"',
}


def _pattern_words(pattern: str) -> str:
    words = _PATTERN_WORDS.get(pattern)
    if words is None and "Gi|" in pattern and "Ti|" in pattern:
        words = 'a size with its unit, from "1Gi" to "59000Gi" (or G, Ti, T)'
    return f" ({words})" if words else ""


def _regex(pattern: str) -> re.Pattern[str]:
    """`pattern` with RE2's meaning (the API server's): `$` ends the text (Python's also matches before a
    final newline), classes such as `\\d` are ASCII."""
    found = _PATTERNS.get(pattern)
    if found is None:
        out, in_class, i = [], False, 0
        while i < len(pattern):
            c = pattern[i]
            if c == "\\":
                out.append(pattern[i:i + 2])
                i += 2
                continue
            if in_class:
                in_class = c != "]"
            elif c == "[":
                in_class = True
            elif c == "$":
                c = r"\Z"
            out.append(c)
            i += 1
        found = _PATTERNS[pattern] = re.compile("".join(out), re.ASCII)
    return found


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class _Walk:
    """One document's walk: the problems found so far."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.problems: list[Problem] = []

    def fail(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def node(self, schema: Mapping[str, Any], value: Any, path: str, support: _Support | None) -> None:
        if value is None:  # the API server prunes nulls of fields that are not nullable
            return
        before = len(self.problems)
        if not self.typed(schema, value, path):
            return
        if isinstance(value, Mapping):
            value = self.object(schema, value, path, support)
        elif isinstance(value, list):
            self.array(schema, value, path, support)
        else:
            self.scalar(schema, value, path, support)
        if len(self.problems) == before:  # a rule reads a well-formed value, as CEL's typed programs do
            self.rules(schema, value, path)

    def typed(self, schema: Mapping[str, Any], value: Any, path: str) -> bool:
        if schema.get("x-kubernetes-int-or-string"):
            if _is_integer(value) or isinstance(value, str):
                return True
            self.fail(path, f"Invalid value: {_show(value)}: must be an integer or a string")
            return False
        expected = schema.get("type")
        if expected is None or _is_type(value, expected):
            return True
        words = _pattern_words(schema["pattern"]) if "pattern" in schema else ""
        self.fail(path, f"Invalid value: {_show(value)}: must be of type {expected}{words}")
        return False

    def scalar(self, schema: Mapping[str, Any], value: Any, path: str, support: _Support | None) -> None:
        if isinstance(value, datetime | date):
            value = value.isoformat()
        enum = schema.get("enum")
        if enum is not None:
            if value not in enum:
                supported = ", ".join(json.dumps(v) for v in enum)
                self.fail(path, f"Unsupported value: {_show(value)}: supported values: {supported}")
                return
            if support is not None and support.literals is not None and value not in support.literals:
                ours = ", ".join(json.dumps(v) for v in enum if v in support.literals)
                self.fail(path, f"Unsupported value: {_show(value)}: not supported by carpool "
                                f"(a Karpenter {KARPENTER_VERSION} value; carpool supports {ours})")
                return
        if isinstance(value, str):
            self.string(schema, value, path)
        elif _is_integer(value) or isinstance(value, float):
            self.number(schema, value, path)

    def string(self, schema: Mapping[str, Any], value: str, path: str) -> None:
        low, high = schema.get("minLength"), schema.get("maxLength")
        if low is not None and len(value) < low:
            self.fail(path, f"Invalid value: {_show(value)}: should be at least {low} chars long")
        if high is not None and len(value) > high:
            self.fail(path, f"Too long: may not be more than {high} characters (got {len(value)})")
        pattern = schema.get("pattern")
        if pattern is not None and not _regex(pattern).search(value):
            self.fail(path, f"Invalid value: {_show(value)}: should match '{pattern}'{_pattern_words(pattern)}")
        if schema.get("format") == "date-time" and not _DATE_TIME.match(value):
            self.fail(path, f"Invalid value: {_show(value)}: must be a date-time (RFC 3339, e.g. 2026-01-01T00:00:00Z)")

    def number(self, schema: Mapping[str, Any], value: float, path: str) -> None:
        bounds = {"int32": _INT32, "int64": _INT64}.get(schema.get("format", ""))
        if bounds is not None and not bounds[0] <= value <= bounds[1]:
            bits = schema["format"][3:]
            self.fail(path, f"Invalid value: {_show(value)}: must be a {bits}-bit integer "
                            f"({bounds[0]} to {bounds[1]})")
            return
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is not None and value < low:
            self.fail(path, f"Invalid value: {_show(value)}: should be greater than or equal to {low}")
        if high is not None and value > high:
            self.fail(path, f"Invalid value: {_show(value)}: should be less than or equal to {high}")

    def array(self, schema: Mapping[str, Any], value: list[Any], path: str, support: _Support | None) -> None:
        low, high = schema.get("minItems"), schema.get("maxItems")
        if low is not None and len(value) < low:
            self.fail(path, f"Invalid value: {len(value)}: should have at least {low} items")
        if high is not None and len(value) > high:
            self.fail(path, f"Too many: {len(value)}: must have at most {high} items")
            return
        items = schema.get("items")
        if isinstance(items, Mapping):
            each = support.each if support is not None else None
            for index, item in enumerate(value):
                self.node(items, item, f"{path}[{index}]", each)

    def object(self, schema: Mapping[str, Any], value: Mapping[str, Any], path: str,
               support: _Support | None) -> Mapping[str, Any]:
        """Checks an object and returns it with the schema's defaults filled in (what its rules read)."""
        high = schema.get("maxProperties")
        if high is not None and len(value) > high:
            self.fail(path, f"Too many: {len(value)}: must have at most {high} items")
        properties = schema.get("properties")
        if properties is not None:
            return self.fields(schema, properties, value, path, support)
        values = schema.get("additionalProperties")
        if isinstance(values, Mapping):
            each = support.each if support is not None else None
            for key, item in value.items():
                self.node(values, item, f"{path}[{key}]", each)
        return value

    def fields(self, schema: Mapping[str, Any], properties: Mapping[str, Any], value: Mapping[str, Any],
               path: str, support: _Support | None) -> Mapping[str, Any]:
        known = support.fields if support is not None else None
        for key, item in value.items():
            where = _child(path, str(key))
            if key not in properties:
                self.fail(where, self.unknown(str(key), properties))
            elif known is not None and key not in known and item is not None:
                self.fail(where, f"not supported by carpool (a Karpenter {KARPENTER_VERSION} {self.kind} field)")
            else:
                self.node(properties[key], item, where, known.get(key) if known is not None else None)
        defaulted = {k: p["default"] for k, p in properties.items() if "default" in p and value.get(k) is None}
        if defaulted:
            value = {**value, **defaulted}
        for key in schema.get("required", ()):
            if value.get(key) is None:
                self.fail(_child(path, key), "Required value")
        return value

    def unknown(self, key: str, properties: Mapping[str, Any]) -> str:
        return (f"unknown field '{key}' (not a field of Karpenter {KARPENTER_VERSION}'s {self.kind} here)"
                + did_you_mean(key, properties))

    def rules(self, schema: Mapping[str, Any], value: Any, path: str) -> None:
        for rule in schema.get("x-kubernetes-validations", ()):
            text = rule["rule"]
            if not cel_rules.applies(text):
                continue
            check = cel_rules.predicate(text)
            if check is None:
                continue  # tests/unit/api/test_crd_schema_walk.py keeps every shipped rule implemented
            try:
                held = bool(check(value))
            except Exception:  # CEL's evaluation errors fail the rule, as in the API server
                held = False
            if not held:
                message = rule.get("message") or f"failed rule: {text}"
                self.fail(path, f"Invalid value: {json.dumps(_type_name(value))}: {message}")
