"""Reserving and recording claims together (`reserve_many`, `mark_launched_many`) gives each claim the
answer it would have had alone, on both MemoryLedger (the reference) and DynamoDB on moto."""

from __future__ import annotations

from datetime import datetime

import pytest
from test_dynamodb_state import TTL_SECONDS, Repos, claim, repos  # noqa: F401  (the `repos` fixture)

from carpool.state.models import ClaimStatus
from carpool.state.ports import ReservationRefused


def test_a_taken_pod_refuses_only_its_claim(repos: Repos, now: datetime) -> None:  # noqa: F811
    repos.ledger.reserve(claim("earlier", ["ns/p3"], now), None, now, TTL_SECONDS)
    claims = [claim(f"c{i}", [f"ns/p{2 * i}", f"ns/p{2 * i + 1}"], now) for i in range(4)]
    failed = repos.ledger.reserve_many(claims, {"cpu": 100_000}, now, TTL_SECONDS)
    assert set(failed) == {"c1"}
    assert isinstance(failed["c1"], ReservationRefused) and "ns/p3 already nominated to earlier" in str(failed["c1"])
    held = repos.ledger.nominated(now)
    assert held == {"ns/p3": "earlier", **{f"ns/p{p}": f"c{p // 2}" for p in range(8) if p not in (2, 3)}}
    assert "ns/p2" not in held  # c1 is all or nothing
    assert repos.ledger.usage()["default"]["cpu"] == 2000 * 4  # earlier + c0, c2, c3


def test_near_the_limit_the_claims_that_fit_are_reserved(repos: Repos, now: datetime) -> None:  # noqa: F811
    claims = [claim(f"c{i}", [f"ns/p{i}"], now) for i in range(5)]
    failed = repos.ledger.reserve_many(claims, {"cpu": 6000}, now, TTL_SECONDS)
    assert sorted(failed) == ["c3", "c4"]
    assert all(isinstance(e, ReservationRefused) and "limit cpu exhausted" in str(e) for e in failed.values())
    assert repos.ledger.usage()["default"]["cpu"] == 6000
    assert sorted(c.name for c in repos.ledger.active()) == ["c0", "c1", "c2"]


def test_more_claims_than_one_transaction_holds(repos: Repos, now: datetime) -> None:  # noqa: F811
    claims = [claim(f"c{i}", [f"ns/c{i}-p{j}" for j in range(9)], now) for i in range(25)]
    assert repos.ledger.reserve_many(claims, None, now, TTL_SECONDS) == {}
    assert len(repos.ledger.nominated(now)) == 225
    assert repos.ledger.usage()["default"]["nodes"] == 25


def test_claims_recorded_together_are_each_stored_whole(repos: Repos, now: datetime) -> None:  # noqa: F811
    claims = [claim(f"c{i}", [f"ns/p{i}"], now) for i in range(30)]
    assert repos.ledger.reserve_many(claims, None, now, TTL_SECONDS) == {}
    for i, c in enumerate(claims):
        c.status, c.instance_id, c.instance_type = ClaimStatus.LAUNCHED, f"i-{i:017x}", "m5.large"
    assert repos.ledger.mark_launched_many(claims) == {}
    for i in (0, 24, 25, 29):
        found = repos.ledger.find_by_instance(f"i-{i:017x}")
        assert found is not None and found.name == f"c{i}" and found.status == ClaimStatus.LAUNCHED


@pytest.mark.parametrize("n", [1, 2])
def test_a_claim_that_exists_is_refused_alone(repos: Repos, now: datetime, n: int) -> None:  # noqa: F811
    repos.ledger.reserve(claim("c0", ["ns/old"], now), None, now, TTL_SECONDS)
    claims = [claim(f"c{i}", [f"ns/p{i}"], now) for i in range(n)]
    failed = repos.ledger.reserve_many(claims, None, now, TTL_SECONDS)
    assert list(failed) == ["c0"] and "claim c0 already exists" in str(failed["c0"])
    assert ("ns/p1" in repos.ledger.nominated(now)) == (n == 2)
