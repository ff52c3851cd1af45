"""The label-requirement algebra that NodePools, pods, instance types and AMIs are all matched with.

It follows Karpenter's semantics (`kubernetes-sigs/karpenter` pkg/scheduling/requirement.go): a
requirement is a set of allowed values for one label key, possibly a complement ("anything except"), and
possibly bounded (`Gt`/`Lt`/`Gte`/`Lte` on integer values).

carpool adds two things Karpenter rejects:
- **glob values** (`c7*`, `*`, `c7i-flex`) in `In`/`NotIn`, matched with shell-style patterns;
- **order**: the values of an `In` keep the order they were written in, so a scheduler can treat
  `["c7i-flex", "*"]` as "c7i-flex first, anything else after" (see `preference_rank`).

Globs make intersections richer than Karpenter's set operations, and they stay exact in `has`:
- `In [c7*]` and `In [*.large]` meet in the pattern `c7*&*.large` (`&` = both must match; label values
  can never contain `&`, `*`, `?` or `[`, so these entries cannot be confused with real values);
- `In [c*]` and `NotIn [c7*]` meet in `In [c*]` with `excluded = (c7*,)`.
`is_empty` is exact without globs and never claims emptiness wrongly with them; a glob combination it cannot
decide (e.g. `x*&[0-9]`) counts as non-empty, as Karpenter counts every complement as non-empty.
"""

from __future__ import annotations

import fnmatch
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from carpool.labels import ALIASES as _ALIASES
from carpool.labels import NORMALIZED as _NORMALIZED

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
_AND = "&"  # joins the parts of a conjunctive glob (`c7*&*.large`)
_INTEGER = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.Atoi accepts (Karpenter's bound checks)
_ANY_SEARCH = 1000  # how many integers `any()` tries in a bounded complement


class RequirementError(ValueError):
    """A requirement spec Kubernetes or Karpenter would reject."""


def is_glob(value: str) -> bool:
    return any(ch in value for ch in "*?[")


def _as_int(value: str) -> int | None:
    """The integer a label value spells, as Go's `strconv.Atoi` reads it (no `1_0`, no spaces)."""
    if isinstance(value, str) and _INTEGER.fullmatch(value):
        return int(value)
    return None


def _match(value: str, pattern: str) -> bool:
    """Shell-style match; a conjunctive pattern (`a*&*b`) needs every part to match."""
    if _AND in pattern:
        return all(fnmatch.fnmatchcase(value, part) for part in pattern.split(_AND))
    return fnmatch.fnmatchcase(value, pattern)


def _is_match_all(pattern: str) -> bool:
    return all(part and set(part) == {"*"} for part in pattern.split(_AND))


def _star_only(pattern: str) -> bool:
    return "?" not in pattern and "[" not in pattern


def _subsumes(general: str, specific: str) -> bool:
    """True when every value matching `specific` (a glob or a plain value) also matches `general`.

    Sound but not complete: when unsure it answers False.
    """
    if general == specific or _is_match_all(general):
        return True
    if _AND in general:
        return all(_subsumes(part, specific) for part in general.split(_AND))
    if _AND in specific:
        return any(_subsumes(general, part) for part in specific.split(_AND))
    if not is_glob(specific):
        return fnmatch.fnmatchcase(specific, general)
    # With `*` as the only wildcard on both sides, `general` matching the text of `specific` (its `*`s
    # taken literally) means each `*` of `specific` falls inside a `*` of `general`.
    return _star_only(general) and _star_only(specific) and fnmatch.fnmatchcase(specific, general)


def _literal_prefix(pattern: str) -> str:
    return re.split(r"[*?\[]", pattern, maxsplit=1)[0]


def _literal_suffix(pattern: str) -> str:
    if "[" in pattern:
        return ""
    return re.split(r"[*?]", pattern)[-1]


def _disjoint(a: str, b: str) -> bool:
    """True when no value can match both globs (judged on their literal prefixes and suffixes)."""
    for x in a.split(_AND):
        for y in b.split(_AND):
            px, py = _literal_prefix(x), _literal_prefix(y)
            sx, sy = _literal_suffix(x), _literal_suffix(y)
            if not (px.startswith(py) or py.startswith(px)) or not (sx.endswith(sy) or sy.endswith(sx)):
                return True
    return False


def _glob_and(a: str, b: str) -> str | None:
    """A glob matching exactly the values both `a` and `b` match, or None when they share none."""
    if _disjoint(a, b):
        return None
    parts: list[str] = []
    for part in a.split(_AND) + b.split(_AND):
        if any(_subsumes(part, kept) for kept in parts):
            continue  # `part` is implied by one already kept
        parts = [kept for kept in parts if not _subsumes(kept, part)]
        parts.append(part)
    return _AND.join(parts)


def _may_be_integer(pattern: str) -> bool:
    """False when no integer spelling (`[+-]?[0-9]+`) can match the glob (a literal letter in it)."""
    for part in pattern.split(_AND):
        literal = re.sub(r"\[[^\]]*\]|[*?]", "", part)
        if any(ch not in "0123456789+-" for ch in literal):
            return False
    return True


class Requirement:
    """Allowed values of one label key.

    `complement=False`: exactly `values` are allowed (empty means DoesNotExist), minus `excluded`
    (values or globs taken out of the allowed globs by an intersection with a `NotIn`).
    `complement=True`: everything except `values` (empty means Exists).
    `gt`/`lt` bound integer values (exclusive); a bounded requirement only admits integers.
    A deprecated key (`beta.kubernetes.io/arch`, `failure-domain.beta.kubernetes.io/zone`, ...) becomes the
    well-known key it stands for, as Karpenter's `NewRequirement` does, so old manifests select the same nodes.
    """

    __slots__ = ("key", "complement", "values", "order", "patterns", "gt", "lt", "min_values", "excluded", "plain")

    def __init__(
        self,
        key: str,
        complement: bool,
        values: Iterable[str] = (),
        gt: int | None = None,
        lt: int | None = None,
        min_values: int | None = None,
        excluded: Iterable[str] = (),
    ) -> None:
        ordered = tuple(dict.fromkeys(values))
        self.key = _NORMALIZED.get(key, key)
        self.complement = complement
        self.order: tuple[str, ...] = ordered
        self.values: frozenset[str] = frozenset(v for v in ordered if not is_glob(v))
        self.patterns: tuple[str, ...] = tuple(v for v in ordered if is_glob(v))
        self.gt = gt
        self.lt = lt
        self.min_values = min_values
        self.excluded: tuple[str, ...] = () if complement else tuple(dict.fromkeys(excluded))
        #: a finite list of concrete values and nothing else (`In [a, b]`, as every instance-type label is):
        #: it meets another requirement exactly when the other `has` one of its values (`meets`)
        self.plain: bool = not complement and not self.patterns and not self.excluded and gt is None and lt is None

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
            n_or_none = _as_int(vals[0]) if len(vals) == 1 else None
            if n_or_none is None:
                raise RequirementError(f"{key}: operator {operator} needs exactly one integer value, got {vals}")
            n = n_or_none
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
        return any(_match(value, p) for p in self.patterns)

    def _excluded(self, value: str) -> bool:
        return bool(self.excluded) and any(x == value or (is_glob(x) and _match(value, x)) for x in self.excluded)

    def allows_absent(self) -> bool:
        """Whether a node *without* the label satisfies it: NotIn/DoesNotExist, as in Kubernetes.

        A bound (`Gt`/`Lt`) needs the label, so a `NotIn` narrowed by one does not count as negative.
        """
        return self.operator in NEGATIVE and self.gt is None and self.lt is None

    def has(self, value: str) -> bool:
        """Whether a node label `key=value` satisfies this requirement."""
        if self.complement:
            return not self._listed(value) and self._in_bounds(value)
        return self._listed(value) and not self._excluded(value) and self._in_bounds(value)

    def is_empty(self) -> bool:
        """No value can satisfy it (the DoesNotExist set, contradictory bounds, everything excluded).

        A complement with concrete exclusions is never empty, even inside bounds: every integer has other
        spellings (`02` for 2) that `NotIn [2]` does not exclude (Karpenter's `Len` agrees).
        """
        if self.gt is not None and self.lt is not None and self.gt + 1 >= self.lt:
            return True
        if self.complement:
            return any(_is_match_all(p) for p in self.patterns)
        if any(self.has(v) for v in self.values):
            return False
        bounded = self.gt is not None or self.lt is not None
        for p in self.patterns:
            if any(is_glob(x) and _subsumes(x, p) for x in self.excluded):
                continue
            if bounded and not _may_be_integer(p):
                continue
            return False  # may be satisfiable; not decided further
        return True

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
                if not is_glob(v) and self.has(v):
                    return v
            return None
        if self.gt is None and self.lt is None:
            return None  # Exists/NotIn: no value worth inventing
        limit = _ANY_SEARCH + len(self.order)
        if self.gt is not None:
            hi = self.lt if self.lt is not None else self.gt + 1 + limit
            candidates: Iterable[int] = range(self.gt + 1, min(hi, self.gt + 1 + limit))
        else:
            assert self.lt is not None
            # 0, 1, ... below the bound first, then negative numbers (`Lt 0` is satisfiable too)
            up = range(0, max(0, min(self.lt, limit)))
            top = min(-1, self.lt - 1)
            candidates = [*up, *range(top, top - limit, -1)]
        for n in candidates:
            if self.has(str(n)):
                return str(n)
        return None

    def preference_rank(self, value: str) -> int:
        """Index of the first listed value/pattern `value` matches (0 = most preferred).

        For a complement or a value not listed, the rank is `len(order)` (least preferred).
        """
        if self.complement:
            return 0 if self.has(value) else len(self.order)
        for i, v in enumerate(self.order):
            if v == value or (is_glob(v) and _match(value, v)):
                return i
        return len(self.order)

    # -- algebra ------------------------------------------------------------------------------------
    def meets(self, other: Requirement) -> bool:
        """Whether some value satisfies both: `not self.intersection(other).is_empty()`, without building
        the intersection when one side is `plain` (then it is whether the other side `has` one of its
        values: the intersection keeps exactly those, and their bounds and exclusions are the other's)."""
        if self.plain:
            return any(other.has(v) for v in self.values)
        if other.plain:
            return any(self.has(v) for v in other.values)
        return not self.intersection(other).is_empty()

    def intersection(self, other: Requirement) -> Requirement:
        """The values both allow. Order follows `self` (the more specific side keeps its preference).

        A value of `other` that one of `self`'s globs admits takes that glob's place in the order, so
        `In [c7i-flex, *]` meeting `In [m5, c7i-flex]` gives `In [c7i-flex, m5]`.
        """
        gt = _max_opt(self.gt, other.gt)
        lt = _min_opt(self.lt, other.lt)
        min_values = _max_opt(self.min_values, other.min_values)
        if self.complement and other.complement:
            return Requirement(self.key, True, self.order + other.order, gt, lt, min_values)
        kept: list[str] = []
        if self.complement or other.complement:
            pos, neg = (other, self) if self.complement else (self, other)
            for v in pos.order:
                if not is_glob(v):
                    if pos.has(v) and neg.has(v):
                        kept.append(v)
                elif not any(is_glob(x) and _subsumes(x, v) for x in neg.order):
                    kept.append(v)
            excluded = pos.excluded + neg.order
        else:
            for v in self.order:
                if not is_glob(v):
                    if self.has(v) and other.has(v):
                        kept.append(v)
                    continue
                for w in other.order:
                    if not is_glob(w):
                        if _match(w, v) and self.has(w) and other.has(w):
                            kept.append(w)
                    else:
                        both = _glob_and(v, w)
                        if both is not None:
                            kept.append(both)
            excluded = self.excluded + other.excluded
        return Requirement(
            self.key, False, kept, gt, lt, min_values, excluded=_relevant_exclusions(excluded, kept)
        )

    def spec(self) -> dict[str, Any]:
        """Back to one NodeSelectorRequirement-shaped dict (a bounded Exists becomes Gt/Lt).

        One dict cannot hold everything (NotIn plus bounds, excluded values); `specs()` can.
        """
        if self.complement and not self.order and (self.gt is not None or self.lt is not None):
            out: dict[str, Any] = self._bound_specs()[0]
        else:
            out = {"key": self.key, "operator": self.operator}
            if self.order:
                out["values"] = list(self.order)
        if self.min_values:
            out["minValues"] = self.min_values
        return out

    def specs(self) -> list[dict[str, Any]]:
        """NodeSelectorRequirement-shaped dicts that, intersected (`Requirements.from_specs`), mean the same."""
        out: list[dict[str, Any]] = []
        bounds = self._bound_specs()
        if self.complement:
            if self.order or not bounds:
                out.append({"key": self.key, "operator": self.operator, **self._values_field(self.order)})
            out.extend(bounds)
        else:
            out.append({"key": self.key, "operator": self.operator, **self._values_field(self.order)})
            if self.excluded:
                out.append({"key": self.key, "operator": NOT_IN, "values": list(self.excluded)})
            if not self.order or self.patterns:  # bounds of a plain value list are already applied
                out.extend(bounds)
        if self.min_values:
            out[0]["minValues"] = self.min_values
        return out

    @staticmethod
    def _values_field(values: tuple[str, ...]) -> dict[str, Any]:
        return {"values": list(values)} if values else {}

    def _bound_specs(self) -> list[dict[str, Any]]:
        out = []
        if self.gt is not None:
            out.append({"key": self.key, "operator": GT, "values": [str(self.gt)]})
        if self.lt is not None:
            out.append({"key": self.key, "operator": LT, "values": [str(self.lt)]})
        return out

    def __repr__(self) -> str:
        bounds = ""
        if self.gt is not None:
            bounds += f" >{self.gt}"
        if self.lt is not None:
            bounds += f" <{self.lt}"
        vals = f" {list(self.order)}" if self.order else ""
        excluded = f" except {list(self.excluded)}" if self.excluded else ""
        return f"{self.key} {self.operator}{vals}{excluded}{bounds}"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Requirement):
            return NotImplemented
        return (
            self.key == other.key
            and self.complement == other.complement
            and set(self.order) == set(other.order)
            and set(self.excluded) == set(other.excluded)
            and self.gt == other.gt
            and self.lt == other.lt
        )

    def __hash__(self) -> int:
        return hash((self.key, self.complement, frozenset(self.order), frozenset(self.excluded), self.gt, self.lt))


def _relevant_exclusions(excluded: tuple[str, ...], kept: list[str]) -> tuple[str, ...]:
    """The exclusions that can still remove something: only globs need them (plain values were filtered)."""
    patterns = [v for v in kept if is_glob(v)]
    return tuple(
        x
        for x in dict.fromkeys(excluded)
        if any((_match(x, p) if not is_glob(x) else not _disjoint(x, p)) for p in patterns)
    )


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
    def of_distinct(cls, reqs: Sequence[Requirement]) -> Requirements:
        """`Requirements(reqs)`, made in one step when no two of `reqs` share a key (an instance type's:
        one per label, zone and capacity type), as a catalog's decoding makes one per type."""
        by_key = {r.key: r for r in reqs}
        if len(by_key) != len(reqs):  # a key given twice: intersected, as `__init__` does
            return cls(reqs)
        out = cls()
        out._reqs = by_key
        return out

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
        """None when, on every key both define, some value satisfies both (or both are negative).

        "Negative" is `allows_absent`: NotIn/DoesNotExist without bounds (both then accept a node without
        the label). Karpenter also counts a bounded NotIn as negative, which accepts pairs no node satisfies.
        """
        small, large = (self, other) if len(self) <= len(other) else (other, self)
        for key in small._reqs:
            if key not in large._reqs:
                continue
            existing, incoming = self._reqs[key], other._reqs[key]
            if not existing.meets(incoming):
                if incoming.allows_absent() and existing.allows_absent():
                    continue
                return Incompatibility(key, f"incompatible requirement {key}: {incoming!r} vs {existing!r}")
        return None

    def compatible(self, other: Requirements, allow_undefined: frozenset[str] = frozenset()) -> Incompatibility | None:
        """Strict compatibility of `other` against `self` (Karpenter's `Compatible`).

        Every key `other` requires must be defined here unless its operator is negative
        (NotIn/DoesNotExist without bounds: `allows_absent`) or it is in `allow_undefined`; then the sets
        must intersect.
        """
        for key, req in other._reqs.items():
            if key in self._reqs or key in allow_undefined or req.allows_absent():
                continue
            return Incompatibility(key, f"incompatible requirement {key}: {req!r} but {key} is not defined")
        return self.intersects(other)

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
            if value is None and key in _ALIASES:
                value = next((labels[a] for a in _ALIASES[key] if a in labels), None)
            if value is None:
                if r.allows_absent():
                    continue
                return Incompatibility(key, f"label {key} is missing, required {r!r}")
            if not r.has(value):
                return Incompatibility(key, f"label {key}={value} does not satisfy {r!r}")
        return None

    def specs(self) -> list[dict[str, Any]]:
        """NodeSelectorRequirement dicts; `from_specs(specs())` means the same (a key may appear twice)."""
        return [spec for r in self._reqs.values() for spec in r.specs()]

    def __repr__(self) -> str:
        return "Requirements(" + ", ".join(repr(r) for r in self._reqs.values()) + ")"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Requirements):
            return NotImplemented
        return self._reqs == other._reqs

    def __hash__(self) -> int:
        return hash(frozenset(self._reqs.items()))
