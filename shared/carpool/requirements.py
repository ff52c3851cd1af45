"""The label-requirement algebra that NodePools, pods, instance types and AMIs are all matched with.

It follows Karpenter's semantics (`kubernetes-sigs/karpenter` pkg/scheduling/requirement.go): a
requirement is a set of allowed values for one label key, possibly a complement ("anything except"), and
possibly bounded (`Gt`/`Lt`/`Gte`/`Lte` on integer values).

carpool adds two things Karpenter rejects:
- **glob values** (`c7*`, `*`, `c7i-flex`) in `In`/`NotIn`, matched with shell-style patterns;
- **order**: the values of an `In` keep the order they were written in, so a scheduler can treat
  `["c7i-flex", "*"]` as "c7i-flex first, anything else after" (see `preference_rank`).
"""

from __future__ import annotations

import fnmatch
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

IN = "In"
NOT_IN = "NotIn"
EXISTS = "Exists"
DOES_NOT_EXIST = "DoesNotExist"
GT = "Gt"
LT = "Lt"
GTE = "Gte"
LTE = "Lte"
OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT, GTE, LTE)
NEGATIVE = frozenset({NOT_IN, DOES_NOT_EXIST})

_UNBOUNDED = sys.maxsize


class RequirementError(ValueError):
    """A requirement spec Kubernetes or Karpenter would reject."""


def is_glob(value: str) -> bool:
    return any(ch in value for ch in "*?[")


def _as_int(value: str) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


class Requirement:
    """Allowed values of one label key.

    `complement=False`: exactly `values` are allowed (empty means DoesNotExist).
    `complement=True`: everything except `values` (empty means Exists).
    `gt`/`lt` bound integer values (exclusive); a bounded requirement only admits integers.
    """

    __slots__ = ("key", "complement", "values", "order", "patterns", "gt", "lt", "min_values")

    def __init__(
        self,
        key: str,
        complement: bool,
        values: Iterable[str] = (),
        gt: int | None = None,
        lt: int | None = None,
        min_values: int | None = None,
    ) -> None:
        ordered = tuple(dict.fromkeys(values))
        self.key = key
        self.complement = complement
        self.order: tuple[str, ...] = ordered
        self.values: frozenset[str] = frozenset(v for v in ordered if not is_glob(v))
        self.patterns: tuple[str, ...] = tuple(v for v in ordered if is_glob(v))
        self.gt = gt
        self.lt = lt
        self.min_values = min_values

    # -- construction -------------------------------------------------------------------------------
    @classmethod
    def of(
        cls, key: str, operator: str, values: Iterable[str] = (), min_values: int | None = None
    ) -> Requirement:
        """Build from a NodeSelectorRequirement's (key, operator, values), validating as Kubernetes does."""
        vals = [str(v) for v in values]
        if operator == IN:
            return cls(key, False, vals, min_values=min_values)
        if operator == NOT_IN:
            return cls(key, True, vals, min_values=min_values)
        if operator == EXISTS:
            return cls(key, True, min_values=min_values)
        if operator == DOES_NOT_EXIST:
            return cls(key, False, min_values=min_values)
        if operator in (GT, LT, GTE, LTE):
            if len(vals) != 1 or _as_int(vals[0]) is None:
                raise RequirementError(f"{key}: operator {operator} needs exactly one integer value, got {vals}")
            n = int(vals[0])
            bounds = {GT: (n, None), GTE: (n - 1, None), LT: (None, n), LTE: (None, n + 1)}[operator]
            return cls(key, True, gt=bounds[0], lt=bounds[1], min_values=min_values)
        raise RequirementError(f"{key}: unknown operator {operator!r} (expected one of {', '.join(OPERATORS)})")

    @classmethod
    def exists(cls, key: str) -> Requirement:
        return cls(key, True)

    @classmethod
    def in_(cls, key: str, *values: str) -> Requirement:
        return cls(key, False, values)

    # -- queries ------------------------------------------------------------------------------------
    @property
    def operator(self) -> str:
        if self.complement:
            return NOT_IN if self.order else EXISTS
        return IN if self.order else DOES_NOT_EXIST

    def _in_bounds(self, value: str) -> bool:
        if self.gt is None and self.lt is None:
            return True
        n = _as_int(value)
        if n is None:
            return False
        return (self.gt is None or n > self.gt) and (self.lt is None or n < self.lt)

    def _listed(self, value: str) -> bool:
        if value in self.values:
            return True
        return any(fnmatch.fnmatchcase(value, p) for p in self.patterns)

    def has(self, value: str) -> bool:
        """Whether a node label `key=value` satisfies this requirement."""
        if self.complement:
            return not self._listed(value) and self._in_bounds(value)
        return self._listed(value) and self._in_bounds(value)

    def is_empty(self) -> bool:
        """No value can satisfy it (the DoesNotExist set, or contradictory bounds)."""
        if not self.complement:
            return not self.order
        return self.gt is not None and self.lt is not None and self.gt + 1 >= self.lt

    def __len__(self) -> int:
        if self.complement:
            return 0 if self.is_empty() else _UNBOUNDED - len(self.order)
        if self.patterns:
            return _UNBOUNDED  # a pattern stands for unboundedly many values
        return len(self.values)

    def any(self) -> str | None:
        """A concrete value that satisfies the requirement, preferring the first listed one."""
        if not self.complement:
            for v in self.order:
                if not is_glob(v) and self._in_bounds(v):
                    return v
            return None
        if self.gt is not None or self.lt is not None:
            lo = (self.gt + 1) if self.gt is not None else 0
            hi = self.lt if self.lt is not None else lo + 1000
            for n in range(lo, hi):
                if not self._listed(str(n)):
                    return str(n)
            return None
        return None

    def preference_rank(self, value: str) -> int:
        """Index of the first listed value/pattern `value` matches (0 = most preferred).

        For a complement or a value not listed, the rank is `len(order)` (least preferred).
        """
        if self.complement:
            return 0 if self.has(value) else len(self.order)
        for i, v in enumerate(self.order):
            if v == value or (is_glob(v) and fnmatch.fnmatchcase(value, v)):
                return i
        return len(self.order)

    def has_preference_order(self) -> bool:
        """True when the values carry an order worth honouring (more than one entry, a glob among them)."""
        return not self.complement and len(self.order) > 1 and bool(self.patterns)

    # -- algebra ------------------------------------------------------------------------------------
    def intersection(self, other: Requirement) -> Requirement:
        """The values both allow. Order follows `self` (the more specific side keeps its preference)."""
        gt = _max_opt(self.gt, other.gt)
        lt = _min_opt(self.lt, other.lt)
        min_values = _max_opt(self.min_values, other.min_values)
        if self.complement and other.complement:
            return Requirement(self.key, True, self.order + other.order, gt, lt, min_values)
        if self.complement:  # other is a finite (possibly glob) set
            kept = [v for v in other.order if (is_glob(v) and not self._listed(v)) or (not is_glob(v) and self.has(v))]
            return Requirement(self.key, False, kept, gt, lt, min_values)
        if other.complement:
            kept = [v for v in self.order if (is_glob(v) and not other._listed(v)) or (not is_glob(v) and other.has(v))]
            return Requirement(self.key, False, kept, gt, lt, min_values)
        kept = []
        for v in self.order:
            if is_glob(v):
                if v in other.patterns or "*" in other.patterns:
                    kept.append(v)
                elif v == "*":
                    kept.extend(other.order)
            elif other._listed(v):
                kept.append(v)
        for v in other.order:
            if not is_glob(v) and v not in kept and self._listed(v):
                kept.append(v)
        result = Requirement(self.key, False, kept, gt, lt, min_values)
        return result

    def spec(self) -> dict[str, Any]:
        """Back to a NodeSelectorRequirement-shaped dict (bounds become Gt/Lt)."""
        if self.gt is not None and not self.order:
            return {"key": self.key, "operator": GT, "values": [str(self.gt)]}
        if self.lt is not None and not self.order:
            return {"key": self.key, "operator": LT, "values": [str(self.lt)]}
        out: dict[str, Any] = {"key": self.key, "operator": self.operator}
        if self.order:
            out["values"] = list(self.order)
        if self.min_values:
            out["minValues"] = self.min_values
        return out

    def __repr__(self) -> str:
        bounds = ""
        if self.gt is not None:
            bounds += f" >{self.gt}"
        if self.lt is not None:
            bounds += f" <{self.lt}"
        vals = f" {list(self.order)}" if self.order else ""
        return f"{self.key} {self.operator}{vals}{bounds}"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Requirement):
            return NotImplemented
        return (
            self.key == other.key
            and self.complement == other.complement
            and set(self.order) == set(other.order)
            and self.gt == other.gt
            and self.lt == other.lt
        )

    def __hash__(self) -> int:
        return hash((self.key, self.complement, frozenset(self.order), self.gt, self.lt))


def _max_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def _min_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


@dataclass(frozen=True, slots=True)
class Incompatibility:
    """Why two requirement sets cannot meet, worded for a person."""

    key: str
    reason: str

    def __str__(self) -> str:
        return self.reason


class Requirements(Mapping[str, Requirement]):
    """A set of requirements keyed by label key; adding a key twice intersects the two."""

    __slots__ = ("_reqs",)

    def __init__(self, reqs: Iterable[Requirement] = ()) -> None:
        self._reqs: dict[str, Requirement] = {}
        for r in reqs:
            self._put(r)

    def _put(self, r: Requirement) -> None:
        existing = self._reqs.get(r.key)
        self._reqs[r.key] = existing.intersection(r) if existing is not None else r

    # -- construction -------------------------------------------------------------------------------
    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> Requirements:
        return cls(Requirement(k, False, (v,)) for k, v in labels.items())

    @classmethod
    def from_specs(cls, specs: Iterable[Any]) -> Requirements:
        """From NodeSelectorRequirement-like dicts or objects (`key`, `operator`, `values`, `minValues`)."""
        reqs = []
        for s in specs:
            if isinstance(s, Mapping):
                key, op, vals = s["key"], s["operator"], s.get("values") or ()
                mv = s.get("minValues", s.get("min_values"))
            else:
                key, op, vals = s.key, s.operator, s.values or ()
                mv = getattr(s, "min_values", None)
            reqs.append(Requirement.of(key, op, vals, mv))
        return cls(reqs)

    # -- mapping ------------------------------------------------------------------------------------
    def __getitem__(self, key: str) -> Requirement:
        return self._reqs[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._reqs)

    def __len__(self) -> int:
        return len(self._reqs)

    def get_or_exists(self, key: str) -> Requirement:
        """The requirement on `key`, or Exists when undefined (Karpenter's `Get`)."""
        r = self._reqs.get(key)
        return r if r is not None else Requirement.exists(key)

    # -- algebra ------------------------------------------------------------------------------------
    def add(self, *reqs: Requirement) -> Requirements:
        """A new set with `reqs` intersected in."""
        out = Requirements()
        out._reqs = dict(self._reqs)
        for r in reqs:
            out._put(r)
        return out

    def merge(self, other: Requirements) -> Requirements:
        return self.add(*other.values())

    def intersects(self, other: Requirements) -> Incompatibility | None:
        """None when, on every key both define, some value satisfies both (or both are negative)."""
        small, large = (self, other) if len(self) <= len(other) else (other, self)
        for key in small._reqs:
            if key not in large._reqs:
                continue
            existing, incoming = self._reqs[key], other._reqs[key]
            if existing.intersection(incoming).is_empty():
                if incoming.operator in NEGATIVE and existing.operator in NEGATIVE:
                    continue
                return Incompatibility(key, f"incompatible requirement {key}: {incoming!r} vs {existing!r}")
        return None

    def compatible(self, other: Requirements, allow_undefined: frozenset[str] = frozenset()) -> Incompatibility | None:
        """Strict compatibility of `other` against `self` (Karpenter's `Compatible`).

        Every key `other` requires must be defined here unless its operator is negative
        (NotIn/DoesNotExist) or it is in `allow_undefined`; then the sets must intersect.
        """
        for key, req in other._reqs.items():
            if key in self._reqs or key in allow_undefined or req.operator in NEGATIVE:
                continue
            return Incompatibility(key, f"incompatible requirement {key}: {req!r} but {key} is not defined")
        return self.intersects(other)

    def is_compatible(self, other: Requirements, allow_undefined: frozenset[str] = frozenset()) -> bool:
        return self.compatible(other, allow_undefined) is None

    def labels(self) -> dict[str, str]:
        """Labels a node built from these requirements would carry: keys with one concrete allowed value."""
        out = {}
        for key, r in self._reqs.items():
            if not r.complement and len(r.values) == 1 and not r.patterns:
                out[key] = next(iter(r.values))
        return out

    def satisfied_by(self, labels: Mapping[str, str]) -> Incompatibility | None:
        """Whether a node with exactly `labels` satisfies every requirement (undefined label = absent)."""
        for key, r in self._reqs.items():
            value = labels.get(key)
            if value is None:
                if r.operator in NEGATIVE and r.gt is None and r.lt is None:
                    continue
                return Incompatibility(key, f"label {key} is missing, required {r!r}")
            if not r.has(value):
                return Incompatibility(key, f"label {key}={value} does not satisfy {r!r}")
        return None

    def specs(self) -> list[dict[str, Any]]:
        return [r.spec() for r in self._reqs.values()]

    def __repr__(self) -> str:
        return "Requirements(" + ", ".join(repr(r) for r in self._reqs.values()) + ")"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Requirements):
            return NotImplemented
        return self._reqs == other._reqs

    def __hash__(self) -> int:
        return hash(frozenset(self._reqs.items()))
