"""operatorpkg's condition algebra (`status/condition_set.go`) as `ConditionSet` reproduces it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from carpool.karpenter_status.conditions import ConditionSet, failing_dependents, timestamp

T0 = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
CREATED = "2026-12-01T00:00:00Z"


def _obj(generation: int = 1, conditions: list | None = None, **meta: object) -> dict:
    return {"metadata": {"name": "x", "generation": generation, "creationTimestamp": CREATED, **meta},
            "status": {"conditions": conditions} if conditions is not None else {}}


def _by_type(cs: ConditionSet) -> dict[str, dict]:
    return {c["type"]: c for c in cs.conditions()}


def test_a_new_object_starts_unknown_from_its_creation() -> None:
    cs = ConditionSet(_obj(), ("A", "B"), T0)
    got = _by_type(cs)
    assert set(got) == {"Ready", "A", "B"}
    assert all(c["status"] == "Unknown" for c in got.values())
    assert all(c["lastTransitionTime"] == CREATED for c in got.values())
    assert got["A"]["reason"] == "AwaitingReconciliation"
    assert got["Ready"]["reason"] == "ReconcilingDependents"
    assert got["Ready"]["message"] == "A=Unknown, B=Unknown"
    assert [c["type"] for c in cs.conditions()][-1] == "Ready"  # the root last


def test_ready_true_only_when_every_dependent_is_true() -> None:
    cs = ConditionSet(_obj(generation=3), ("A", "B"), T0)
    cs.set_true("A")
    assert _by_type(cs)["Ready"]["status"] == "Unknown"
    cs.set_true("B")
    ready = _by_type(cs)["Ready"]
    assert (ready["status"], ready["reason"], ready["message"], ready["observedGeneration"]) == ("True", "Ready", "", 3)
    assert ready["lastTransitionTime"] == timestamp(T0)
    assert _by_type(cs)["A"]["reason"] == "A"  # SetTrue's reason is the type


def test_a_false_dependent_makes_ready_false_listing_the_unhealthy_most_recent_first() -> None:
    cs = ConditionSet(_obj(), ("A", "B", "C"), T0)
    cs.set_true("A")
    cs.set_false("B", "BNotFound", "no B")
    ready = _by_type(cs)["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "UnhealthyDependents")
    assert ready["message"] == "B=False, C=Unknown"  # B transitioned now, C at creation


def test_last_transition_time_moves_only_when_status_changes() -> None:
    cs = ConditionSet(_obj(), ("A",), T0)
    cs.set_false("A", "One", "first")
    later = T0 + timedelta(minutes=5)
    again = ConditionSet({**_obj(), "status": {"conditions": cs.conditions()}}, ("A",), later)
    assert again.set_false("A", "Two", "second")  # a new reason is a change
    a = _by_type(again)["A"]
    assert (a["reason"], a["lastTransitionTime"]) == ("Two", timestamp(T0))
    assert not again.set_false("A", "Two", "second")  # nothing moved: nothing changed
    assert again.set_true("A")
    assert _by_type(again)["A"]["lastTransitionTime"] == timestamp(later)


def test_an_unchanged_object_reads_back_equal() -> None:
    cs = ConditionSet(_obj(), ("A", "B"), T0)
    cs.set_true("A")
    cs.set_false("B", "Bad", "b")
    again = ConditionSet({**_obj(), "status": {"conditions": cs.conditions()}}, ("A", "B"), T0 + timedelta(hours=1))
    again.set_true("A")
    again.set_false("B", "Bad", "b")
    assert again.conditions() == cs.conditions()


def test_a_condition_of_an_older_generation_is_not_healthy() -> None:
    cs = ConditionSet(_obj(generation=1), ("A",), T0)
    cs.set_true("A")
    edited = ConditionSet({**_obj(generation=2), "status": {"conditions": cs.conditions()}}, ("A",), T0)
    edited.set("Other", "True", "Other", "")  # any set recomputes the root
    ready = _by_type(edited)["Ready"]
    assert (ready["status"], ready["reason"], ready["message"]) == ("Unknown", "ReconcilingDependents", "A=True")
    assert failing_dependents({**_obj(generation=2), "status": {"conditions": edited.conditions()}}, ("A",)) == []


def test_failing_dependents_only_for_ready_false_at_the_current_generation() -> None:
    cs = ConditionSet(_obj(generation=4), ("A", "B"), T0)
    cs.set_true("A")
    cs.set_false("B", "BNotFound", "no B")
    obj = {**_obj(generation=4), "status": {"conditions": cs.conditions()}}
    assert [(c["type"], c["reason"]) for c in failing_dependents(obj, ("A", "B"))] == [("B", "BNotFound")]
    obj["metadata"]["generation"] = 5  # edited since: tried again
    assert failing_dependents(obj, ("A", "B")) == []
