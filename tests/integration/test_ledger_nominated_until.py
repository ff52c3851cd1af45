"""A claim's `nominated_until` (the earliest expiry of its nominations, what the watcher reads instead of
the nominations) on MemoryLedger (the reference) and DynamoDB on moto alike: `reserve` and
`reserve_many` set it to now+ttl, and no later write of the claim loses or moves it."""

from __future__ import annotations

from datetime import datetime, timedelta

import boto3
from test_dynamodb_state import TTL_SECONDS, Repos, claim, pods, repos

from carpool.adapters.aws.dynamodb.claims import claim_key
from carpool.adapters.aws.dynamodb.ledger import FIRST_CHUNK_PODS
from carpool.state.models import ClaimStatus

#: the contract tests' fixture: every test runs on MemoryLedger and on DynamoDB
FIXTURES = (repos,)
TTL = timedelta(seconds=TTL_SECONDS)


def stored_until(repos: Repos, name: str) -> datetime | None:
    """The claim's `nominated_until` as stored: for DynamoDB, the raw item's `nominatedUntil` attribute
    (so a field that only lives on the Python object would not count)."""
    if repos.kind == "memory":
        return repos.ledger.claims[name].nominated_until
    table = repos.ledger._table
    item = boto3.client("dynamodb").get_item(TableName=table.name, Key=claim_key(name), ConsistentRead=True)["Item"]
    text = item.get("nominatedUntil", {}).get("S")
    return datetime.fromisoformat(text) if text else None


def test_reserve_sets_it_to_now_plus_ttl_on_the_stored_claim_and_the_callers(repos: Repos, now: datetime) -> None:
    mine = claim("c1", pods(3), now)
    assert mine.nominated_until is None

    repos.ledger.reserve(mine, None, now, TTL_SECONDS)

    assert stored_until(repos, "c1") == now + TTL
    assert mine.nominated_until == now + TTL  # the object the provisioner later stores whole
    assert [c.nominated_until for c in repos.ledger.active()] == [now + TTL]
    assert repos.ledger.get("c1").nominated_until == now + TTL


def test_reserve_many_sets_it_on_every_claim(repos: Repos, now: datetime) -> None:
    """Claims sharing a transaction and one reserved alone (more pods than one transaction takes)."""
    small = [claim(f"s{i}", pods(2, f"default/s{i}-"), now) for i in range(3)]
    large = claim("large", pods(FIRST_CHUNK_PODS + 5, "default/l"), now)

    failed = repos.ledger.reserve_many([*small, large], None, now, TTL_SECONDS)

    assert failed == {}
    names = ["s0", "s1", "s2", "large"]
    assert {n: stored_until(repos, n) for n in names} == dict.fromkeys(names, now + TTL)
    assert [c.nominated_until for c in (*small, large)] == [now + TTL] * 4


def test_nominate_keeps_the_earliest_expiry(repos: Repos, now: datetime) -> None:
    repos.ledger.reserve(claim("c1", pods(2), now), None, now, TTL_SECONDS)

    later = now + timedelta(minutes=3)
    repos.ledger.nominate("c1", ["default/late"], {"cpu": 500}, later, TTL_SECONDS)

    assert stored_until(repos, "c1") == now + TTL
    assert "default/late" in repos.ledger.get("c1").pods
    # the pod added later is nominated beyond it: the field is a lower bound
    assert repos.ledger.nominated(now + TTL, ["default/late", "default/p0"]) == {"default/late": "c1"}


def test_mark_launched_keeps_it(repos: Repos, now: datetime) -> None:
    """The provisioner stores the claim object it reserved, filled with its instance, whole."""
    one, many = claim("one", pods(1, "default/o"), now), claim("many", pods(1, "default/m"), now)
    repos.ledger.reserve(one, None, now, TTL_SECONDS)
    repos.ledger.reserve_many([many], None, now, TTL_SECONDS)
    for c, iid in ((one, "i-1"), (many, "i-2")):
        c.status, c.instance_id, c.launched_at = ClaimStatus.LAUNCHED, iid, now + timedelta(seconds=5)

    repos.ledger.mark_launched(one)
    assert repos.ledger.mark_launched_many([many]) == {}

    assert stored_until(repos, "one") == stored_until(repos, "many") == now + TTL
    assert repos.ledger.get("one").instance_id == "i-1"


def test_registering_keeps_it(repos: Repos, now: datetime) -> None:
    repos.ledger.reserve(claim("c1", pods(1), now), None, now, TTL_SECONDS)

    answer = repos.ledger.mark_registered("c1", "node-1", now + timedelta(minutes=1))

    assert answer is not None and answer.nominated_until == now + TTL
    assert stored_until(repos, "c1") == now + TTL
