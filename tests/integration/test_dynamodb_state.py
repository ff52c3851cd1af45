"""The state repositories' behaviour, run against both MemoryLedger (the reference) and DynamoDB on moto.

Every test takes a `repos` fixture parametrized over both backends, so a difference in behaviour between
the in-memory reference and the DynamoDB adapter fails here.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest

from carpool.adapters.aws.dynamodb.learned_capacity import DynamoCapacityCache
from carpool.adapters.aws.dynamodb.ledger import FIRST_CHUNK_PODS, DynamoLedger
from carpool.adapters.aws.dynamodb.offerings import DynamoOfferings
from carpool.capacity import TTL
from carpool.state.memory import MemoryCapacityCache, MemoryLedger, MemoryOfferings
from carpool.state.models import (
    NOMINATION_HOLD_AFTER_REGISTRATION,
    CapacityRecord,
    Claim,
    ClaimStatus,
    UnavailableOffering,
)
from carpool.state.ports import ReservationRefused

GIB = 1024**3
TTL_SECONDS = 600


@dataclass
class Repos:
    kind: str
    ledger: Any
    offerings: Any
    capacity: Any


@pytest.fixture(params=["memory", "dynamodb"])
def repos(request: pytest.FixtureRequest) -> Repos:
    if request.param == "memory":
        return Repos("memory", MemoryLedger(), MemoryOfferings(), MemoryCapacityCache())
    request.getfixturevalue("state_tables")  # starts moto only for the DynamoDB half
    no_sleep = lambda _s: None  # noqa: E731
    return Repos(
        "dynamodb", DynamoLedger(sleep=no_sleep), DynamoOfferings(), DynamoCapacityCache(sleep=no_sleep)
    )


def claim(
    name: str, pods: list[str], now: datetime, pool: str = "default", cpu: int = 2000, **kw: Any
) -> Claim:
    return Claim(
        name=name,
        nodepool=pool,
        nodeclass="default",
        created_at=now,
        instance_types=["m5.large", "c5.large"],
        pods=pods,
        reserved={"cpu": cpu, "memory": 8 * GIB, "nodes": 1},
        requested={"cpu": 500 * len(pods)},
        labels={"karpenter.sh/nodepool": pool},
        **kw,
    )


def pods(n: int, prefix: str = "default/p") -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


# -- reserve ---------------------------------------------------------------------------------------------
def test_reserve_nominates_pods_and_counts_usage(repos: Repos, now: datetime) -> None:
    c = claim("c1", pods(3), now, price=0.096)
    repos.ledger.reserve(c, {"cpu": 10_000}, now, TTL_SECONDS)

    assert repos.ledger.nominated(now) == {p: "c1" for p in pods(3)}
    assert repos.ledger.usage() == {"default": {"cpu": 2000, "memory": 8 * GIB, "nodes": 1}}
    stored = repos.ledger.get("c1")
    assert stored == c
    assert [x.name for x in repos.ledger.active()] == ["c1"]
    assert repos.ledger.get("missing") is None


def test_refuses_a_pod_nominated_to_a_live_claim_and_writes_nothing(repos: Repos, now: datetime) -> None:
    repos.ledger.reserve(claim("c1", ["default/a", "default/b"], now), None, now, TTL_SECONDS)
    with pytest.raises(ReservationRefused) as refused:
        repos.ledger.reserve(claim("c2", ["default/c", "default/b"], now), None, now, TTL_SECONDS)

    assert refused.value.reason == "pod default/b already nominated to c1"
    assert repos.ledger.get("c2") is None
    assert repos.ledger.nominated(now) == {"default/a": "c1", "default/b": "c1"}
    assert repos.ledger.usage()["default"]["nodes"] == 1


def test_refuses_a_second_claim_of_the_same_name(repos: Repos, now: datetime) -> None:
    repos.ledger.reserve(claim("c1", ["default/a"], now), None, now, TTL_SECONDS)
    with pytest.raises(ReservationRefused, match="claim c1 already exists"):
        repos.ledger.reserve(claim("c1", ["default/z"], now), None, now, TTL_SECONDS)
    assert repos.ledger.nominated(now) == {"default/a": "c1"}


def test_nominating_more_pods_than_one_transaction_holds(repos: Repos, now: datetime) -> None:
    """In-flight nominations go in chunks of 99 pods; every chunk must be a valid request (a burst
    nominates hundreds of pods to one claim)."""
    repos.ledger.reserve(claim("c1", ["default/a"], now), None, now, TTL_SECONDS)
    extra = pods(250, prefix="default/q")
    repos.ledger.nominate("c1", extra, {"cpu": 250 * 100}, now, TTL_SECONDS)

    held = repos.ledger.nominated(now, extra)
    assert held == {p: "c1" for p in extra}
    stored = repos.ledger.get("c1")
    assert stored is not None and stored.pods == ["default/a", *extra]
    assert stored.requested["cpu"] == 500 + 250 * 100


def test_refuses_past_the_pool_limit(repos: Repos, now: datetime) -> None:
    limits = {"cpu": 5000}
    repos.ledger.reserve(claim("c1", ["default/a"], now, cpu=2000), limits, now, TTL_SECONDS)
    repos.ledger.reserve(claim("c2", ["default/b"], now, cpu=2000), limits, now, TTL_SECONDS)
    with pytest.raises(ReservationRefused) as refused:
        repos.ledger.reserve(claim("c3", ["default/c"], now, cpu=2000), limits, now, TTL_SECONDS)

    assert refused.value.reason == "limit cpu exhausted for nodepool default"
    assert repos.ledger.usage()["default"]["cpu"] == 4000
    assert "default/c" not in repos.ledger.nominated(now)
    # exactly up to the limit is allowed
    repos.ledger.reserve(claim("c4", ["default/d"], now, cpu=1000), limits, now, TTL_SECONDS)
    assert repos.ledger.usage()["default"]["cpu"] == 5000


def test_refuses_a_claim_larger_than_the_limit_on_an_empty_pool(repos: Repos, now: datetime) -> None:
    with pytest.raises(ReservationRefused, match="limit nodes exhausted for nodepool default"):
        repos.ledger.reserve(claim("c1", ["default/a"], now), {"nodes": 0}, now, TTL_SECONDS)
    assert repos.ledger.usage().get("default", {}).get("nodes", 0) == 0


def test_limits_apply_per_pool(repos: Repos, now: datetime) -> None:
    repos.ledger.reserve(claim("a1", ["default/a"], now, pool="a"), {"nodes": 1}, now, TTL_SECONDS)
    repos.ledger.reserve(claim("b1", ["default/b"], now, pool="b"), {"nodes": 1}, now, TTL_SECONDS)
    assert repos.ledger.usage()["a"]["nodes"] == repos.ledger.usage()["b"]["nodes"] == 1


def test_an_expired_nomination_can_be_taken(repos: Repos, now: datetime) -> None:
    repos.ledger.reserve(claim("c1", ["default/a"], now), None, now, TTL_SECONDS)
    at_expiry = now + timedelta(seconds=TTL_SECONDS)
    assert repos.ledger.nominated(at_expiry) == {}

    repos.ledger.reserve(claim("c2", ["default/a"], at_expiry), None, at_expiry, TTL_SECONDS)
    assert repos.ledger.nominated(at_expiry) == {"default/a": "c2"}


def test_a_nomination_is_live_until_its_expiry(repos: Repos, now: datetime) -> None:
    repos.ledger.reserve(claim("c1", ["default/a"], now), None, now, TTL_SECONDS)
    just_before = now + timedelta(seconds=TTL_SECONDS) - timedelta(microseconds=1)
    with pytest.raises(ReservationRefused):
        repos.ledger.reserve(claim("c2", ["default/a"], just_before), None, just_before, TTL_SECONDS)


# -- release and lifecycle ----------------------------------------------------------------------------------
def test_release_frees_usage_and_pods(repos: Repos, now: datetime) -> None:
    repos.ledger.reserve(claim("c1", pods(4), now), {"nodes": 1}, now, TTL_SECONDS)
    repos.ledger.release(claim("c1", pods(4), now))

    assert repos.ledger.get("c1") is None
    assert repos.ledger.nominated(now) == {}
    assert repos.ledger.usage()["default"] == {"cpu": 0, "memory": 0, "nodes": 0}
    repos.ledger.release(claim("c1", pods(4), now))  # twice is harmless
    assert repos.ledger.usage()["default"]["nodes"] == 0
    repos.ledger.reserve(claim("c2", pods(4), now), {"nodes": 1}, now, TTL_SECONDS)  # room again


def test_release_uses_the_stored_claim(repos: Repos, now: datetime) -> None:
    repos.ledger.reserve(claim("c1", ["default/a"], now, cpu=3000), None, now, TTL_SECONDS)
    repos.ledger.release(claim("c1", [], now, cpu=1))  # a stale copy: the stored one counts
    assert repos.ledger.usage()["default"]["cpu"] == 0
    assert repos.ledger.nominated(now) == {}


def test_release_keeps_a_pod_another_claim_took_after_expiry(repos: Repos, now: datetime) -> None:
    repos.ledger.reserve(claim("c1", ["default/a"], now), None, now, TTL_SECONDS)
    later = now + timedelta(seconds=TTL_SECONDS + 1)
    repos.ledger.reserve(claim("c2", ["default/a"], later), None, later, TTL_SECONDS)
    repos.ledger.release(claim("c1", ["default/a"], now))
    assert repos.ledger.nominated(later) == {"default/a": "c2"}


def test_register_keeps_nominations_for_the_hold_then_they_expire(repos: Repos, now: datetime) -> None:
    repos.ledger.reserve(claim("c1", pods(3), now), None, now, TTL_SECONDS)
    later = now + timedelta(seconds=90)
    registered = repos.ledger.mark_registered("c1", "ip-10-0-0-1.ec2.internal", later)

    assert registered is not None
    assert registered.status == ClaimStatus.REGISTERED
    assert registered.node_name == "ip-10-0-0-1.ec2.internal"
    assert registered.registered_at == later
    # a late duplicate event still finds the pods nominated while the kube-scheduler binds them...
    hold_end = later + NOMINATION_HOLD_AFTER_REGISTRATION
    assert repos.ledger.nominated(hold_end - timedelta(seconds=1)) == {p: "c1" for p in pods(3)}
    # ...but not for the rest of the reservation's TTL: a pod the node did not take is provisioned again
    assert hold_end < now + timedelta(seconds=TTL_SECONDS)
    assert repos.ledger.nominated(hold_end) == {}
    # a repeated registration never lengthens the hold
    repos.ledger.mark_registered("c1", "ip-10-0-0-1.ec2.internal", later + timedelta(seconds=60))
    assert repos.ledger.nominated(hold_end) == {}
    assert repos.ledger.get("c1").status == ClaimStatus.REGISTERED
    assert repos.ledger.usage()["default"]["nodes"] == 1  # the node still counts against the pool
    assert repos.ledger.mark_registered("nope", "n", later) is None


def test_release_of_a_registered_claim_drops_its_held_nominations(repos: Repos, now: datetime) -> None:
    """The node is gone: its pods may be provisioned again at once."""
    c = claim("c1", pods(2), now)
    repos.ledger.reserve(c, None, now, TTL_SECONDS)
    repos.ledger.mark_registered("c1", "n1", now)
    assert repos.ledger.nominated(now) == {p: "c1" for p in pods(2)}
    repos.ledger.release(c)
    assert repos.ledger.nominated(now) == {}
    repos.ledger.reserve(claim("c2", pods(2), now), None, now, TTL_SECONDS)
    assert repos.ledger.nominated(now) == {p: "c2" for p in pods(2)}


def test_a_replacement_may_take_over_the_nominations_of_the_claim_it_replaces(repos: Repos, now: datetime) -> None:
    """Interruption and consolidation launch for pods nominated to the claim being replaced."""
    repos.ledger.reserve(claim("old", pods(2), now), None, now, TTL_SECONDS)
    repos.ledger.mark_registered("old", "n1", now)
    with pytest.raises(ReservationRefused):
        repos.ledger.reserve(claim("dup", pods(2), now), None, now, TTL_SECONDS, replacing={"other"})
    repos.ledger.reserve(claim("new", pods(2), now), None, now, TTL_SECONDS, replacing={"old", "other"})
    assert repos.ledger.nominated(now) == {p: "new" for p in pods(2)}
    repos.ledger.release(claim("old", pods(2), now))  # the old node goes: the new claim's nominations stay
    assert repos.ledger.nominated(now) == {p: "new" for p in pods(2)}


def test_every_limited_resource_is_reserved_atomically(repos: Repos, now: datetime) -> None:
    """A GPU limit holds across reservations like cpu: the claim that would pass it is refused whole."""
    limits = {"cpu": 100_000, "nvidia.com/gpu": 1}
    gpu = {"cpu": 4000, "memory": 16 * GIB, "nodes": 1, "nvidia.com/gpu": 1}
    first = claim("g1", ["default/g1"], now)
    first.reserved = dict(gpu)
    repos.ledger.reserve(first, limits, now, TTL_SECONDS)
    second = claim("g2", ["default/g2"], now)
    second.reserved = dict(gpu)
    with pytest.raises(ReservationRefused) as refused:
        repos.ledger.reserve(second, limits, now, TTL_SECONDS)
    assert refused.value.reason == "limit nvidia.com/gpu exhausted for nodepool default"
    assert repos.ledger.get("g2") is None and repos.ledger.nominated(now, ["default/g2"]) == {}
    assert repos.ledger.usage()["default"] == gpu
    repos.ledger.release(first)
    repos.ledger.reserve(second, limits, now, TTL_SECONDS)
    assert repos.ledger.usage()["default"]["nvidia.com/gpu"] == 1


def test_mark_launched_persists_and_is_found_by_instance(repos: Repos, now: datetime) -> None:
    c = claim("c1", ["default/a"], now)
    repos.ledger.reserve(c, None, now, TTL_SECONDS)
    launched = c.model_copy(
        update={
            "status": ClaimStatus.LAUNCHED,
            "instance_id": "i-0123456789abcdef0",
            "instance_type": "m5.large",
            "zone": "us-east-1a",
            "capacity_type": "spot",
            "image_id": "ami-1",
            "launched_at": now + timedelta(seconds=3),
            "price": 0.0372,
            "allocatable": {"cpu": 1930, "memory": 6903 * 1024 * 1024, "pods": 29},
        }
    )
    repos.ledger.mark_launched(launched)

    assert repos.ledger.get("c1") == launched
    assert repos.ledger.find_by_instance("i-0123456789abcdef0") == launched
    assert repos.ledger.find_by_instance("i-ffffffffffffffff0") is None
    assert repos.ledger.nominated(now) == {"default/a": "c1"}


def test_active_excludes_finished_claims(repos: Repos, now: datetime) -> None:
    for name, status in (
        ("r", ClaimStatus.RESERVED),
        ("f", ClaimStatus.FAILED),
        ("t", ClaimStatus.TERMINATING),
    ):
        c = claim(name, [f"default/{name}"], now)
        repos.ledger.reserve(c, None, now, TTL_SECONDS)
        repos.ledger.mark_launched(c.model_copy(update={"status": status}))
    assert sorted(c.name for c in repos.ledger.active()) == ["r"]


# -- chunking ------------------------------------------------------------------------------------------------
def test_a_claim_with_250_pods_is_reserved_in_chunks(repos: Repos, now: datetime) -> None:
    many = pods(250, "batch/p")
    repos.ledger.reserve(claim("big", many, now), {"nodes": 1}, now, TTL_SECONDS)
    assert repos.ledger.nominated(now) == {p: "big" for p in many}
    assert repos.ledger.usage()["default"]["nodes"] == 1

    repos.ledger.release(claim("big", many, now))
    assert repos.ledger.nominated(now) == {}
    assert repos.ledger.usage()["default"]["nodes"] == 0


def test_a_refused_later_chunk_rolls_the_claim_back(repos: Repos, now: datetime) -> None:
    many = pods(250, "batch/p")
    taken = many[FIRST_CHUNK_PODS + 60]  # lands in the second chunk
    repos.ledger.reserve(claim("holder", [taken], now), None, now, TTL_SECONDS)
    with pytest.raises(ReservationRefused) as refused:
        repos.ledger.reserve(claim("big", many, now), None, now, TTL_SECONDS)

    assert refused.value.reason == f"pod {taken} already nominated to holder"
    assert repos.ledger.get("big") is None
    assert repos.ledger.nominated(now) == {taken: "holder"}
    assert repos.ledger.usage()["default"]["nodes"] == 1


# -- concurrency ---------------------------------------------------------------------------------------------
def race(ledger: Any, plans: dict[str, list[list[str]]], delays: dict[str, list[float]], pool: str,
         limit: dict[str, int], now: datetime, tag: str) -> dict[str, list[str]]:  # fmt: skip
    """Each worker thread reserves its claims in order, after its delays; returns the claims that won."""
    won: dict[str, list[str]] = {}
    lock = threading.Lock()
    barrier = threading.Barrier(len(plans))

    def run(worker: str) -> None:
        barrier.wait()
        for i, pod_set in enumerate(plans[worker]):
            time.sleep(delays[worker][i])
            name = f"{worker}{tag}-{i}"
            try:
                ledger.reserve(claim(name, pod_set, now, pool=pool), limit, now, TTL_SECONDS)
            except ReservationRefused:
                continue
            with lock:
                won[name] = pod_set

    threads = [threading.Thread(target=run, args=(w,)) for w in plans]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return won


def test_concurrent_reservations_never_double_nominate_or_pass_a_limit(repos: Repos, now: datetime) -> None:
    """Two provisioners race 20 times over overlapping pod sets with random interleavings."""
    rng = random.Random(7)
    limit = {"nodes": 3}
    for round_ in range(20):
        pool, shared = f"pool{round_}", pods(10, f"r{round_}/p")
        plans = {worker: [rng.sample(shared, rng.randint(2, 5)) for _ in range(3)] for worker in ("a", "b")}
        delays = {worker: [rng.random() * 0.004 for _ in range(3)] for worker in plans}

        won = race(repos.ledger, plans, delays, pool, limit, now, str(round_))

        nominated = [p for pod_set in won.values() for p in pod_set]
        assert len(nominated) == len(set(nominated)), f"round {round_}: a pod was nominated twice: {won}"
        assert 1 <= len(won) <= limit["nodes"]
        assert repos.ledger.usage()[pool]["nodes"] == len(won)
        held = {p: c for p, c in repos.ledger.nominated(now).items() if p.startswith(f"r{round_}/")}
        assert held == {p: name for name, pod_set in won.items() for p in pod_set}


# -- unavailable offerings -----------------------------------------------------------------------------------
def test_unavailable_offerings_expire(repos: Repos, now: datetime) -> None:
    soon, later = now + timedelta(minutes=3), now + timedelta(minutes=10)
    repos.offerings.mark_unavailable(
        [
            UnavailableOffering(
                instance_type="m5.large", zone="us-east-1a", capacity_type="spot", until=soon
            ),
            UnavailableOffering(
                instance_type="c5.large", zone="us-east-1b", capacity_type="on-demand", until=later
            ),
        ]
    )
    assert repos.offerings.unavailable(now) == {
        ("m5.large", "us-east-1a", "spot"),
        ("c5.large", "us-east-1b", "on-demand"),
    }
    assert repos.offerings.unavailable(soon) == {("c5.large", "us-east-1b", "on-demand")}
    # marking again extends the window
    repos.offerings.mark_unavailable(
        [UnavailableOffering(instance_type="m5.large", zone="us-east-1a", capacity_type="spot", until=later)]
    )
    assert repos.offerings.unavailable(soon) == {
        ("m5.large", "us-east-1a", "spot"),
        ("c5.large", "us-east-1b", "on-demand"),
    }
    assert repos.offerings.unavailable(later) == set()


def test_many_unavailable_offerings(repos: Repos, now: datetime) -> None:
    until = now + timedelta(minutes=3)
    items = [
        UnavailableOffering(
            instance_type=f"m5.{i}xlarge", zone="us-east-1a", capacity_type="spot", until=until
        )
        for i in range(60)
    ]
    repos.offerings.mark_unavailable(items)
    assert len(repos.offerings.unavailable(now)) == 60


# -- learned capacity ------------------------------------------------------------------------------------------
def observation(now: datetime, memory_mib: int, cpu: int = 1930, image: str = "ami-1") -> CapacityRecord:
    return CapacityRecord(
        instance_type="m5.large",
        image_id=image,
        ami_family="al2023",
        capacity={"cpu": 2000, "memory": memory_mib * 1024 * 1024, "pods": 29},
        allocatable={"cpu": cpu, "memory": (memory_mib - 674) * 1024 * 1024, "pods": 29},
        first_seen=now,
        last_seen=now,
        expires_at=now + TTL,
    )


def test_capacity_observations_merge_only_lower(repos: Repos, now: datetime) -> None:
    first = repos.capacity.observe(observation(now, 7600), now)
    assert first.samples == 1

    later = now + timedelta(days=1)
    merged = repos.capacity.observe(observation(later, 7650, cpu=1900), later)
    assert merged.samples == 2
    assert merged.capacity["memory"] == 7600 * 1024 * 1024  # higher observation ignored
    assert merged.allocatable["cpu"] == 1900  # cpu takes the latest
    assert merged.first_seen == now and merged.last_seen == later
    assert merged.expires_at == later + TTL

    lower = repos.capacity.observe(observation(later, 7500), later)
    assert lower.capacity["memory"] == 7500 * 1024 * 1024
    assert repos.capacity.all(later) == {("m5.large", "ami-1"): lower}


def test_capacity_records_expire(repos: Repos, now: datetime) -> None:
    repos.capacity.observe(observation(now, 7600), now)
    repos.capacity.observe(observation(now, 7600, image="ami-2"), now)
    expired = now + TTL
    assert set(repos.capacity.all(now)) == {("m5.large", "ami-1"), ("m5.large", "ami-2")}
    assert repos.capacity.all(expired) == {}

    # after expiry an observation starts over (an expired value is no evidence)
    fresh = repos.capacity.observe(observation(expired, 7700), expired)
    assert fresh.samples == 1 and fresh.capacity["memory"] == 7700 * 1024 * 1024
    assert fresh.first_seen == expired


def test_concurrent_capacity_observations_lose_no_sample(repos: Repos, now: datetime) -> None:
    if repos.kind == "memory":
        pytest.skip("MemoryCapacityCache is single-threaded by design; the optimistic lock is DynamoDB's")
    cache = DynamoCapacityCache(attempts=50)  # real, jittered backoff between attempts
    threads_n, each = 4, 5
    barrier = threading.Barrier(threads_n)
    memories = list(range(7500, 7500 + threads_n * each))
    random.Random(3).shuffle(memories)

    def run(k: int) -> None:
        barrier.wait()
        for m in memories[k * each : (k + 1) * each]:
            cache.observe(observation(now, m), now)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    record = repos.capacity.all(now)[("m5.large", "ami-1")]
    assert record.samples == threads_n * each
    assert record.capacity["memory"] == min(memories) * 1024 * 1024


def test_an_adopted_claim_keeps_what_its_karpenter_nodeclaim_froze(repos: Repos, now: datetime) -> None:
    """`Claim.adopted` (`carpool.adoption`): stored and read back whole, so expiry and static drift keep
    following the NodeClaim after the disruption run that adopted it."""
    from carpool.state.models import NodeClaimOrigin

    origin = NodeClaimOrigin(uid="6f1e2d3c", expire_after="168h", nodepool_hash="6543210987654321",
                             nodepool_hash_version="v3", adopted_at=now)
    c = claim("default-x7k2p", [], now, status=ClaimStatus.REGISTERED, instance_id="i-0abc", node_name="ip-1",
              registered_at=now, adopted=origin)
    repos.ledger.reserve(c, None, now, TTL_SECONDS)
    stored = repos.ledger.get("default-x7k2p")
    assert stored is not None and stored.adopted == origin
    assert [a.adopted for a in repos.ledger.active()] == [origin]
