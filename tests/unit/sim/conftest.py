"""Small builders of Kubernetes JSON for the simulation's unit tests."""

from __future__ import annotations

from typing import Any

import pytest

from carpool.sim.clock import SimClock
from carpool.sim.cluster.simulated import SimulatedCluster


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
