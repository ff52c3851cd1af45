"""Property-based tests: the laws of the requirement algebra over a small universe.

Requirements are generated with every operator over keys {a, b} and values {1..5, x, y}. Laws about
`has` are checked on PROBE, which is chosen so that it *decides* emptiness for these requirements:
- listed values are in it ("1".."5", "x", "y");
- "z" is never excluded, so it witnesses any unbounded complement;
- "0", "-1", "6", "7" witness half-bounded complements (bounds come from 1..5, so Gte 1 / Lte 5 at most);
- "01".."05" are spellings of 1..5 that no NotIn lists, so they witness bounded complements whose canonical
  values are all excluded (`Gt 1, Lt 3, NotIn [2]` still admits "02", as in Karpenter).
So "no PROBE value satisfies r" is exactly "nothing satisfies r", and `is_empty` can be tested both ways.

Glob requirements get their own generator and universe; there `is_empty` is only required to be sound (it
may call an undecidable glob combination non-empty, never the reverse).
"""

from __future__ import annotations

import fnmatch
import os
import re
from functools import reduce

from hypothesis import example, given, settings
from hypothesis import strategies as st

from carpool.requirements import (
    DOES_NOT_EXIST,
    EXISTS,
    GT,
    GTE,
    IN,
    LT,
    LTE,
    NEGATIVE,
    NOT_IN,
    OPERATORS,
    Requirement,
    Requirements,
)

#: no deadline: a unit test must not be timed. 50 examples per law in `make test`: with that many, an
#: off-by-one in bound emptiness or in `Gt`/`Lt` (also pinned below), an intersection that drops the other
#: side's `Lt` or NotIn values, or a `minValues` merged to the smaller still fails at least one law on every
#: run, as with 100 (the explicit `@example`s pin the cases found before); CARPOOL_LAW_EXAMPLES=5000 for a
#: deeper run.
laws = settings(deadline=None, max_examples=int(os.environ.get("CARPOOL_LAW_EXAMPLES", "50")))

KEYS = ("a", "b")
VALUES = ("1", "2", "3", "4", "5", "x", "y")
INTEGERS = ("1", "2", "3", "4", "5")
BOUNDS = (GT, LT, GTE, LTE)
PROBE = ("-1", "0", "1", "2", "3", "4", "5", "6", "7", "x", "y", "z", "01", "02", "03", "04", "05", "")

GLOB_VALUES = (*VALUES, "*", "x*", "*y", "1*", "[1-3]", "?", "x?", "[xy]*", "*1*")
GLOB_PROBE = (*PROBE, "x1", "xy", "xx", "yx", "1y", "11", "12", "21", "10", "100", "x1y", "ab", "xyz")


@st.composite
def requirements(draw: st.DrawFn, key: str | None = None, values: tuple[str, ...] = VALUES) -> Requirement:
    k = key if key is not None else draw(st.sampled_from(KEYS))
    op = draw(st.sampled_from(OPERATORS))
    if op in (IN, NOT_IN):
        vals = draw(st.lists(st.sampled_from(values), min_size=1, max_size=4))
    elif op in BOUNDS:
        vals = [draw(st.sampled_from(INTEGERS))]
    else:
        vals = []
    min_values = draw(st.none() | st.integers(1, 3))
    return Requirement.of(k, op, vals, min_values)


def one_key(values: tuple[str, ...] = VALUES) -> st.SearchStrategy[Requirement]:
    """A requirement on key "a", possibly already the intersection of a few (bounded NotIn, etc.)."""
    chain = st.lists(requirements("a", values), min_size=1, max_size=3)
    return chain.map(lambda rs: reduce(Requirement.intersection, rs))


plain = one_key()
globbed = one_key(GLOB_VALUES)
requirement_sets = st.lists(requirements(), max_size=4).map(Requirements)
label_sets = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(PROBE), max_size=2)

#: `a NotIn [1]` and `a Gt 3`: negative by operator, yet only a node *with* the label can satisfy it.
BOUNDED_NOT_IN = Requirements([Requirement.of("a", NOT_IN, ["1"]), Requirement.of("a", GT, ["3"])])


def allowed(r: Requirement, probe: tuple[str, ...] = PROBE) -> frozenset[str]:
    return frozenset(v for v in probe if r.has(v))


# -- intersection laws ------------------------------------------------------------------------------------


@laws
@given(plain, plain)
def test_has_of_intersection_is_has_of_both(a: Requirement, b: Requirement) -> None:
    both = a.intersection(b)
    for v in PROBE:
        assert both.has(v) == (a.has(v) and b.has(v)), v


@laws
@given(globbed, globbed)
def test_has_of_intersection_is_has_of_both_with_globs(a: Requirement, b: Requirement) -> None:
    both = a.intersection(b)
    for v in GLOB_PROBE:
        assert both.has(v) == (a.has(v) and b.has(v)), (v, both)


@laws
@given(globbed, globbed)
def test_intersection_is_commutative(a: Requirement, b: Requirement) -> None:
    assert allowed(a.intersection(b), GLOB_PROBE) == allowed(b.intersection(a), GLOB_PROBE)
    assert a.intersection(b).is_empty() == b.intersection(a).is_empty()


#: finite value lists (`In`, what instance-type labels are), where `meets` takes its shortcut
listed = st.lists(st.sampled_from(GLOB_PROBE[:12]), max_size=3).map(lambda vs: Requirement("a", False, vs))


@laws
@given(globbed, globbed)
@example(Requirement.in_("a", "2"), Requirement.of("a", GT, ["1"]).intersection(Requirement.of("a", LT, ["3"])))
@example(Requirement.in_("a", "x1"), Requirement.of("a", IN, ["x*"]).intersection(Requirement.of("a", NOT_IN, ["x1"])))
def test_meets_is_a_non_empty_intersection(a: Requirement, b: Requirement) -> None:
    assert a.meets(b) == (not a.intersection(b).is_empty())
    assert b.meets(a) == (not b.intersection(a).is_empty())


@laws
@given(listed, globbed)
def test_meets_a_value_list_is_a_non_empty_intersection(a: Requirement, b: Requirement) -> None:
    assert a.plain
    assert a.meets(b) == (not a.intersection(b).is_empty()) == b.meets(a) == (not b.intersection(a).is_empty())


@laws
@given(globbed, globbed, globbed)
def test_intersection_is_associative(a: Requirement, b: Requirement, c: Requirement) -> None:
    left = a.intersection(b).intersection(c)
    right = a.intersection(b.intersection(c))
    assert allowed(left, GLOB_PROBE) == allowed(right, GLOB_PROBE)


@laws
@given(plain)
def test_intersection_is_idempotent(a: Requirement) -> None:
    assert a.intersection(a) == a
    assert allowed(a.intersection(a)) == allowed(a)


@laws
@given(globbed)
def test_intersection_is_idempotent_with_globs(a: Requirement) -> None:
    assert allowed(a.intersection(a), GLOB_PROBE) == allowed(a, GLOB_PROBE)
    assert a.intersection(a).is_empty() == a.is_empty()


@laws
@given(globbed)
def test_exists_is_the_identity(a: Requirement) -> None:
    exists = Requirement.of("a", EXISTS)
    for got in (a.intersection(exists), exists.intersection(a)):
        assert allowed(got, GLOB_PROBE) == allowed(a, GLOB_PROBE)
        assert got.is_empty() == a.is_empty()
        assert got.min_values == a.min_values
    assert list(a.intersection(exists).order) == list(a.order)


@laws
@given(globbed)
def test_does_not_exist_absorbs(a: Requirement) -> None:
    dne = Requirement.of("a", DOES_NOT_EXIST)
    for got in (a.intersection(dne), dne.intersection(a)):
        assert got.is_empty()
        assert allowed(got, GLOB_PROBE) == frozenset()


@laws
@given(plain, plain)
def test_min_values_is_the_larger(a: Requirement, b: Requirement) -> None:
    expected = max((m for m in (a.min_values, b.min_values) if m is not None), default=None)
    assert a.intersection(b).min_values == expected


# -- emptiness ------------------------------------------------------------------------------------------------


@laws
@given(plain)
@example(Requirement.of("a", GT, ["4"]).intersection(Requirement.of("a", LT, ["5"])))  # no integer between
@example(Requirement.of("a", GT, ["3"]).intersection(Requirement.of("a", LT, ["5"])))  # 4 alone
def test_is_empty_iff_nothing_satisfies(a: Requirement) -> None:
    assert a.is_empty() == (not allowed(a)), a


@laws
@given(globbed)
def test_is_empty_is_sound_with_globs(a: Requirement) -> None:
    if a.is_empty():
        assert not allowed(a, GLOB_PROBE), a


@laws
@given(plain)
def test_any_satisfies(a: Requirement) -> None:
    value = a.any()
    if value is not None:
        assert a.has(value)
    elif not a.complement:
        assert a.is_empty()  # a plain (glob-free) value set always offers one of its values


# -- order ------------------------------------------------------------------------------------------------------


@laws
@given(globbed, globbed)
def test_intersection_keeps_the_preference_of_self(a: Requirement, b: Requirement) -> None:
    """If `a` prefers v to w (lower `preference_rank`), so does `a ∩ b`, for every value both admit."""
    got = a.intersection(b)
    admitted = [v for v in GLOB_PROBE if got.has(v)]
    for v in admitted:
        for w in admitted:
            if a.preference_rank(v) < a.preference_rank(w):
                assert got.preference_rank(v) <= got.preference_rank(w), (a, b, got, v, w)


@laws
@given(plain, plain)
def test_plain_intersection_is_a_subsequence_of_self(a: Requirement, b: Requirement) -> None:
    got = a.intersection(b)
    if a.complement and b.complement:
        assert set(got.order) == set(a.order) | set(b.order)  # NotIn lists add up
        return
    source = list(b.order) if a.complement else list(a.order)
    positions = [source.index(v) for v in got.order]
    assert positions == sorted(positions)


# -- Requirements laws --------------------------------------------------------------------------------------


@laws
@given(requirement_sets, requirement_sets)
def test_intersects_is_symmetric(a: Requirements, b: Requirements) -> None:
    # the negative-operator exception needs *both* sides negative, so it is symmetric too
    assert (a.intersects(b) is None) == (b.intersects(a) is None)


@laws
@given(requirement_sets, requirement_sets)
def test_compatible_implies_intersects(a: Requirements, b: Requirements) -> None:
    if a.compatible(b) is None:
        assert a.intersects(b) is None
    if a.compatible(b, allow_undefined=frozenset(KEYS)) is None:
        assert a.intersects(b) is None


@laws
@given(requirement_sets, requirement_sets)
def test_allow_undefined_everything_is_intersects(a: Requirements, b: Requirements) -> None:
    assert (a.compatible(b, allow_undefined=frozenset(KEYS)) is None) == (a.intersects(b) is None)


@example(Requirements(), BOUNDED_NOT_IN)
@laws
@given(requirement_sets, requirement_sets)
def test_strict_compatible_only_adds_the_undefined_key_rule(a: Requirements, b: Requirements) -> None:
    # a key `a` leaves undefined is fine only if a node without that label satisfies `b` on it
    undefined_needs_label = [
        k for k, r in b.items() if k not in a and Requirements([r]).satisfied_by({}) is not None
    ]
    loose = a.intersects(b) is None
    assert (a.compatible(b) is None) == (loose and not undefined_needs_label)


@laws
@given(requirement_sets, requirement_sets, label_sets)
def test_labels_accepted_by_both_are_accepted_by_the_merge(a: Requirements, b: Requirements, labels) -> None:
    if a.satisfied_by(labels) is None and b.satisfied_by(labels) is None:
        assert a.add(*b.values()).satisfied_by(labels) is None
        assert a.merge(b).satisfied_by(labels) is None


@laws
@given(requirement_sets, requirement_sets, label_sets)
def test_labels_accepted_by_both_means_they_intersect(a: Requirements, b: Requirements, labels) -> None:
    if a.satisfied_by(labels) is None and b.satisfied_by(labels) is None:
        assert a.intersects(b) is None


def satisfiable(r: Requirement) -> bool:
    """Some node satisfies `r` alone: a value does, or (NotIn/DoesNotExist without bounds) no label."""
    return not r.is_empty() or (r.operator in NEGATIVE and r.gt is None and r.lt is None)


@example(BOUNDED_NOT_IN, Requirements([Requirement.of("a", DOES_NOT_EXIST)]))
@example(Requirements([Requirement.of("a", DOES_NOT_EXIST)]), BOUNDED_NOT_IN)
@laws
@given(requirement_sets, requirement_sets)
def test_intersecting_sets_have_a_common_node(a: Requirements, b: Requirements) -> None:
    """The converse: when `intersects` says yes (and each side can be met alone), some node meets both."""
    if a.intersects(b) is not None or not all(satisfiable(r) for r in (*a.values(), *b.values())):
        return
    merged = a.merge(b)
    candidates: dict[str, list[str | None]] = {}
    for key in KEYS:
        if key not in merged:
            candidates[key] = [None]
        else:
            candidates[key] = [None, *allowed(merged[key])]
    found = False
    for va in candidates["a"]:
        for vb in candidates["b"]:
            node = {k: v for k, v in (("a", va), ("b", vb)) if v is not None}
            if a.satisfied_by(node) is None and b.satisfied_by(node) is None:
                found = True
    assert found, (a, b)


@laws
@given(requirement_sets, label_sets)
def test_satisfied_by_agrees_with_has(a: Requirements, labels: dict[str, str]) -> None:
    expected = all(r.has(labels[k]) for k, r in a.items() if k in labels)
    if a.satisfied_by(labels) is None:
        assert expected
    elif all(k in labels for k in a):
        assert not expected


@laws
@given(requirement_sets)
def test_labels_satisfy_their_requirements(a: Requirements) -> None:
    for key, value in a.labels().items():
        assert a[key].has(value)


@laws
@given(requirement_sets)
def test_from_labels_of_labels_is_compatible(a: Requirements) -> None:
    node = Requirements.from_labels(a.labels())
    for key in node:
        assert node[key].intersection(a[key]).is_empty() is False


@laws
@given(st.lists(requirements(values=GLOB_VALUES), max_size=4).map(Requirements), label_sets)
def test_specs_round_trip(a: Requirements, labels: dict[str, str]) -> None:
    again = Requirements.from_specs(a.specs())
    assert set(again) == set(a)
    for key in a:
        assert allowed(again[key], GLOB_PROBE) == allowed(a[key], GLOB_PROBE)
        assert again[key].min_values == a[key].min_values
    assert (again.satisfied_by(labels) is None) == (a.satisfied_by(labels) is None)


# -- satisfied_by against Kubernetes' own reading of each NodeSelectorRequirement -----------------------------

Spec = tuple[str, str, tuple[str, ...]]


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    key = draw(st.sampled_from(KEYS))
    op = draw(st.sampled_from(OPERATORS))
    if op in (IN, NOT_IN):
        return key, op, tuple(draw(st.lists(st.sampled_from(GLOB_VALUES), min_size=1, max_size=3)))
    if op in BOUNDS:
        return key, op, (draw(st.sampled_from(INTEGERS)),)
    return key, op, ()


def kubernetes_matches(spec: Spec, labels: dict[str, str]) -> bool:
    """One NodeSelectorRequirement on a node's labels, as the kube-scheduler reads it (globs: carpool)."""
    key, op, values = spec
    value = labels.get(key)
    listed = value is not None and any(fnmatch.fnmatchcase(value, v) for v in values)
    if op == IN:
        return listed
    if op == NOT_IN:
        return not listed
    if op == EXISTS:
        return value is not None
    if op == DOES_NOT_EXIST:
        return value is None
    if value is None or not re.fullmatch(r"[+-]?[0-9]+", value):
        return False
    n, bound = int(value), int(values[0])
    return {GT: n > bound, LT: n < bound, GTE: n >= bound, LTE: n <= bound}[op]


@laws
@given(st.lists(specs(), max_size=4), label_sets)
def test_satisfied_by_agrees_with_kubernetes(spec_list: list[Spec], labels: dict[str, str]) -> None:
    rs = Requirements.from_specs({"key": k, "operator": op, "values": list(v)} for k, op, v in spec_list)
    expected = all(kubernetes_matches(spec, labels) for spec in spec_list)
    if expected:
        assert rs.satisfied_by(labels) is None
    if all(k in labels for k, _, _ in spec_list):
        # with every label present the merge is exact; without, Karpenter's algebra turns e.g.
        # `In [1]` + `In [2]` into DoesNotExist, which an absent label satisfies
        assert (rs.satisfied_by(labels) is None) == expected
