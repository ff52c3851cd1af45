"""A nomination holds while its claim does: a claim registered past `NOMINATION_HOLD_AFTER_REGISTRATION`,
or one that is gone, no longer holds its pods, on MemoryLedger (the reference) and DynamoDB on moto alike.
Registering writes only the claim; reserving takes such pods over, and races for them still have one
winner."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest
from test_dynamodb_state import TTL_SECONDS, Repos, claim, pods, repos

from carpool.adapters.aws.dynamodb.claims import claim_key
from carpool.adapters.aws.dynamodb.ledger import FIRST_CHUNK_PODS, DynamoLedger
from carpool.state.models import NOMINATION_HOLD_AFTER_REGISTRATION
from carpool.state.ports import ReservationRefused

#: the contract tests' fixture: every test runs on MemoryLedger and on DynamoDB
FIXTURES = (repos,)
HOLD = NOMINATION_HOLD_AFTER_REGISTRATION
TICK = timedelta(microseconds=1)


def take(repos: Repos, how: str, name: str, wanted: list[str], at: datetime) -> None:
    """Take `wanted` for a new claim `name` the way a provisioner would: `reserve`, `reserve_many` (with a
    second, unrelated claim so the pods share a transaction with another claim) or `nominate` (onto an
    in-flight claim reserved first). Raises ReservationRefused."""
    if how == "reserve":
        repos.ledger.reserve(claim(name, wanted, at), None, at, TTL_SECONDS)
    elif how == "reserve_many":
        other = claim(f"{name}-other", [f"other/{name}"], at)
        failed = repos.ledger.reserve_many([other, claim(name, wanted, at)], None, at, TTL_SECONDS)
        assert "other" not in " ".join(failed)  # the unrelated claim is never refused with it
        if name in failed:
            raise failed[name]
    else:
        if repos.ledger.get(name) is None:
            repos.ledger.reserve(claim(name, [f"own/{name}"], at), None, at, TTL_SECONDS)
        repos.ledger.nominate(name, wanted, {"cpu": 100 * len(wanted)}, at, TTL_SECONDS)


HOW = ["reserve", "reserve_many", "nominate"]


def registered(repos: Repos, name: str, held: list[str], at: datetime) -> datetime:
    """A claim holding `held`, registered at `at`; returns the end of its hold."""
    repos.ledger.reserve(claim(name, held, at), None, at, TTL_SECONDS)
    assert repos.ledger.mark_registered(name, f"node-{name}", at) is not None
    return at + HOLD


def drop_claim_only(repos: Repos, name: str) -> None:
    """What a crash between deleting a claim and deleting its nominations leaves: the nominations alone."""
    if repos.kind == "memory":
        del repos.ledger.claims[name]
    else:
        table = repos.ledger._table
        table.client.delete_item(TableName=table.name, Key=claim_key(name))


def stored_nominations(repos: Repos) -> Any:
    """Every nomination as stored (DynamoDB: the raw items, every attribute)."""
    if repos.kind == "memory":
        return dict(repos.ledger.nominations)
    table = repos.ledger._table
    items = boto3.client("dynamodb").scan(TableName=table.name, ConsistentRead=True)["Items"]
    return sorted((i for i in items if i["pk"]["S"].startswith("POD#")), key=lambda i: i["pk"]["S"])


def dynamo_calls(ledger: DynamoLedger) -> tuple[list[str], Callable[[], None]]:
    """The DynamoDB operations `ledger` sends from now on (botocore's own event), and how to stop counting."""
    seen: list[str] = []

    def record(model: Any, **_: Any) -> None:
        seen.append(model.name)

    events = ledger._table.client.meta.events
    events.register("before-call.dynamodb.*", record)
    return seen, lambda: events.unregister("before-call.dynamodb.*", record)


# -- (a) the hold follows the registration -----------------------------------------------------------------
def test_registered_pods_stay_nominated_for_the_hold_and_are_free_after(repos: Repos, now: datetime) -> None:
    later = now + timedelta(seconds=30)
    hold_end = registered(repos, "c1", pods(3), later)

    assert repos.ledger.nominated(hold_end - TICK) == {p: "c1" for p in pods(3)}
    assert repos.ledger.nominated(hold_end - TICK, pods(2)) == {p: "c1" for p in pods(2)}
    with pytest.raises(ReservationRefused, match="already nominated to c1"):
        repos.ledger.reserve(claim("c2", pods(1), hold_end - TICK), None, hold_end - TICK, TTL_SECONDS)
    # the nominations themselves run to the reservation's TTL; the claim's registration ends them
    assert hold_end < now + timedelta(seconds=TTL_SECONDS)
    assert repos.ledger.nominated(hold_end) == {}
    assert repos.ledger.nominated(hold_end, pods(3)) == {}
    # a later registration of the same claim does not move the hold
    repos.ledger.mark_registered("c1", "node-c1-again", hold_end - TICK)
    stored = repos.ledger.get("c1")
    assert stored is not None and stored.registered_at == later and stored.node_name == "node-c1-again"
    assert repos.ledger.nominated(hold_end) == {}


def test_mark_registered_writes_no_nomination(repos: Repos, now: datetime) -> None:
    many = pods(150)  # more than one transaction's worth of nominations
    repos.ledger.reserve(claim("c1", many, now), None, now, TTL_SECONDS)
    before = stored_nominations(repos)
    if repos.kind == "dynamodb":
        calls, stop = dynamo_calls(repos.ledger)
        repos.ledger.mark_registered("c1", "n1", now)
        stop()
        assert calls == ["UpdateItem"]
    else:
        repos.ledger.mark_registered("c1", "n1", now)
    assert stored_nominations(repos) == before
    assert len(before) == 150


# -- (b) a registered claim past its hold yields its pods ------------------------------------------------
@pytest.mark.parametrize("how", HOW)
def test_a_pod_of_a_claim_registered_past_its_hold_can_be_taken(repos: Repos, now: datetime, how: str) -> None:
    hold_end = registered(repos, "old", pods(3), now)
    with pytest.raises(ReservationRefused, match="already nominated to old"):
        take(repos, how, "early", pods(2), hold_end - TICK)

    wanted = [*pods(2), "default/free"]
    take(repos, how, "new", wanted, hold_end)
    assert repos.ledger.nominated(hold_end, [*pods(3), "default/free"]) == dict.fromkeys(wanted, "new")
    stored = repos.ledger.get("new")
    assert stored is not None and set(wanted) <= set(stored.pods)
    # the old claim's release no longer touches what the new claim took
    repos.ledger.release(claim("old", pods(3), now))
    assert repos.ledger.nominated(hold_end, pods(3)) == dict.fromkeys(pods(2), "new")


def test_a_claim_larger_than_one_transaction_takes_lapsed_pods_in_every_chunk(repos: Repos, now: datetime) -> None:
    many = pods(250, "batch/p")
    hold_end = registered(repos, "old", many, now)
    repos.ledger.reserve(claim("new", many, hold_end), None, hold_end, TTL_SECONDS)
    assert repos.ledger.nominated(hold_end) == {p: "new" for p in many}
    assert len(many) > 2 * FIRST_CHUNK_PODS


def test_reserve_many_takes_lapsed_pods_and_refuses_only_the_claim_of_a_held_one(repos: Repos, now: datetime) -> None:
    hold_end = registered(repos, "old", ["ns/a", "ns/b"], now)
    repos.ledger.reserve(claim("live", ["ns/held"], hold_end), None, hold_end, TTL_SECONDS)
    claims = [claim("takes-a", ["ns/a", "ns/x"], hold_end), claim("wants-held", ["ns/b", "ns/held"], hold_end),
              claim("free", ["ns/y"], hold_end)]
    failed = repos.ledger.reserve_many(claims, None, hold_end, TTL_SECONDS)

    assert list(failed) == ["wants-held"] and "ns/held already nominated to live" in str(failed["wants-held"])
    assert repos.ledger.nominated(hold_end) == {"ns/a": "takes-a", "ns/x": "takes-a", "ns/held": "live",
                                                "ns/y": "free"}
    assert repos.ledger.get("wants-held") is None


# -- (c) races for a lapsed pod ----------------------------------------------------------------------------
def test_two_claims_racing_for_the_same_lapsed_pods_have_one_winner(repos: Repos, now: datetime) -> None:
    for round_ in range(8):
        wanted = pods(3, f"r{round_}/p")
        at = registered(repos, f"old{round_}", wanted, now)
        barrier = threading.Barrier(2)
        won: list[str] = []

        def run(name: str, wanted: list[str] = wanted, at: datetime = at, barrier: threading.Barrier = barrier,
                won: list[str] = won) -> None:
            barrier.wait()
            try:
                repos.ledger.reserve(claim(name, wanted, at), None, at, TTL_SECONDS)
            except ReservationRefused:
                return
            won.append(name)

        threads = [threading.Thread(target=run, args=(f"{w}{round_}",)) for w in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(won) == 1, f"round {round_}: {won}"
        assert repos.ledger.nominated(at, wanted) == {p: won[0] for p in wanted}


def test_a_claim_that_took_a_lapsed_pod_first_wins_against_one_that_looked_it_up(
    repos: Repos, now: datetime
) -> None:
    """The race decided by DynamoDB: the loser read the old claim (lapsed) and retries taking it over by
    name, but the winner rewrote the nomination in between, so the loser's condition fails."""
    if repos.kind == "memory":
        pytest.skip("MemoryLedger decides under one lock: there is no in-between")
    hold_end = registered(repos, "old", ["ns/a"], now)
    winner = DynamoLedger(client=boto3.client("dynamodb"), sleep=lambda _s: None)  # a client of its own
    transactions = []

    def meanwhile(**_: Any) -> None:
        transactions.append(1)
        if len(transactions) == 2:  # the loser's retry, after its lookup: the winner goes first
            winner.reserve(claim("winner", ["ns/a"], hold_end), None, hold_end, TTL_SECONDS)

    events = repos.ledger._table.client.meta.events
    events.register("before-call.dynamodb.TransactWriteItems", meanwhile)
    try:
        with pytest.raises(ReservationRefused, match="ns/a already nominated to winner"):
            repos.ledger.reserve(claim("loser", ["ns/a", "ns/b"], hold_end), None, hold_end, TTL_SECONDS)
    finally:
        events.unregister("before-call.dynamodb.TransactWriteItems", meanwhile)
    assert len(transactions) == 2  # one lookup round: refused, not retried again
    assert repos.ledger.nominated(hold_end) == {"ns/a": "winner"}
    assert repos.ledger.get("loser") is None
    assert repos.ledger.usage()["default"]["nodes"] == 2  # old and winner


# -- (d) a live claim keeps its pods ---------------------------------------------------------------------
@pytest.mark.parametrize("how", HOW)
def test_a_pod_of_a_live_claim_is_still_refused(repos: Repos, now: datetime, how: str) -> None:
    repos.ledger.reserve(claim("live", ["ns/a"], now), None, now, TTL_SECONDS)
    launched = now + timedelta(seconds=TTL_SECONDS) - TICK  # unregistered, far past any registration hold
    with pytest.raises(ReservationRefused, match="ns/a"):
        take(repos, how, "new", ["ns/a", "ns/b"], launched)
    assert repos.ledger.nominated(launched, ["ns/a", "ns/b"]) == {"ns/a": "live"}


# -- (e) a nomination left by a claim that is gone -------------------------------------------------------
@pytest.mark.parametrize("how", HOW)
def test_a_nomination_whose_claim_is_gone_can_be_taken(repos: Repos, now: datetime, how: str) -> None:
    repos.ledger.reserve(claim("crashed", ["ns/a", "ns/b"], now), None, now, TTL_SECONDS)
    drop_claim_only(repos, "crashed")
    assert repos.ledger.nominated(now) == {}
    take(repos, how, "new", ["ns/a"], now)
    assert repos.ledger.nominated(now, ["ns/a", "ns/b"]) == {"ns/a": "new"}


# -- reads -----------------------------------------------------------------------------------------------
def test_nominated_reads_claims_without_their_pod_lists(repos: Repos, now: datetime) -> None:
    if repos.kind == "memory":
        pytest.skip("a DynamoDB read shape")
    repos.ledger.reserve(claim("c1", pods(50), now), None, now, TTL_SECONDS)
    answers: list[dict[str, Any]] = []

    def keep(parsed: dict[str, Any], **_: Any) -> None:
        answers.append(parsed)

    events = repos.ledger._table.client.meta.events
    events.register("after-call.dynamodb.BatchGetItem", keep)
    try:
        assert repos.ledger.nominated(now, pods(50)) == {p: "c1" for p in pods(50)}
    finally:
        events.unregister("after-call.dynamodb.BatchGetItem", keep)
    items = [i for a in answers for got in a["Responses"].values() for i in got]
    claims = [i for i in items if i["pk"]["S"].startswith("CLAIM#")]
    assert len(claims) == 1 and "pods" not in claims[0] and claims[0]["status"]["S"] == "reserved"
