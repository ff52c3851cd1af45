"""Example tests for the requirement algebra (`carpool.requirements`).

The expected results follow Karpenter's `pkg/scheduling/requirement_test.go` / `requirements_test.go`
tables (restated here, compared by meaning rather than by structure), plus carpool's glob and order
extensions.
"""

from __future__ import annotations

import pytest

from carpool import labels as L
from carpool.requirements import (
    DOES_NOT_EXIST,
    EXISTS,
    GT,
    GTE,
    IN,
    LT,
    LTE,
    NOT_IN,
    OPERATORS,
    Incompatibility,
    Requirement,
    RequirementError,
    Requirements,
)

K = "key"
# Values probing every case of the tables below: names, small integers, other spellings of integers.
PROBE = ("A", "B", "C", "", "0", "1", "2", "5", "9", "10", "-1", "01", "c7i", "m5")


def req(op: str, *values: str, min_values: int | None = None, key: str = K) -> Requirement:
    return Requirement.of(key, op, values, min_values)


def allowed(r: Requirement, probe: tuple[str, ...] = PROBE) -> set[str]:
    return {v for v in probe if r.has(v)}


def reqs(*rs: Requirement) -> Requirements:
    return Requirements(rs)


# -- operators ----------------------------------------------------------------------------------------


class TestOperators:
    def test_in(self) -> None:
        r = req(IN, "A", "B")
        assert allowed(r) == {"A", "B"}
        assert r.operator == IN
        assert not r.is_empty()

    def test_not_in(self) -> None:
        r = req(NOT_IN, "A", "B")
        assert allowed(r) == set(PROBE) - {"A", "B"}
        assert r.operator == NOT_IN
        assert not r.is_empty()

    def test_exists(self) -> None:
        r = req(EXISTS)
        assert allowed(r) == set(PROBE)
        assert r.operator == EXISTS
        assert not r.is_empty()

    def test_does_not_exist(self) -> None:
        r = req(DOES_NOT_EXIST)
        assert allowed(r) == set()
        assert r.operator == DOES_NOT_EXIST
        assert r.is_empty()

    def test_gt_is_exclusive_and_integer_only(self) -> None:
        r = req(GT, "1")
        assert allowed(r) == {"2", "5", "9", "10"}
        assert r.has("01") is False  # 1 is not > 1
        assert r.has("02") is True  # another spelling of 2
        assert r.operator == EXISTS  # Karpenter: Gt/Lt are a bounded Exists

    def test_lt_is_exclusive_and_integer_only(self) -> None:
        r = req(LT, "2")
        assert allowed(r) == {"0", "1", "-1", "01"}
        assert r.operator == EXISTS

    def test_gte_includes_its_bound(self) -> None:
        assert allowed(req(GTE, "2")) == {"2", "5", "9", "10"}
        assert req(GTE, "2").has("1") is False

    def test_lte_includes_its_bound(self) -> None:
        assert allowed(req(LTE, "1")) == {"0", "1", "-1", "01"}
        assert req(LTE, "1").has("2") is False

    def test_gte_lte_same_value_is_exactly_that_integer(self) -> None:
        r = req(GTE, "5").intersection(req(LTE, "5"))
        assert allowed(r) == {"5"}
        assert not r.is_empty()

    @pytest.mark.parametrize("value", ["1_0", " 10", "10 ", "1e1", "0x10", "10.0", "", "ten"])
    def test_bounds_read_integers_as_go_does(self, value: str) -> None:
        # Karpenter uses strconv.Atoi: no underscores, spaces, exponents or hex
        assert req(GT, "0").has(value) is False

    def test_bounds_accept_signs_like_atoi(self) -> None:
        assert req(GT, "0").has("+5") is True
        assert req(LT, "0").has("-5") is True

    def test_every_operator_is_known(self) -> None:
        assert set(OPERATORS) == {IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT, GTE, LTE}


class TestValidation:
    def test_unknown_operator(self) -> None:
        with pytest.raises(RequirementError, match="unknown operator 'Equals'"):
            req("Equals", "A")

    def test_operator_is_case_sensitive(self) -> None:
        with pytest.raises(RequirementError):
            req("in", "A")

    @pytest.mark.parametrize("op", [GT, LT, GTE, LTE])
    @pytest.mark.parametrize("values", [("abc",), ("1.5",), ("1_0",), (" 1",), (), ("1", "2")])
    def test_bound_needs_exactly_one_integer(self, op: str, values: tuple[str, ...]) -> None:
        with pytest.raises(RequirementError, match=f"{K}: operator {op} needs exactly one integer value"):
            req(op, *values)

    def test_requirement_error_is_a_value_error(self) -> None:
        assert issubclass(RequirementError, ValueError)

    def test_values_are_stringified(self) -> None:
        r = Requirement.of(K, IN, [1, 2])  # type: ignore[list-item]
        assert r.has("1") and r.has("2")

    def test_from_specs_validates(self) -> None:
        with pytest.raises(RequirementError):
            Requirements.from_specs([{"key": K, "operator": GT, "values": ["x"]}])


# -- intersection: Karpenter's table -------------------------------------------------------------------

NAMED = {
    "exists": (EXISTS,),
    "doesNotExist": (DOES_NOT_EXIST,),
    "inA": (IN, "A"),
    "inB": (IN, "B"),
    "inAB": (IN, "A", "B"),
    "notInA": (NOT_IN, "A"),
    "in1": (IN, "1"),
    "in9": (IN, "9"),
    "in19": (IN, "1", "9"),
    "notIn12": (NOT_IN, "1", "2"),
    "greaterThan1": (GT, "1"),
    "greaterThan9": (GT, "9"),
    "lessThan1": (LT, "1"),
    "lessThan9": (LT, "9"),
}

# (left, right, expected) from Karpenter's "should intersect sets" table; `None` expected means the empty
# set (their `doesNotExist`).
KARPENTER_TABLE = [
    ("exists", "notIn12", "notIn12"),
    ("exists", "greaterThan1", "greaterThan1"),
    ("doesNotExist", "exists", None),
    ("doesNotExist", "notInA", None),
    ("inA", "inAB", "inA"),
    ("inA", "inB", None),
    ("inA", "notInA", None),
    ("inA", "notIn12", "inA"),
    ("inA", "greaterThan1", None),
    ("inAB", "notInA", "inB"),
    ("notInA", "in19", "in19"),
    ("notInA", "lessThan9", "lessThan9"),
    ("in1", "in19", "in1"),
    ("in1", "notIn12", None),
    ("in1", "lessThan9", "in1"),
    ("in9", "greaterThan1", "in9"),
    ("in9", "greaterThan9", None),
    ("in19", "notIn12", "in9"),
    ("in19", "greaterThan1", "in9"),
    ("in19", "lessThan9", "in1"),
    ("greaterThan1", "lessThan1", None),
    ("greaterThan9", "lessThan9", None),
    ("greaterThan1", "greaterThan9", "greaterThan9"),
    ("lessThan1", "lessThan9", "lessThan1"),
]


@pytest.mark.parametrize(("left", "right", "expected"), KARPENTER_TABLE)
def test_intersection_matches_karpenter(left: str, right: str, expected: str | None) -> None:
    a, b = req(*NAMED[left]), req(*NAMED[right])
    for got in (a.intersection(b), b.intersection(a)):
        if expected is None:
            assert got.is_empty()
            assert allowed(got) == set()
        else:
            assert allowed(got) == allowed(req(*NAMED[expected]))
            assert not got.is_empty()


def test_intersection_of_two_not_ins_unions_exclusions() -> None:
    got = req(NOT_IN, "A").intersection(req(NOT_IN, "1", "2"))
    assert got.operator == NOT_IN
    assert set(got.order) == {"A", "1", "2"}


def test_intersection_of_bounds_with_not_in() -> None:
    got = req(NOT_IN, "1", "2").intersection(req(GT, "1"))
    assert allowed(got) == {"5", "9", "10"}
    assert (got.gt, got.lt) == (1, None)


def test_intersection_of_bounds_keeps_both() -> None:
    got = req(GT, "1").intersection(req(LT, "9"))
    assert allowed(got) == {"2", "5"}
    assert (got.gt, got.lt) == (1, 9)


def test_contradictory_bounds_are_empty() -> None:
    assert req(GT, "5").intersection(req(LT, "6")).is_empty()
    assert req(GTE, "6").intersection(req(LTE, "5")).is_empty()
    assert not req(GT, "5").intersection(req(LT, "7")).is_empty()


def test_bounded_not_in_is_not_empty_because_integers_have_other_spellings() -> None:
    # Gt 1, Lt 3 leaves 2; NotIn [2] removes "2" but not "02" (Karpenter counts it as non-empty as well)
    got = req(GT, "1").intersection(req(LT, "3")).intersection(req(NOT_IN, "2"))
    assert not got.is_empty()
    assert got.has("02") and not got.has("2")


def test_intersection_keeps_the_key() -> None:
    assert req(IN, "A", key="x").intersection(req(EXISTS, key="x")).key == "x"


# -- minValues ------------------------------------------------------------------------------------------


class TestMinValues:
    def test_kept_from_either_side(self) -> None:
        assert req(EXISTS, min_values=2).intersection(req(IN, "A", "B")).min_values == 2
        assert req(IN, "A", "B").intersection(req(EXISTS, min_values=2)).min_values == 2

    def test_larger_wins(self) -> None:
        assert (
            req(IN, "A", "B", "C", min_values=1).intersection(req(NOT_IN, "C", min_values=3)).min_values == 3
        )

    def test_survives_an_empty_result(self) -> None:
        got = req(IN, "A", min_values=1).intersection(req(IN, "B"))
        assert got.is_empty() and got.min_values == 1

    def test_survives_contradictory_bounds(self) -> None:
        assert req(GT, "9", min_values=2).intersection(req(LT, "1")).min_values == 2

    def test_none_when_neither_has_it(self) -> None:
        assert req(IN, "A").intersection(req(EXISTS)).min_values is None

    def test_through_requirements_add(self) -> None:
        rs = reqs(req(IN, "A", "B", "C", min_values=2)).add(req(NOT_IN, "C"))
        assert rs[K].min_values == 2
        assert allowed(rs[K]) == {"A", "B"}

    def test_from_specs_reads_both_spellings(self) -> None:
        a = Requirements.from_specs([{"key": K, "operator": IN, "values": ["A", "B"], "minValues": 2}])
        b = Requirements.from_specs([{"key": K, "operator": IN, "values": ["A", "B"], "min_values": 2}])
        assert a[K].min_values == b[K].min_values == 2

    def test_spec_carries_it_for_every_operator(self) -> None:
        for op, values in [(IN, ("A",)), (NOT_IN, ("A",)), (EXISTS, ()), (GT, ("1",)), (LT, ("9",))]:
            assert req(op, *values, min_values=1).spec()["minValues"] == 1
            assert Requirements.from_specs(req(op, *values, min_values=1).specs())[K].min_values == 1


# -- has / is_empty / any --------------------------------------------------------------------------------


class TestAny:
    def test_in_prefers_the_first_listed_value(self) -> None:
        assert req(IN, "B", "A").any() == "B"

    def test_in_skips_globs(self) -> None:
        assert req(IN, "c7*", "m5").any() == "m5"
        assert req(IN, "c7*").any() is None

    def test_does_not_exist_has_none(self) -> None:
        assert req(DOES_NOT_EXIST).any() is None

    def test_unbounded_complement_invents_nothing(self) -> None:
        assert req(EXISTS).any() is None
        assert req(NOT_IN, "A").any() is None

    def test_gt(self) -> None:
        assert req(GT, "5").any() == "6"

    def test_lt(self) -> None:
        value = req(LT, "5").any()
        assert value is not None and req(LT, "5").has(value)

    def test_lt_zero_is_satisfiable(self) -> None:
        assert req(LT, "0").any() == "-1"
        assert req(LTE, "-3").any() == "-3"

    def test_bounded_skips_excluded_values(self) -> None:
        r = req(GT, "1").intersection(req(NOT_IN, "2", "3"))
        assert r.any() == "4"

    def test_any_satisfies(self) -> None:
        for spec in NAMED.values():
            value = req(*spec).any()
            if value is not None:
                assert req(*spec).has(value)


# -- globs ------------------------------------------------------------------------------------------------


class TestGlobs:
    def test_prefix_glob(self) -> None:
        r = req(IN, "c7*")
        assert r.has("c7i") and r.has("c7i-flex") and r.has("c7g")
        assert not r.has("c6i") and not r.has("m7i")

    def test_star_has_everything(self) -> None:
        r = req(IN, "*")
        assert allowed(r) == set(PROBE)
        assert not r.is_empty()

    def test_question_mark_and_class(self) -> None:
        assert req(IN, "c?i").has("c7i") and not req(IN, "c?i").has("c7gn")
        assert req(IN, "[cm]5").has("m5") and not req(IN, "[cm]5").has("r5")

    def test_not_in_glob_excludes_matches(self) -> None:
        r = req(NOT_IN, "c7*")
        assert not r.has("c7i") and not r.has("c7i-flex")
        assert r.has("m5") and r.has("c6i")

    def test_not_in_star_excludes_everything(self) -> None:
        r = req(NOT_IN, "*")
        assert allowed(r) == set()
        assert r.is_empty()

    def test_ordered_star_meets_concrete_value(self) -> None:
        got = req(IN, "c7i-flex", "*").intersection(req(IN, "m5"))
        assert got.operator == IN
        assert list(got.order) == ["m5"]
        assert got.has("m5") and not got.has("c7i-flex")

    def test_concrete_value_meets_ordered_star(self) -> None:
        got = req(IN, "m5").intersection(req(IN, "c7i-flex", "*"))
        assert list(got.order) == ["m5"]

    def test_glob_meets_values_it_matches(self) -> None:
        got = req(IN, "c7*").intersection(req(IN, "c7i", "m5", "c7g"))
        assert list(got.order) == ["c7i", "c7g"]

    def test_glob_meets_narrower_glob(self) -> None:
        got = req(IN, "c7*").intersection(req(IN, "c7i*"))
        assert got.has("c7i") and got.has("c7i-flex") and not got.has("c7g")
        assert not got.is_empty()

    def test_overlapping_globs_meet_in_both(self) -> None:
        got = req(IN, "c7*").intersection(req(IN, "*.large"))
        assert got.has("c7i.large")
        assert not got.has("c7i.xlarge") and not got.has("m5.large")
        assert not got.is_empty()

    def test_disjoint_globs_are_empty(self) -> None:
        assert req(IN, "c7*").intersection(req(IN, "m5*")).is_empty()
        assert req(IN, "*.large").intersection(req(IN, "*.xlarge")).is_empty()

    def test_glob_minus_not_in_value(self) -> None:
        got = req(IN, "c7*").intersection(req(NOT_IN, "c7i"))
        assert not got.has("c7i") and got.has("c7g")
        assert req(NOT_IN, "c7i").intersection(req(IN, "c7*")).has("c7i") is False

    def test_glob_minus_narrower_not_in_glob(self) -> None:
        got = req(IN, "c*").intersection(req(NOT_IN, "c7*"))
        assert got.has("c6i") and not got.has("c7i") and not got.has("c7i-flex")

    def test_glob_minus_wider_not_in_glob_is_empty(self) -> None:
        got = req(IN, "c7*").intersection(req(NOT_IN, "c*"))
        assert got.is_empty() and allowed(got) == set()

    def test_exclusions_survive_further_intersections(self) -> None:
        got = req(IN, "c*").intersection(req(NOT_IN, "c7i")).intersection(req(IN, "c7*"))
        assert got.has("c7g") and not got.has("c7i") and not got.has("c6i")

    def test_glob_with_bounds(self) -> None:
        got = req(IN, "1*").intersection(req(GT, "10"))
        assert got.has("12") and got.has("100") and not got.has("10") and not got.has("1")

    def test_letter_glob_with_bounds_is_empty(self) -> None:
        assert req(IN, "c7*").intersection(req(GT, "3")).is_empty()

    def test_star_with_contradictory_bounds_is_empty(self) -> None:
        assert req(IN, "*").intersection(req(GT, "3")).intersection(req(LT, "4")).is_empty()

    def test_globs_never_become_labels(self) -> None:
        assert reqs(req(IN, "c7*")).labels() == {}
        assert reqs(req(IN, "c7*").intersection(req(IN, "c7i"))).labels() == {K: "c7i"}


# -- order and preference ----------------------------------------------------------------------------------


class TestOrder:
    def test_values_keep_written_order(self) -> None:
        assert list(req(IN, "c", "a", "b").order) == ["c", "a", "b"]

    def test_duplicates_dropped_keeping_first(self) -> None:
        assert list(req(IN, "b", "a", "b").order) == ["b", "a"]

    def test_intersection_follows_self(self) -> None:
        assert list(req(IN, "c", "a", "b").intersection(req(IN, "a", "b", "c")).order) == ["c", "a", "b"]
        assert list(req(IN, "a", "b", "c").intersection(req(IN, "c", "a", "b")).order) == ["a", "b", "c"]

    def test_intersection_with_not_in_keeps_order(self) -> None:
        assert list(req(IN, "c", "a", "b").intersection(req(NOT_IN, "a")).order) == ["c", "b"]
        assert list(req(NOT_IN, "a").intersection(req(IN, "c", "a", "b")).order) == ["c", "b"]

    def test_values_matched_by_a_glob_take_its_place(self) -> None:
        got = req(IN, "c6*", "c7*").intersection(req(IN, "c7i", "c6i"))
        assert list(got.order) == ["c6i", "c7i"]

    def test_flex_first(self) -> None:
        got = req(IN, "c7i-flex", "*").intersection(req(IN, "m5", "c7i-flex", "r6i"))
        assert list(got.order) == ["c7i-flex", "m5", "r6i"]

    def test_requirements_add_keeps_existing_order(self) -> None:
        rs = reqs(req(IN, "c7i-flex", "*")).add(req(IN, "m5", "c7i-flex"))
        assert list(rs[K].order) == ["c7i-flex", "m5"]

    def test_preference_rank(self) -> None:
        r = req(IN, "c7i-flex", "c7*", "*")
        assert r.preference_rank("c7i-flex") == 0
        assert r.preference_rank("c7g") == 1
        assert r.preference_rank("m5") == 2
        assert req(IN, "a", "b").preference_rank("z") == 2

    def test_preference_rank_of_a_complement(self) -> None:
        assert req(NOT_IN, "a").preference_rank("b") == 0
        assert req(NOT_IN, "a").preference_rank("a") == 1
        assert req(EXISTS).preference_rank("anything") == 0

    def test_preference_rank_after_glob_intersection(self) -> None:
        r = req(IN, "c7*", "*").intersection(req(IN, "*.large"))
        assert r.preference_rank("c7i.large") == 0
        assert r.preference_rank("m5.large") == 1


# -- Requirements -----------------------------------------------------------------------------------------


class TestRequirementsSet:
    def test_same_key_twice_intersects(self) -> None:
        rs = reqs(req(IN, "A", "B"), req(IN, "B", "C"))
        assert len(rs) == 1 and allowed(rs[K]) == {"B"}

    def test_add_returns_a_new_set(self) -> None:
        base = reqs(req(IN, "A", "B"))
        more = base.add(req(NOT_IN, "A"), req(EXISTS, key="other"))
        assert allowed(base[K]) == {"A", "B"} and "other" not in base
        assert allowed(more[K]) == {"B"} and "other" in more

    def test_merge(self) -> None:
        a = reqs(req(IN, "A", "B"), req(EXISTS, key="x"))
        b = reqs(req(IN, "B", "C"), req(IN, "1", key="y"))
        merged = a.merge(b)
        assert set(merged) == {K, "x", "y"}
        assert allowed(merged[K]) == {"B"}
        assert merged == b.merge(a)

    def test_mapping_protocol(self) -> None:
        rs = reqs(req(IN, "A"), req(EXISTS, key="x"))
        assert list(rs) == [K, "x"] and len(rs) == 2 and "x" in rs
        with pytest.raises(KeyError):
            rs["missing"]

    def test_from_labels(self) -> None:
        rs = Requirements.from_labels({"a": "1", "b": "2"})
        assert rs["a"].operator == IN and list(rs["a"].order) == ["1"]
        assert rs.labels() == {"a": "1", "b": "2"}

    def test_from_specs_accepts_objects(self) -> None:
        class Spec:
            key, operator, values, min_values = K, IN, ["A"], 1

        rs = Requirements.from_specs([Spec()])
        assert allowed(rs[K]) == {"A"} and rs[K].min_values == 1

    def test_from_specs_null_values(self) -> None:
        rs = Requirements.from_specs([{"key": K, "operator": EXISTS, "values": None}])
        assert rs[K].operator == EXISTS

    def test_equality_and_hash(self) -> None:
        a = reqs(req(IN, "A", "B"), req(EXISTS, key="x"))
        b = reqs(req(EXISTS, key="x"), req(IN, "B", "A"))
        assert a == b and hash(a) == hash(b)
        assert a != reqs(req(IN, "A"))


class TestIntersects:
    def test_disjoint_keys_intersect(self) -> None:
        assert reqs(req(IN, "A", key="x")).intersects(reqs(req(IN, "B", key="y"))) is None

    def test_overlapping_values(self) -> None:
        assert reqs(req(IN, "A", "B")).intersects(reqs(req(IN, "B"))) is None

    def test_disjoint_values(self) -> None:
        err = reqs(req(IN, "A")).intersects(reqs(req(IN, "B")))
        assert isinstance(err, Incompatibility) and err.key == K
        assert K in str(err)

    def test_both_negative_with_empty_intersection_is_allowed(self) -> None:
        # Karpenter: DoesNotExist vs NotIn (both negative) does not conflict
        assert reqs(req(DOES_NOT_EXIST)).intersects(reqs(req(NOT_IN, "A"))) is None
        assert reqs(req(NOT_IN, "A")).intersects(reqs(req(DOES_NOT_EXIST))) is None
        assert reqs(req(DOES_NOT_EXIST)).intersects(reqs(req(DOES_NOT_EXIST))) is None

    def test_one_negative_with_empty_intersection_conflicts(self) -> None:
        assert reqs(req(IN, "A")).intersects(reqs(req(NOT_IN, "A"))) is not None
        assert reqs(req(IN, "A")).intersects(reqs(req(DOES_NOT_EXIST))) is not None
        assert reqs(req(DOES_NOT_EXIST)).intersects(reqs(req(IN, "A"))) is not None
        assert reqs(req(EXISTS)).intersects(reqs(req(DOES_NOT_EXIST))) is not None

    def test_bounds(self) -> None:
        assert reqs(req(GT, "1")).intersects(reqs(req(LT, "1"))) is not None
        assert reqs(req(GT, "1")).intersects(reqs(req(IN, "9"))) is None
        assert reqs(req(GT, "9")).intersects(reqs(req(IN, "1", "9"))) is not None

    def test_glob_conflicts(self) -> None:
        assert reqs(req(IN, "c7*")).intersects(reqs(req(IN, "c7i*"))) is None
        assert reqs(req(IN, "c7*")).intersects(reqs(req(IN, "m5*"))) is not None
        assert reqs(req(IN, "c7*")).intersects(reqs(req(NOT_IN, "c*"))) is not None


# Karpenter's compatibility table (requirements_test.go "should be compatible"), for a key both sides
# may leave undefined (they use a well-known label; here: allow_undefined). True = compatible.
COMPATIBLE = {
    ("exists", "doesNotExist"): False,
    ("exists", "notIn12"): True,
    ("doesNotExist", "exists"): False,
    ("doesNotExist", "doesNotExist"): True,
    ("doesNotExist", "inA"): False,
    ("doesNotExist", "notInA"): True,
    ("doesNotExist", "greaterThan1"): False,
    ("inA", "exists"): True,
    ("inA", "doesNotExist"): False,
    ("inA", "inAB"): True,
    ("inA", "notInA"): False,
    ("inA", "notIn12"): True,
    ("inA", "greaterThan1"): False,
    ("notInA", "doesNotExist"): True,
    ("notInA", "inA"): False,
    ("notInA", "inB"): True,
    ("notInA", "lessThan1"): True,
    ("in1", "notIn12"): False,
    ("in1", "lessThan9"): True,
    ("in9", "greaterThan1"): True,
    ("in9", "lessThan9"): False,
    ("notIn12", "in1"): False,
    ("notIn12", "doesNotExist"): True,
    ("greaterThan1", "notInA"): True,
    ("greaterThan1", "lessThan1"): False,
    ("greaterThan1", "lessThan9"): True,
    ("greaterThan9", "lessThan9"): False,
    ("lessThan9", "in1"): True,
    ("lessThan1", "lessThan9"): True,
}


@pytest.mark.parametrize(("existing", "incoming"), list(COMPATIBLE))
def test_compatible_matches_karpenter(existing: str, incoming: str) -> None:
    a, b = reqs(req(*NAMED[existing])), reqs(req(*NAMED[incoming]))
    assert (a.compatible(b, allow_undefined=frozenset({K})) is None) is COMPATIBLE[(existing, incoming)]


@pytest.mark.parametrize("incoming", list(NAMED))
def test_unconstrained_side_accepts_everything_when_undefined_is_allowed(incoming: str) -> None:
    assert reqs().compatible(reqs(req(*NAMED[incoming])), allow_undefined=frozenset({K})) is None


class TestCompatibleStrict:
    @pytest.mark.parametrize("incoming", ["exists", "inA", "in19", "greaterThan1", "lessThan9"])
    def test_undefined_key_rejects_positive_operators(self, incoming: str) -> None:
        err = reqs().compatible(reqs(req(*NAMED[incoming])))
        assert err is not None and err.key == K and "not defined" in err.reason

    @pytest.mark.parametrize("incoming", ["doesNotExist", "notInA", "notIn12"])
    def test_undefined_key_accepts_negative_operators(self, incoming: str) -> None:
        assert reqs().compatible(reqs(req(*NAMED[incoming]))) is None

    def test_allow_undefined(self) -> None:
        assert reqs().compatible(reqs(req(IN, "A")), allow_undefined=frozenset({K})) is None
        assert reqs().compatible(reqs(req(IN, "A")), allow_undefined=frozenset({"other"})) is not None

    def test_keys_only_in_self_do_not_matter(self) -> None:
        assert reqs(req(IN, "A", key="x")).compatible(reqs()) is None

    def test_defined_keys_must_intersect(self) -> None:
        assert reqs(req(IN, "A")).compatible(reqs(req(IN, "B"))) is not None


class TestAmiMapping:
    """An AMI's requirements against an instance type's (built from its labels), strictly."""

    CPU_TYPE = {L.INSTANCE_TYPE: "m5.large", L.ARCH: "amd64", L.INSTANCE_FAMILY: "m5"}
    GPU_TYPE = {L.INSTANCE_TYPE: "g5.xlarge", L.ARCH: "amd64", L.INSTANCE_GPU_COUNT: "1"}

    def nvidia(self) -> Requirements:
        return reqs(req(IN, "amd64", key=L.ARCH), req(EXISTS, key=L.INSTANCE_GPU_COUNT))

    def standard(self) -> Requirements:
        return reqs(req(IN, "amd64", key=L.ARCH), req(DOES_NOT_EXIST, key=L.INSTANCE_GPU_COUNT))

    def test_cpu_type_is_incompatible_with_gpu_exists(self) -> None:
        err = Requirements.from_labels(self.CPU_TYPE).compatible(self.nvidia())
        assert err is not None and err.key == L.INSTANCE_GPU_COUNT

    def test_cpu_type_is_compatible_with_gpu_does_not_exist(self) -> None:
        assert Requirements.from_labels(self.CPU_TYPE).compatible(self.standard()) is None

    def test_gpu_type_is_incompatible_with_does_not_exist(self) -> None:
        err = Requirements.from_labels(self.GPU_TYPE).compatible(self.standard())
        assert err is not None and err.key == L.INSTANCE_GPU_COUNT

    def test_gpu_type_is_compatible_with_exists(self) -> None:
        assert Requirements.from_labels(self.GPU_TYPE).compatible(self.nvidia()) is None

    def test_arch_mismatch(self) -> None:
        arm = {**self.GPU_TYPE, L.ARCH: "arm64"}
        err = Requirements.from_labels(arm).compatible(self.nvidia())
        assert err is not None and err.key == L.ARCH

    def test_allow_undefined_would_wrongly_admit_the_cpu_type(self) -> None:
        # why AMI mapping must be strict: a loose check lets a GPU AMI onto a CPU-only type
        loose = Requirements.from_labels(self.CPU_TYPE).compatible(
            self.nvidia(), allow_undefined=frozenset({L.INSTANCE_GPU_COUNT})
        )
        assert loose is None


# -- labels / satisfied_by ----------------------------------------------------------------------------------


class TestLabels:
    def test_single_concrete_values_only(self) -> None:
        rs = reqs(
            req(IN, "a", key="one"),
            req(IN, "a", "b", key="two"),
            req(EXISTS, key="exists"),
            req(NOT_IN, "a", key="notin"),
            req(DOES_NOT_EXIST, key="dne"),
            req(GT, "1", key="gt"),
            req(IN, "c7*", key="glob"),
        )
        assert rs.labels() == {"one": "a"}

    def test_after_narrowing(self) -> None:
        rs = reqs(req(IN, "a", "b")).add(req(NOT_IN, "b"))
        assert rs.labels() == {K: "a"}


class TestSatisfiedBy:
    @pytest.mark.parametrize(
        ("spec", "present", "absent"),
        [
            ((IN, "A"), {"A": True, "B": False}, False),
            ((NOT_IN, "A"), {"A": False, "B": True}, True),
            ((EXISTS,), {"A": True}, False),
            ((DOES_NOT_EXIST,), {"A": False}, True),
            ((GT, "1"), {"2": True, "1": False, "x": False}, False),
            ((LT, "1"), {"0": True, "1": False}, False),
            ((GTE, "1"), {"1": True, "0": False}, False),
            ((LTE, "1"), {"1": True, "2": False}, False),
        ],
    )
    def test_node_selector_semantics(
        self, spec: tuple[str, ...], present: dict[str, bool], absent: bool
    ) -> None:
        rs = reqs(req(*spec))
        for value, ok in present.items():
            assert (rs.satisfied_by({K: value}) is None) is ok, value
        assert (rs.satisfied_by({}) is None) is absent
        assert (rs.satisfied_by({"unrelated": "x"}) is None) is absent

    def test_not_in_with_bounds_needs_the_label(self) -> None:
        rs = reqs(req(NOT_IN, "5"), req(GT, "1"))
        assert rs.satisfied_by({}) is not None
        assert rs.satisfied_by({K: "3"}) is None

    def test_every_requirement_must_hold(self) -> None:
        rs = reqs(req(IN, "a", key="x"), req(DOES_NOT_EXIST, key="y"))
        assert rs.satisfied_by({"x": "a"}) is None
        err = rs.satisfied_by({"x": "a", "y": "1"})
        assert err is not None and err.key == "y"
        err = rs.satisfied_by({"y": "1"})
        assert err is not None and "missing" in err.reason

    def test_glob(self) -> None:
        rs = reqs(req(IN, "c7i-flex", "*", key=L.INSTANCE_FAMILY))
        assert rs.satisfied_by({L.INSTANCE_FAMILY: "m5"}) is None
        assert rs.satisfied_by({}) is not None

    def test_empty_requirements_accept_anything(self) -> None:
        assert reqs().satisfied_by({}) is None
        assert reqs().satisfied_by({"a": "b"}) is None


# -- specs ---------------------------------------------------------------------------------------------------


class TestSpecs:
    @pytest.mark.parametrize("spec", list(NAMED.values()))
    def test_spec_of_a_single_operator_round_trips(self, spec: tuple[str, ...]) -> None:
        r = req(*spec)
        assert Requirements.from_specs([r.spec()])[K] == r

    def test_spec_shapes(self) -> None:
        assert req(IN, "b", "a").spec() == {"key": K, "operator": IN, "values": ["b", "a"]}
        assert req(EXISTS).spec() == {"key": K, "operator": EXISTS}
        assert req(GT, "3").spec() == {"key": K, "operator": GT, "values": ["3"]}
        assert req(GTE, "3").spec() == {"key": K, "operator": GT, "values": ["2"]}
        assert req(LTE, "3").spec() == {"key": K, "operator": LT, "values": ["4"]}

    def test_empty_set_is_does_not_exist_not_gt(self) -> None:
        # `In [1]` meeting `Gt 3` allows nothing: it must not come back as `Gt 3`
        assert req(IN, "1").intersection(req(GT, "3")).spec()["operator"] == DOES_NOT_EXIST

    @pytest.mark.parametrize(
        "parts",
        [
            [(NOT_IN, "2"), (GT, "1")],
            [(GT, "1"), (LT, "9")],
            [(NOT_IN, "2"), (GT, "1"), (LT, "9")],
            [(IN, "c*"), (NOT_IN, "c7i", "c6*")],
            [(IN, "1*"), (GT, "10")],
            [(IN, "c7*"), (IN, "*.large")],
            [(IN, "1", "2"), (GT, "5")],
            [(IN, "1", "9"), (GT, "5")],
            [(EXISTS,), (NOT_IN, "*")],
        ],
    )
    def test_requirements_specs_round_trip(self, parts: list[tuple[str, ...]]) -> None:
        original = reqs(*(req(*p) for p in parts))
        again = Requirements.from_specs(original.specs())
        probe = (*PROBE, "c7i", "c6i", "c6g", "c5", "12", "100", "c7i.large", "m5.large")
        for value in probe:
            assert again[K].has(value) == original[K].has(value), value
        for labels in ({}, {K: "3"}, {K: "c5"}):
            assert (again.satisfied_by(labels) is None) == (original.satisfied_by(labels) is None)

    def test_plain_values_do_not_repeat_bounds(self) -> None:
        assert reqs(req(IN, "1", "9"), req(GT, "5")).specs() == [{"key": K, "operator": IN, "values": ["9"]}]

    def test_repr_is_readable(self) -> None:
        assert repr(req(IN, "a")) == "key In ['a']"
        assert repr(req(GT, "1").intersection(req(LT, "9"))) == "key Exists >1 <9"
        assert "except ['c7i']" in repr(req(IN, "c*").intersection(req(NOT_IN, "c7i")))
