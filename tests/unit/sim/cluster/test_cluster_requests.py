"""The binder's pod requests: `Pod.requests` of each pod, computed once per container shape."""

from __future__ import annotations

from typing import Any

import pytest

from carpool.api.k8s import Pod

from ..conftest import make_node, make_pod

SHAPES: list[dict[str, Any]] = [
    {},
    {"containers": [{"name": "a", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}},
                    {"name": "b", "resources": {"requests": {"cpu": "250m"}}}]},
    {"initContainers": [{"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                        {"name": "init", "resources": {"requests": {"cpu": "3", "memory": "64Mi"}}}]},
    {"overhead": {"cpu": "250m", "memory": "120Mi"}},
    {"initContainers": None, "overhead": None},
]


@pytest.mark.parametrize("extra", SHAPES)
def test_requests_are_those_of_the_pod_model(cluster, extra: dict[str, Any]) -> None:
    raw = make_pod("web-0", cpu="300m", memory="256Mi")
    raw["spec"].update(extra)
    key = cluster.add_pod(raw)
    rec = cluster.pods[key]
    expected = Pod.model_validate(rec.raw).requests()
    assert cluster.requests(rec) == expected
    twin = cluster.pods[cluster.add_pod({**raw, "metadata": {**raw["metadata"], "name": "web-1"}})]
    assert cluster.requests(twin) == expected
    assert cluster.requests(twin) is not cluster.requests(rec)  # each pod's own dict


def test_pods_of_another_shape_get_their_own_requests(cluster) -> None:
    small = cluster.pods[cluster.add_pod(make_pod("small-0", cpu="100m"))]
    large = cluster.pods[cluster.add_pod(make_pod("large-0", cpu="3"))]
    assert cluster.requests(small)["cpu"] == 100 and cluster.requests(large)["cpu"] == 3000


def test_binding_a_burst_builds_no_pod_model(cluster) -> None:
    cluster.add_node(make_node("n1", cpu="4", memory="16Gi", pods="110"))
    for i in range(50):
        cluster.add_pod(make_pod(f"web-{i}", cpu="100m", memory="64Mi"))
    stats = cluster.bind()
    assert stats.bound == 40 and stats.pending == 10  # cpu: 4 cores of 100m pods
    assert all(rec.model is None for rec in cluster.pods.values())
    assert sum(1 for p in cluster.pending_pods() if p.is_provisionable()) == 10
