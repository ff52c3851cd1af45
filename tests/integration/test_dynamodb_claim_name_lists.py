"""A claim's pods and instance types are stored as chunks of newline-joined names (`chunked`): one value
for a reservation's hundreds of pods, one more per in-flight nomination. Readers get the same names in
the same order as written, claims stored one element per name read the same, and no name can be split
or merged."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import pytest

from carpool.adapters.aws.dynamodb.claims import chunked, claim_from_item, claim_key, unchunked
from carpool.adapters.aws.dynamodb.codec import serialize
from carpool.adapters.aws.dynamodb.ledger import DynamoLedger
from carpool.adapters.aws.dynamodb.nominations import nomination_key
from carpool.state.models import Claim

TTL_SECONDS = 600


def _claim(name: str, pods: list[str], now: datetime) -> Claim:
    return Claim(name=name, nodepool="default", nodeclass="default", created_at=now,
                 instance_types=["m5.large", "c6i.xlarge", "r7g.metal-48xl"],
                 pods=pods, reserved={"cpu": 2000, "memory": 2**33, "nodes": 1}, requested={"cpu": 100 * len(pods)})


def _raw(ledger: DynamoLedger, name: str) -> dict:
    item = ledger._table.get(claim_key(name))
    assert item is not None
    return item


@pytest.fixture
def ledger(state_tables: object) -> DynamoLedger:
    return DynamoLedger(sleep=lambda _s: None)


def test_a_reservations_pods_are_one_value_read_back_in_order(ledger: DynamoLedger, now: datetime) -> None:
    pods = [f"burst/web-{i}" for i in reversed(range(500))]  # not sorted: the order is the claim's own
    ledger.reserve(_claim("c1", pods, now), None, now, TTL_SECONDS)
    raw = _raw(ledger, "c1")
    assert raw["pods"] == {"L": [{"S": "\n".join(pods)}]}
    assert raw["instanceTypes"] == {"L": [{"S": "m5.large\nc6i.xlarge\nr7g.metal-48xl"}]}
    stored = ledger.get("c1")
    assert stored is not None and stored.pods == pods
    assert stored.instance_types == ["m5.large", "c6i.xlarge", "r7g.metal-48xl"]
    assert [c.pods for c in ledger.active()] == [pods]


def test_nominations_append_a_chunk_each(ledger: DynamoLedger, now: datetime) -> None:
    ledger.reserve(_claim("c1", ["ns/a", "ns/b"], now), None, now, TTL_SECONDS)
    extra = [f"ns/q{i}" for i in range(150)]  # two transactions of nominations: two chunks
    ledger.nominate("c1", extra, {"cpu": 100}, now, TTL_SECONDS)
    chunks = [v["S"] for v in _raw(ledger, "c1")["pods"]["L"]]
    assert chunks == ["ns/a\nns/b", "\n".join(extra[:99]), "\n".join(extra[99:])]
    stored = ledger.get("c1")
    assert stored is not None and stored.pods == ["ns/a", "ns/b", *extra]


def test_a_claim_stored_one_element_per_pod_reads_the_same(ledger: DynamoLedger, now: datetime) -> None:
    claim = _claim("old", ["ns/a", "ns/b", "ns/c"], now)
    item = serialize({"pk": "CLAIM#old", "sk": "CLAIM", "gsi1pk": "CLAIMS", "gsi1sk": "reserved#old",
                      "name": "old", "nodepool": "default", "nodeclass": "default", "status": "reserved",
                      "createdAt": now.isoformat(), "requested": {"cpu": 300}, "pods": claim.pods,
                      "instanceTypes": claim.instance_types})
    ledger._table.client.put_item(TableName=ledger._table.name, Item=item)
    old = claim_from_item(_raw(ledger, "old"))
    assert old.pods == ["ns/a", "ns/b", "ns/c"] and old.instance_types == claim.instance_types
    ledger.nominate("old", ["ns/d", "ns/e"], {"cpu": 100}, now, TTL_SECONDS)  # appends to the old list
    stored = ledger.get("old")
    assert stored is not None and stored.pods == ["ns/a", "ns/b", "ns/c", "ns/d", "ns/e"]


def test_a_claim_without_pods_stores_an_empty_list(ledger: DynamoLedger, now: datetime) -> None:
    ledger.reserve(_claim("empty", [], now).model_copy(update={"instance_types": []}), None, now, TTL_SECONDS)
    assert _raw(ledger, "empty")["pods"] == {"L": []} and _raw(ledger, "empty")["instanceTypes"] == {"L": []}
    stored = ledger.get("empty")
    assert stored is not None and stored.pods == [] and stored.instance_types == []


def test_chunks_round_trip_and_refuse_what_would_split() -> None:
    keys = ["a/b", "kube-system/coredns-1", "ns/x.y-z"]
    assert unchunked(chunked(keys)) == keys
    assert unchunked([*chunked(keys[:1]), *chunked(keys[1:])]) == keys
    assert chunked([]) == [] and unchunked([]) == []
    with pytest.raises(ValueError, match="line break"):
        chunked(["ns/evil\nns/other"])


def test_nominations_written_with_a_pod_attribute_still_read(ledger: DynamoLedger, now: datetime) -> None:
    """Nominations name their pod by their key alone; ones stored with a `pod` attribute beside it read
    the same."""
    ledger.reserve(_claim("c1", ["ns/new"], now), None, now, TTL_SECONDS)
    until = (now - datetime(1970, 1, 1, tzinfo=now.tzinfo)).total_seconds() + TTL_SECONDS
    old = serialize({"pk": "POD#ns/old", "sk": "NOMINATION", "gsi1pk": "NOMINATIONS", "gsi1sk": "ns/old",
                     "pod": "ns/old", "claim": "c1", "until": Decimal(str(until)), "expiresAt": int(until) + 3600})
    ledger._table.client.put_item(TableName=ledger._table.name, Item=old)
    assert "pod" not in ledger._table.get(nomination_key("ns/new"))  # type: ignore[operator]
    assert ledger.nominated(now, ["ns/old", "ns/new"]) == {"ns/old": "c1", "ns/new": "c1"}
    assert ledger.nominated(now) == {"ns/old": "c1", "ns/new": "c1"}
