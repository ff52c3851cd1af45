"""Hostile requirement values never become claim labels: the pod is unschedulable with the reason."""

from __future__ import annotations

import pytest
from sched_factories import pod, pool, run

from carpool.requirements import Requirement, Requirements
from carpool.scheduling.inputs import PreferredNodeTerm

INJECTIONS = [
    "a,b=c --max-pods=999",
    "x\n[settings.kubernetes]\nmax-pods = 999",
    'a" ; reboot ; "',
    "a" * 64,
    "ends-with-dash-",
    "$(curl evil)",
]


def open_team_pool():
    return pool("open", reqs=[Requirement.of("team", "Exists", [])])


@pytest.mark.parametrize("value", INJECTIONS)
def test_required_value_that_is_no_label_value_is_refused_with_reason(value: str) -> None:
    bad = pod("bad", requirements=(Requirements([Requirement.in_("team", value)]),))
    good = pod("good", requirements=(Requirements([Requirement.in_("team", "a")]),))
    result = run([bad, good], [open_team_pool()])
    assert "invalid label value" in result.unschedulable["default/bad"]["open"]
    assert "node affinity requirement 'team'" in result.unschedulable["default/bad"]["open"]
    assert all(value not in c.labels.values() for c in result.claims)
    assert [c.labels.get("team") for c in result.claims] == ["a"]
    assert "default/good" not in result.unschedulable


def test_preferred_value_is_checked_too() -> None:
    term = PreferredNodeTerm(10, Requirements([Requirement.in_("team", INJECTIONS[0])]))
    result = run([pod("p", preferred_node_affinity=(term,))], [open_team_pool()])
    assert "invalid label value" in result.unschedulable["default/p"]["open"]
    assert not result.claims


def test_not_in_never_becomes_a_label_and_is_allowed() -> None:
    reqs = Requirements([Requirement.of("team", "NotIn", [INJECTIONS[0]])])
    result = run([pod("p", requirements=(reqs,))], [open_team_pool()])
    assert "default/p" not in result.unschedulable
    assert len(result.claims) == 1
