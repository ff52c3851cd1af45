"""Workloads expand into the pending pods their controllers would create."""

from __future__ import annotations

from typing import Any

import pytest

from carpool.api.loader import ManifestErrors, load
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


def test_stable_uid_is_the_rfc_uuid5_of_the_object() -> None:
    import uuid

    from carpool.api.workloads import _UID_NAMESPACE

    names = ["web-0", "web-9999", "", "nöde-ü", "日本語", "x" * 300]
    for kind, namespace, name in [("Pod", ns, n) for ns in ("default", "kube-system") for n in names] + [
        ("Deployment", "default", "burst")
    ]:
        expected = uuid.uuid5(_UID_NAMESPACE, f"{kind}/{namespace}/{name}")
        got = stable_uid(kind, namespace, name)
        assert got == str(expected) and uuid.UUID(got).version == 5


def _rich_template() -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": "web"}, "annotations": {"a": "b"}, "namespace": "tns", "name": "x"},
        "spec": {
            "containers": [
                {"name": "c", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
                 "ports": [{"containerPort": 80, "hostPort": 8080}]},
                {"name": "d", "resources": {"requests": {"cpu": 0.5}}},
            ],
            "initContainers": [{"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}}],
            "tolerations": [{"key": "k", "operator": "Exists"}],
            "nodeSelector": {"a": "b"},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                           "labelSelector": {"matchLabels": {"app": "web"}}}],
            "volumes": [{"name": "v", "ephemeral": {"volumeClaimTemplate": {}}}],
            "overhead": {"cpu": "10m"},
        },
    }


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet"])
def test_expanded_pods_are_what_stamping_one_at_a_time_gives(kind: str) -> None:
    """The batch expansion writes the same pods as stamping each from the template and marking it pending."""
    from carpool.api.k8s import PodStamper
    from carpool.api.meta import OwnerReference
    from carpool.api.workloads import WORKLOAD_KINDS, as_pending

    doc = workload(kind, replicas=4, template=_rich_template())
    model = WORKLOAD_KINDS[("apps/v1", kind)].model_validate(doc)
    owner = OwnerReference(api_version="apps/v1", kind=kind, name="web",
                           uid=stable_uid(kind, "tns", "web"), controller=True, block_owner_deletion=True)
    stamper = PodStamper(model.template())
    one_by_one = [as_pending(stamper.stamp(name=f"web-{i}", namespace="tns", owner=owner,
                                           uid=stable_uid("Pod", "tns", f"web-{i}"))) for i in range(4)]
    pods = model.pods()
    assert [p.to_json_dict() for p in pods] == [p.to_json_dict() for p in one_by_one]
    assert pods == one_by_one
    assert [p.model_fields_set for p in pods] == [p.model_fields_set for p in one_by_one]
    assert pods[0].requests() == {"cpu": 1610, "memory": 2**30, "pods": 1}


def test_expanded_pods_own_every_part_of_their_spec_and_metadata() -> None:
    a, b = Deployment.model_validate(workload("Deployment", replicas=2, template=_rich_template())).pods()
    a.metadata.labels["app"] = "changed"
    a.metadata.owner_references[0].name = "changed"
    a.spec.tolerations.clear()
    a.spec.node_selector["a"] = "changed"
    a.spec.volumes[0].ephemeral["volumeClaimTemplate"]["x"] = 1  # type: ignore[index]
    a.status.conditions[0].reason = "changed"
    assert b.metadata.labels == {"app": "web"} and b.metadata.owner_references[0].name == "web"
    assert len(b.spec.tolerations) == 1 and b.spec.node_selector == {"a": "b"}
    assert b.spec.volumes[0].ephemeral == {"volumeClaimTemplate": {}}
    assert b.is_provisionable()


@pytest.mark.parametrize(
    ("doc", "path", "hint"),
    [
        (workload("Deployment", replica=20), "spec.replica", "replicas"),
        (workload("StatefulSet", replicas=2, servicename="web"), "spec.servicename", "serviceName"),
        (workload("Job", api="batch/v1", paralelism=4), "spec.paralelism", "parallelism"),
        ({**workload("Deployment"), "sepc": {"replicas": 3}}, "sepc", "spec"),
    ],
    ids=["deployment-replica", "statefulset-servicename", "job-paralelism", "top-level-sepc"],
)
def test_a_field_kubernetes_does_not_declare_is_refused_with_its_path(doc: dict[str, Any], path: str,
                                                                       hint: str) -> None:
    """The API server's strict field validation refuses these; silently they ran one pod (or none)."""
    with pytest.raises(ManifestErrors) as caught:
        load(doc)
    [error] = caught.value.errors
    assert error.path == path
    assert error.message.startswith(f"unknown field {path.rsplit('.', 1)[-1]!r}") and f"did you mean {hint!r}" in error.message


def test_what_kubectl_get_writes_for_a_workload_still_loads() -> None:
    doc = workload("Deployment", replicas=2, strategy={"type": "RollingUpdate"}, revisionHistoryLimit=10,
                   progressDeadlineSeconds=600, minReadySeconds=0, paused=False)
    doc["status"] = {"replicas": 2, "readyReplicas": 2, "observedGeneration": 1}
    job = workload("Job", api="batch/v1", parallelism=2, backoffLimit=6, completionMode="NonIndexed",
                   suspend=False, podReplacementPolicy="TerminatingOrFailed", ttlSecondsAfterFinished=100)
    job["metadata"]["name"] = "batch"
    assert len(load([doc, job]).pods) == 4


def test_a_workload_checked_without_its_pods() -> None:
    """`expand=False`: validated as ever (a typo still refused), but no pod made (a run makes them)."""
    assert load(workload("Deployment", replicas=10_000), expand=False).pods == []
    with pytest.raises(ManifestErrors):
        load(workload("Deployment", replica=3), expand=False)
