"""What a claim holds against its pool follows its life (issue 38, item 1), on MemoryLedger (the reference)
and DynamoDB on moto alike: reserved as its largest option, then charged its launched type's capacity in
the write that records the launch, then its node's in the write that registers it. Each change moves the
pool's usage by exactly the difference, once, however the writes race or repeat:

- a launch recorded (alone or with others) replaces the reservation, and the pool's room comes back;
- a launch record that lost its version (pods nominated meanwhile) is written again on what is stored,
  still counted once;
- a registration charges the node's capacity, once, even when another write moved the claim's version
  between its read and its write;
- a claim repaired from its instance's tags after the provisioner died (the registrar or the orphan
  sweep records the launch), then recorded late by the provisioner, is counted once;
- a late launch record never undoes the node's charge.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from carpool.adapters.aws.dynamodb.ledger import DynamoLedger
from carpool.state import charges
from carpool.state.memory import MemoryLedger
from carpool.state.models import Claim, ClaimStatus
from carpool.state.ports import Refusal, ReservationRefused

GIB = 1024**3
GPU = "nvidia.com/gpu"
LIMITS = {GPU: 16}
#: the largest option of a GPU pool (p4d.24xlarge) and what EC2 launched (g6.xlarge), then its node
P4D = charges.charged({"cpu": 96000, "memory": 1152 * GIB, GPU: 8}, LIMITS)
G6 = charges.charged({"cpu": 4000, "memory": 16 * GIB, GPU: 1}, LIMITS)
G6_NODE = charges.charged({"cpu": 4000, "memory": 15 * GIB, GPU: 1, "pods": 58}, LIMITS)


@pytest.fixture(params=["memory", "dynamodb"])
def ledger(request: pytest.FixtureRequest) -> Any:
    if request.param == "memory":
        return MemoryLedger()
    request.getfixturevalue("state_tables")  # starts moto only for the DynamoDB half
    return DynamoLedger(sleep=lambda _s: None)


def reserved(ledger: Any, name: str, now: datetime) -> Claim:
    claim = Claim(name=name, nodepool="gpu", nodeclass="default", created_at=now,
                  instance_types=["g6.xlarge", "p4d.24xlarge"], pods=[f"default/{name}"], reserved=dict(P4D))
    ledger.reserve(claim, LIMITS, now, 600)
    return claim


def launched(claim: Claim, instance_id: str = "i-1") -> Claim:
    out = claim.model_copy(deep=True)
    out.status, out.instance_id, out.instance_type, out.zone = ClaimStatus.LAUNCHED, instance_id, "g6.xlarge", "us-east-1a"
    out.allocatable = {"cpu": 3920, "memory": 14 * GIB, GPU: 1}
    return out


def gpus(ledger: Any) -> int:
    return int(ledger.usage(["gpu"])["gpu"][GPU])


@pytest.mark.parametrize("together", [1, 2])
def test_a_launch_recorded_charges_the_launched_type_and_gives_the_room_back(
        ledger: Any, now: datetime, together: int) -> None:
    claims = [launched(reserved(ledger, f"c{i}", now), f"i-{i}") for i in range(together)]
    assert gpus(ledger) == 8 * together
    assert ledger.mark_launched_many(claims, {c.name: G6 for c in claims}) == {}
    assert gpus(ledger) == together  # what EC2 launched, not the largest option
    for c in claims:
        assert c.reserved == G6 and ledger.get(c.name).reserved == G6
    reserved(ledger, "next", now)  # with two reservations still held (16 of 16) it would be refused
    assert gpus(ledger) == together + 8
    assert ledger.usage(["gpu"])["gpu"]["nodes"] == together + 1


def test_the_pool_counts_every_resource_exactly_after_launch(ledger: Any, now: datetime) -> None:
    claim = launched(reserved(ledger, "c1", now))
    ledger.mark_launched_many([claim], {"c1": G6})
    assert ledger.usage(["gpu"])["gpu"] == {k: v for k, v in G6.items()}


def test_a_launch_record_that_lost_its_version_is_counted_once(ledger: Any, now: datetime) -> None:
    a, b = reserved(ledger, "a", now), reserved(ledger, "b", now)
    ledger.nominate("a", ["default/late"], {"cpu": 100}, now, 600)  # another provisioner, meanwhile
    assert ledger.mark_launched_many([launched(a, "i-a"), launched(b, "i-b")], {"a": G6, "b": G6}) == {}
    assert gpus(ledger) == 2
    stored = ledger.get("a")
    assert stored.reserved == G6 and "default/late" in stored.pods and stored.instance_id == "i-a"
    # recorded again (a retry, a repair): nothing changes
    ledger.mark_launched(launched(ledger.get("a"), "i-a"), G6)
    assert gpus(ledger) == 2


def test_a_registration_charges_the_node_once(ledger: Any, now: datetime) -> None:
    claim = launched(reserved(ledger, "c1", now))
    ledger.mark_launched(claim, G6)
    marked = ledger.mark_registered("c1", "ip-1", now, G6_NODE)
    assert marked is not None and marked.reserved == G6_NODE and marked.status == ClaimStatus.REGISTERED
    assert ledger.usage(["gpu"])["gpu"]["memory"] == 15 * GIB
    again = ledger.mark_registered("c1", "ip-1", now + timedelta(seconds=5), G6_NODE)  # a repeated event
    assert again is not None and again.registered_at == marked.registered_at
    assert ledger.usage(["gpu"])["gpu"] == {k: v for k, v in G6_NODE.items()}
    ledger.release(ledger.get("c1"))
    assert all(v == 0 for v in ledger.usage(["gpu"])["gpu"].values())


def test_a_registration_racing_another_write_is_counted_once(ledger: Any, now: datetime) -> None:
    claim = launched(reserved(ledger, "c1", now))
    ledger.mark_launched(claim, G6)
    read = ledger.get

    def get_then_nominate(name: str) -> Claim | None:
        found = read(name)
        if name == "c1" and not raced:  # between the registrar's read and its write, a nomination lands
            raced.append(True)
            ledger.nominate("c1", ["default/late"], {"cpu": 100}, now, 600)
        return found

    raced: list[bool] = []
    ledger.get = get_then_nominate
    marked = ledger.mark_registered("c1", "ip-1", now, G6_NODE)
    ledger.get = read
    assert marked is not None and marked.reserved == G6_NODE
    stored = ledger.get("c1")
    # the memory ledger writes under its lock (no read to race); DynamoDB's read is raced and read again
    assert raced == ([] if isinstance(ledger, MemoryLedger) else [True])
    assert stored.reserved == G6_NODE and ("default/late" in stored.pods) == bool(raced)
    assert ledger.usage(["gpu"])["gpu"]["memory"] == 15 * GIB and gpus(ledger) == 1


def test_a_claim_repaired_after_a_crash_then_recorded_late_is_counted_once(ledger: Any, now: datetime) -> None:
    claim = reserved(ledger, "c1", now)  # the provisioner dies after CreateFleet, before recording it
    ledger.mark_launched(launched(ledger.get("c1")), G6)  # the registrar repairs it from the instance's tags
    assert gpus(ledger) == 1
    late = launched(claim)  # the provisioner's own copy, at the version it reserved
    assert ledger.mark_launched_many([late], {"c1": G6}) == {}
    assert gpus(ledger) == 1
    ledger.mark_registered("c1", "ip-1", now, G6_NODE)
    ledger.mark_launched(launched(claim), G6)  # a launch recorded after the registration
    assert ledger.get("c1").reserved == G6_NODE and ledger.usage(["gpu"])["gpu"]["memory"] == 15 * GIB


def test_a_limit_holds_against_launched_charges(ledger: Any, now: datetime) -> None:
    first, second = launched(reserved(ledger, "c1", now), "i-1"), launched(reserved(ledger, "c2", now), "i-2")
    with pytest.raises(ReservationRefused) as refused:
        reserved(ledger, "c3", now)  # 8 + 8 held: no room for a third largest option
    assert refused.value.kind is Refusal.LIMIT
    ledger.mark_launched_many([first, second], {"c1": G6, "c2": G6})
    reserved(ledger, "c3", now)  # 1 + 1 + 8
    with pytest.raises(ReservationRefused):
        reserved(ledger, "c4", now)  # 18 would pass the limit
    assert gpus(ledger) == 10
