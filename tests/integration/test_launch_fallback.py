"""Capacity errors on the preferred pool: fallback in the same invocation; the failed offerings are
skipped for 3 minutes (persisted in DynamoDB, expiry checked in code), then tried again."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from carpool.api.k8s import Pod
from carpool.app import provision, wiring
from carpool.app.settings import Settings
from carpool.app.sources import StaticCatalogSource
from carpool.sim.cluster import SimulatedCluster
from carpool.sim.faults import CapacityFaults
from carpool.sim.localaws import LocalAws
from carpool.sim.scenario import CapacityFailure

CLUSTER = "itest"
T0 = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)
CONFIG = f"""
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: flex}}
spec:
  weight: 100
  template:
    spec:
      requirements:
        - {{key: karpenter.k8s.aws/instance-family, operator: In, values: [c7i-flex]}}
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: general}}
spec:
  weight: 1
  template:
    spec:
      requirements:
        - {{key: karpenter.k8s.aws/instance-family, operator: In, values: [m6i, c6i]}}
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  role: node-role
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: {CLUSTER}}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: {CLUSTER}}}}}]
"""


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def deps(local_aws: LocalAws, state_tables: Any, network: Any) -> Iterator[Any]:
    local_aws.seed_amis([{"name": "al2023-x86", "architecture": "x86_64", "creationDate": "2026-01-01T00:00:00Z",
                          "parameter": "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id"}])
    local_aws.put_config(CONFIG)
    clock = Clock()
    settings = dataclasses.replace(Settings.from_env(), cluster_name=CLUSTER, instance_profile="node-profile")
    built = wiring.build_from_env(settings, cluster=SimulatedCluster(clock))
    d = dataclasses.replace(built, clock=clock, catalog=StaticCatalogSource("us-east-1"))
    zones = {s: z for z, ids in network.subnets.items() for s in ids}
    faults = CapacityFaults([CapacityFailure.model_validate({"instanceType": "c7i-flex.*", "until": 120})],
                            lambda: (clock.now - T0).total_seconds(), zones.get)
    faults.register(d.compute.client)
    yield d, clock, faults


def _pending(d: Any, pods: list[Pod]) -> list[Pod]:
    """The pods exist in the cluster (in-flight room is only held for pods that still exist)."""
    for pod in pods:
        d.cluster.add_pod(pod.to_json_dict())
    return pods


def _pods(prefix: str, n: int = 4, cpu: str = "500m") -> list[Pod]:
    return [Pod.model_validate({
        "metadata": {"name": f"{prefix}{i}", "namespace": "default", "uid": f"{prefix}{i}"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
    }) for i in range(n)]


def test_fallback_in_the_same_invocation_then_flex_again_after_three_minutes(deps: Any) -> None:
    d, clock, faults = deps
    first = provision.provision_pods(_pending(d, _pods("a")), d, reason="test")
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
    second = provision.provision_pods(_pending(d, _pods("b", cpu="7")), d, reason="test")
    assert {c.nodepool for c in second.launched} == {"general"}
    assert len(faults.injected) == tried

    # after the 3-minute window the offerings are tried again and flex serves
    clock.now = T0 + timedelta(seconds=181 + 30)
    assert d.offerings.unavailable(clock.now) == set()
    third = provision.provision_pods(_pending(d, _pods("c", cpu="7")), d, reason="test")
    assert {c.nodepool for c in third.launched} == {"flex"}
    assert all(c.instance_type.startswith("c7i-flex.") for c in third.launched)
