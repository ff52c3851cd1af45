"""Budgets: counts and percentages (rounded up), cron windows, reasons, nodes already disrupting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from disruption_factories import NOW, nodepool

from carpool.api.nodepool import Budget
from carpool.disruption import budgets, cron
from carpool.disruption.budgets import UNLIMITED, Budgets
from carpool.disruption.decision import Reason


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# -- cron ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("expr", "when", "expected"), [
    ("0 9 * * mon-fri", "2025-06-02T09:00", True),  # a Monday
    ("0 9 * * mon-fri", "2025-06-01T09:00", False),  # a Sunday
    ("0 9 * * mon-fri", "2025-06-02T09:01", False),
    ("*/15 * * * *", "2025-06-02T10:45", True),
    ("*/15 * * * *", "2025-06-02T10:50", False),
    ("30 22 1,15 * *", "2025-06-15T22:30", True),
    ("0 0 * jan,jul *", "2025-07-04T00:00", True),
    ("0 0 * jan,jul *", "2025-06-04T00:00", False),
    ("@daily", "2025-06-02T00:00", True),
    ("@hourly", "2025-06-02T13:00", True),
    ("@weekly", "2025-06-01T00:00", True),  # Sunday midnight
    ("@monthly", "2025-06-01T00:00", True),
    ("@yearly", "2025-01-01T00:00", True),
    ("5-10/5 * * * *", "2025-06-02T00:10", True),
    ("5/20 * * * *", "2025-06-02T00:45", True),  # 5, 25, 45
])
def test_cron_matches(expr, when, expected):
    assert cron.CronSchedule.parse(expr).matches(at(when)) is expected


def test_both_day_fields_restricted_match_either_like_vixie_cron():
    s = cron.CronSchedule.parse("0 0 13 * fri")
    assert s.matches(at("2025-06-13T00:00"))  # the 13th (a Friday, too)
    assert s.matches(at("2025-06-06T00:00"))  # a Friday, not the 13th
    assert s.matches(at("2025-07-13T00:00"))  # the 13th, a Sunday
    assert not s.matches(at("2025-06-07T00:00"))


@pytest.mark.parametrize("bad", ["* * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *", "* * * * 7",
                                 "*/0 * * * *", "x * * * *", "@every 5m"])
def test_cron_rejects_what_robfig_rejects(bad):
    with pytest.raises(cron.CronError):
        cron.CronSchedule.parse(bad)


def test_window_is_open_for_duration_after_each_fire():
    # weekdays 09:00 for 8h: open 09:00 .. 16:59:59, closed from 17:00 (Karpenter's (now-d, now] rule)
    for when, is_open in [("2025-06-02T08:59", False), ("2025-06-02T09:00", True), ("2025-06-02T16:59", True),
                          ("2025-06-02T17:00", False), ("2025-06-01T12:00", False)]:
        assert cron.active("0 9 * * mon-fri", timedelta(hours=8), at(when)) is is_open, when


def test_long_window_spanning_days_and_midnight():
    # Saturday 22:00 for 30h: open until Monday 04:00
    assert cron.active("0 22 * * sat", timedelta(hours=30), at("2025-06-02T03:59"))
    assert not cron.active("0 22 * * sat", timedelta(hours=30), at("2025-06-02T04:00"))


# -- one budget ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("nodes", "total", "expected"), [
    ("10%", 10, 1), ("10%", 11, 2), ("10%", 5, 1), ("10%", 0, 0), ("25%", 7, 2), ("0%", 50, 0), ("100%", 3, 3),
    ("3", 100, 3), ("0", 10, 0),
])
def test_percentages_round_up_like_karpenter(nodes, total, expected):
    assert budgets.budget_allows(Budget(nodes=nodes), total, NOW) == expected


def test_scheduled_budget_only_restricts_inside_its_window():
    b = Budget(nodes="0", schedule="0 9 * * mon-fri", duration="8h")
    assert budgets.budget_allows(b, 10, at("2025-06-02T10:00")) == 0
    assert budgets.budget_allows(b, 10, at("2025-06-02T18:00")) == UNLIMITED


def test_unparseable_schedule_fails_closed():
    b = Budget(nodes="5", schedule="0 9 * * 7", duration="1h")
    assert budgets.budget_allows(b, 10, NOW) == 0


# -- a pool's budgets ------------------------------------------------------------------------------------
def test_default_budget_is_ten_percent():
    assert budgets.allowed(nodepool(), 20, Reason.UNDERUTILIZED, NOW) == 2


def test_explicitly_empty_budgets_do_not_restrict():
    assert budgets.allowed(nodepool(budgets=[]), 20, Reason.DRIFTED, NOW) == UNLIMITED


def test_most_restrictive_applicable_budget_wins_per_reason():
    pool = nodepool(budgets=[{"nodes": "50%"}, {"nodes": "0", "reasons": ["Drifted"]},
                             {"nodes": "1", "reasons": ["Empty", "Underutilized"]}])
    assert budgets.allowed(pool, 10, Reason.DRIFTED, NOW) == 0
    assert budgets.allowed(pool, 10, Reason.EMPTY, NOW) == 1
    assert budgets.allowed(pool, 10, Reason.UNDERUTILIZED, NOW) == 1
    # Expired is only restricted by budgets without reasons
    assert budgets.allowed(pool, 10, Reason.EXPIRED, NOW) == 5
    # node repair is never budgeted
    assert budgets.allowed(pool, 10, Reason.UNHEALTHY, NOW) == UNLIMITED


def test_business_hours_freeze_for_underutilized_only():
    pool = nodepool(budgets=[{"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h", "reasons": ["Underutilized"]},
                             {"nodes": "20%"}])
    monday_noon = at("2025-06-02T12:00")
    assert budgets.allowed(pool, 10, Reason.UNDERUTILIZED, monday_noon) == 0
    assert budgets.allowed(pool, 10, Reason.EMPTY, monday_noon) == 2
    assert budgets.allowed(pool, 10, Reason.UNDERUTILIZED, at("2025-06-02T20:00")) == 2


def test_nodes_already_disrupting_count_against_every_reason():
    b = Budgets({"p": nodepool("p", budgets=[{"nodes": "3"}])}, {"p": 10}, {"p": 1}, NOW)
    assert b.remaining("p", Reason.DRIFTED) == 2
    b.take("p")
    assert b.remaining("p", Reason.EMPTY) == 1
    b.take("p", 2)
    assert b.remaining("p", Reason.UNDERUTILIZED) == 0
    assert "4 already disrupting" in b.describe("p", Reason.UNDERUTILIZED)


def test_nodes_of_a_deleted_pool_go_under_the_default_budget():
    assert Budgets({}, {"ghost": 20}, {}, NOW).remaining("ghost", Reason.DRIFTED) == 2
