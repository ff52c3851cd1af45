"""Workloads expand into the pending pods their controllers would create."""

from __future__ import annotations

from typing import Any

import pytest

from carpool.api.loader import load
from carpool.api.workloads import Deployment, Job, stable_uid


def workload(kind: str, api: str = "apps/v1", namespace: str | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web"}
    if namespace:
        meta["namespace"] = namespace
    return {
        "apiVersion": api,
        "kind": kind,
        "metadata": meta,
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]
                },
            },
            **spec,
        },
    }


@pytest.mark.parametrize(
    ("doc", "count"),
    [
        (workload("Deployment", replicas=3), 3),
        (workload("Deployment"), 1),
        (workload("Deployment", replicas=0), 0),
        (workload("ReplicaSet", replicas=2), 2),
        (workload("StatefulSet", replicas=4), 4),
        (workload("Job", api="batch/v1", parallelism=5, completions=2), 2),
        (workload("Job", api="batch/v1", parallelism=3), 3),
        (workload("Job", api="batch/v1", parallelism=2, completions=10), 2),
        (workload("Job", api="batch/v1"), 1),
    ],
)
def test_expansion_counts(doc: dict[str, Any], count: int) -> None:
    assert len(load([doc]).pods) == count


def test_pods_are_named_owned_and_pending() -> None:
    pods = load([workload("Deployment", replicas=3)]).pods
    assert [p.key for p in pods] == ["default/web-0", "default/web-1", "default/web-2"]
    for p in pods:
        [owner] = p.metadata.owner_references
        assert (owner.kind, owner.name, owner.api_version, owner.controller) == (
            "Deployment",
            "web",
            "apps/v1",
            True,
        )
        assert p.labels == {"app": "web"}
        assert p.is_provisionable()
        assert p.status.phase == "Pending"
        assert p.requests() == {"cpu": 500, "memory": 2**30, "pods": 1}


def test_uids_are_stable_and_distinct() -> None:
    first = [p.metadata.uid for p in load([workload("StatefulSet", replicas=3)]).pods]
    second = [p.metadata.uid for p in load([workload("StatefulSet", replicas=3)]).pods]
    assert first == second
    assert len(set(first)) == 3
    assert first[0] == stable_uid("Pod", "default", "web-0")
    assert stable_uid("Pod", "other", "web-0") != first[0]


def test_namespace_comes_from_the_workload() -> None:
    pods = load([workload("Job", api="batch/v1", namespace="batch", parallelism=2)]).pods
    assert {p.namespace for p in pods} == {"batch"}
    assert pods[0].metadata.owner_references[0].kind == "Job"


def test_pods_do_not_share_their_spec() -> None:
    a, b = Deployment.model_validate(workload("Deployment", replicas=2)).pods()
    a.spec.node_name = "n1"
    a.spec.containers[0].resources.requests["cpu"] = "4"
    assert b.spec.node_name is None
    assert b.spec.containers[0].resources.requests["cpu"] == "500m"


def test_job_model_directly() -> None:
    job = Job.model_validate(workload("Job", api="batch/v1", parallelism=4, completions=3))
    assert job.replicas() == 3
    assert [p.name for p in job.pods()] == ["web-0", "web-1", "web-2"]


def test_v1_list_and_bare_pod() -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            workload("Deployment", replicas=2),
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "solo"},
                "spec": {"containers": [{"name": "c"}]},
            },
        ],
    }
    m = load([doc])
    assert sorted(p.key for p in m.pods) == ["default/solo", "default/web-0", "default/web-1"]
    assert all(p.is_provisionable() for p in m.pods)
