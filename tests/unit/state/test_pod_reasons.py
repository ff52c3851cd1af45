"""Why a pod is pending, kept once per change: new or changed reasons are written and reported, unchanged
ones are written again only every `REFRESH`, and an entry not confirmed for `TTL` is gone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from carpool.state.reasons import REFRESH, TTL, MemoryPodReasons, PodReasons, changes

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
FULL = {"general": "no instance type has 96 cpu", "flex": "taint dedicated=gpu not tolerated"}


def entry(reasons: dict[str, str], at: datetime) -> PodReasons:
    return PodReasons(pod="shop/web-1", reasons=reasons, since=at, confirmed=at)


def test_new_reasons_are_a_change() -> None:
    changed, refreshed = changes({}, {"shop/web-1": FULL}, NOW)
    assert [(c.pod, c.reasons, c.since) for c in changed] == [("shop/web-1", FULL, NOW)] and refreshed == []


def test_the_same_reasons_a_minute_later_are_neither_reported_nor_written() -> None:
    known = {"shop/web-1": entry(FULL, NOW)}
    assert changes(known, {"shop/web-1": FULL}, NOW + timedelta(minutes=1)) == ([], [])


def test_the_same_reasons_after_the_refresh_period_are_written_again_keeping_since() -> None:
    later = NOW + REFRESH
    changed, refreshed = changes({"shop/web-1": entry(FULL, NOW)}, {"shop/web-1": FULL}, later)
    assert changed == [] and [(r.since, r.confirmed) for r in refreshed] == [(NOW, later)]


def test_a_pool_whose_reason_changed_is_a_change() -> None:
    moved = {**FULL, "general": "limit cpu reached (64 of 64)"}
    changed, _ = changes({"shop/web-1": entry(FULL, NOW)}, {"shop/web-1": moved}, NOW + timedelta(seconds=30))
    assert [c.reasons for c in changed] == [moved]


def test_an_entry_past_its_ttl_is_gone_and_its_reasons_are_new_again() -> None:
    store = MemoryPodReasons()
    store.save([entry(FULL, NOW)])
    assert [e.pod for e in store.all(NOW + TTL - timedelta(seconds=1))] == ["shop/web-1"]
    assert store.all(NOW + TTL) == []
    changed, _ = changes({"shop/web-1": entry(FULL, NOW)}, {"shop/web-1": FULL}, NOW + TTL)
    assert len(changed) == 1


def test_forget_removes_a_served_pod() -> None:
    store = MemoryPodReasons()
    store.save([entry(FULL, NOW)])
    store.forget(["shop/web-1", "shop/never-stored"])
    assert store.all(NOW) == []
