"""Capacity errors on the preferred pool: fallback in the same invocation; the failed offerings are
skipped for 3 minutes (persisted in DynamoDB, expiry checked in code), then tried again."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from carpool_env import T0, MakeDeps, manifests, nodeclass, nodepool, pending_pods

from carpool.app.deadline import Deadline
from carpool.app.provisioning import provision
from carpool.app.provisioning.invocation import DEADLINE_REASON
from carpool.sim.run.faults import CapacityFaults
from carpool.sim.run.scenario import CapacityFailure

CONFIG = manifests(
    nodepool("flex", weight=100, requirements={"karpenter.k8s.aws/instance-family": ["c7i-flex"]}),
    nodepool("general", weight=1, requirements={"karpenter.k8s.aws/instance-family": ["m6i", "c6i"]}),
    nodeclass(),
)


@pytest.fixture
def deps(make_deps: MakeDeps, network: Any) -> Iterator[Any]:
    d = make_deps(CONFIG)
    clock = d.clock
    zones = {s: z for z, ids in network.subnets.items() for s in ids}
    faults = CapacityFaults([CapacityFailure.model_validate({"instanceType": "c7i-flex.*", "until": 120})],
                            lambda: (clock.now - T0).total_seconds(), zones.get)
    faults.register(d.compute.client)
    yield d, clock, faults
    faults.unregister(d.compute.client)  # the client is cached for the process: later tests share it


def test_fallback_in_the_same_invocation_then_flex_again_after_three_minutes(deps: Any) -> None:
    d, clock, faults = deps
    first = provision.provision_pods(pending_pods(4, cpu="500m", prefix="a", deps=d), d, reason="test")
    assert first.launched, first
    assert {c.nodepool for c in first.launched} == {"general"}          # same call, next pool by weight
    assert sorted(p for c in first.launched for p in c.pods) == [f"default/a{i}" for i in range(4)]
    assert faults.injected, "the flex offerings were tried first"
    skipped = d.offerings.unavailable(clock.now)
    assert skipped and all(t.startswith("c7i-flex.") for t, _, _ in skipped)

    # within 3 minutes (failures have stopped at 120 s) flex is still skipped: no new CreateFleet to flex
    clock.now = T0 + timedelta(seconds=150)
    tried = len(faults.injected)
    # pods too big for the room left on the in-flight nodes, so new capacity is needed
    second = provision.provision_pods(pending_pods(4, cpu="7", prefix="b", deps=d), d, reason="test")
    assert {c.nodepool for c in second.launched} == {"general"}
    assert len(faults.injected) == tried

    # after the 3-minute window the offerings are tried again and flex serves
    clock.now = T0 + timedelta(seconds=181 + 30)
    assert d.offerings.unavailable(clock.now) == set()
    third = provision.provision_pods(pending_pods(4, cpu="7", prefix="c", deps=d), d, reason="test")
    assert {c.nodepool for c in third.launched} == {"flex"}
    assert all(c.instance_type.startswith("c7i-flex.") for c in third.launched)


#: seven pools of one family each, by weight; EC2 has no capacity for the first six families
FAMILIES = ["c7i-flex", "m7i", "c7i", "r7i", "m6i", "c6i", "r6i"]
SHORT = [CapacityFailure.model_validate({"instanceType": f"{f}.*", "until": 600}) for f in FAMILIES[:-1]]


@pytest.fixture
def seven_pools(make_deps: MakeDeps, network: Any) -> Iterator[tuple[Any, list[int]]]:
    config = manifests(*(nodepool(f"p{i}", weight=90 - 10 * i,
                                  requirements={"karpenter.k8s.aws/instance-family": [f],
                                                "karpenter.sh/capacity-type": ["on-demand"]})
                         for i, f in enumerate(FAMILIES)), nodeclass())
    d = make_deps(config)
    zones = {s: z for z, ids in network.subnets.items() for s in ids}
    faults = CapacityFaults(SHORT, lambda: (d.clock.now - T0).total_seconds(), zones.get)
    fleets: list[int] = []  # one entry per CreateFleet sent

    def count(**_: Any) -> None:
        fleets.append(1)

    faults.register(d.compute.client)
    d.compute.client.meta.events.register("before-parameter-build.ec2.CreateFleet", count)
    yield d, fleets
    d.compute.client.meta.events.unregister("before-parameter-build.ec2.CreateFleet", count)
    faults.unregister(d.compute.client)


def test_six_capacity_errors_in_a_row_are_served_in_the_same_invocation(seven_pools: Any) -> None:
    """Each pool in turn answers InsufficientInstanceCapacity: the call walks all seven in weight order and
    launches from the last, instead of giving up after five rounds and leaving the pods to a later batch."""
    d, fleets = seven_pools
    outcome = provision.provision_pods(pending_pods(2, cpu="500m", prefix="w", deps=d), d, reason="test")
    assert not outcome.failed, outcome.failed
    assert {c.nodepool for c in outcome.launched} == {"p6"}
    assert outcome.rounds == 7 and len(fleets) == 7
    assert {t.split(".")[0] for t, _, _ in d.offerings.unavailable(d.clock.now)} == set(FAMILIES[:-1])


def test_the_rounds_end_at_the_deadline_and_the_pods_are_retried(seven_pools: Any) -> None:
    """A deadline that leaves room for three launches: the fourth round does not start, and the pods are
    reported for redelivery with the deadline's reason, not launched late and not left unexplained."""
    d, fleets = seven_pools
    deadline = Deadline(at=100.0, claim_budget=20.0, clock=lambda: 30.0 * len(fleets))
    outcome = provision.provision_pods(pending_pods(2, cpu="500m", prefix="d", deps=d), d, reason="test",
                                       deadline=deadline)
    assert not outcome.launched and len(fleets) == 3
    assert set(outcome.failed.values()) == {DEADLINE_REASON}
    assert sorted(outcome.failed) == ["default/d0", "default/d1"]


def test_a_round_that_changes_nothing_ends_the_rounds_saying_what_is_left(make_deps: MakeDeps) -> None:
    """Every subnet is full (DescribeSubnets: no free address): the claim is planned in their zones, but no
    launch can be asked for, and nothing a round does changes that. The rounds stop after the first such
    round, with a reason naming it, instead of repeating it."""
    d = make_deps(CONFIG)

    def full(parsed: dict[str, Any], **_: Any) -> None:
        for subnet in parsed.get("Subnets", []):
            subnet["AvailableIpAddressCount"] = 0

    events = d.compute.client.meta.events
    events.register("after-call.ec2.DescribeSubnets", full)
    try:
        outcome = provision.provision_pods(pending_pods(2, cpu="500m", prefix="f", deps=d), d, reason="test")
    finally:
        events.unregister("after-call.ec2.DescribeSubnets", full)
    assert not outcome.launched and outcome.rounds == 1
    (why,) = set(outcome.failed.values())
    assert why.startswith("round 1 changed nothing") and "2 pods left" in why
