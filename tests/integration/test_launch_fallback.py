"""Capacity errors on the preferred pool: fallback in the same invocation; the failed offerings are
skipped for 3 minutes (persisted in DynamoDB, expiry checked in code), then tried again."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from carpool_env import T0, MakeDeps, manifests, nodeclass, nodepool, pending_pods

from carpool.app.provisioning import provision
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
