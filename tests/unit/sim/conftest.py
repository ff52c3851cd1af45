"""Small builders of Kubernetes JSON for the simulation's unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from carpool.sim.clock import SimClock
from carpool.sim.cluster import SimulatedCluster


def make_pod(name: str, cpu: str = "500m", memory: str = "1Gi", **spec: Any) -> dict[str, Any]:
    labels = spec.pop("labels", {"app": name.rsplit("-", 1)[0]})
    owners = spec.pop("owners", [])
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels, "ownerReferences": owners},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
                 **spec},
    }


def make_node(name: str, cpu: str = "2", memory: str = "8Gi", pods: str = "29", labels: dict[str, str] | None = None,
              taints: list[dict[str, str]] | None = None, ready: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"providerID": f"aws:///us-east-1a/i-{name}", "taints": taints or []},
        "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": pods},
                   "allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


@pytest.fixture
def clock() -> SimClock:
    return SimClock()


@pytest.fixture
def cluster(clock: SimClock) -> SimulatedCluster:
    return SimulatedCluster(clock, elapsed=lambda: clock.elapsed)


def create_dynamo_table(client: Any, name: str, gsi1: bool = False) -> None:
    """A table with carpool's key layout (pk/sk, optionally the gsi1 index) on an in-process moto."""
    attributes = ["pk", "sk", *(["gsi1pk", "gsi1sk"] if gsi1 else [])]
    extra: dict[str, Any] = {}
    if gsi1:
        extra["GlobalSecondaryIndexes"] = [{"IndexName": "gsi1", "Projection": {"ProjectionType": "ALL"}, "KeySchema": [
            {"AttributeName": "gsi1pk", "KeyType": "HASH"}, {"AttributeName": "gsi1sk", "KeyType": "RANGE"}]}]
    client.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in attributes], **extra)


@pytest.fixture
def moto_in_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto in this process (`mock_aws`), with the fake credentials and region boto3 clients need."""
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        yield
