"""The simulated cluster keeps the storage objects a scenario's manifests contain and answers the
provisioner's storage read as the API server would: the named claims of each pod's namespace, the
volumes they are bound to, every StorageClass."""

from __future__ import annotations

from datetime import UTC, datetime

from carpool.api.k8s import Pod
from carpool.api.loader import load
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.sim.cluster.workload import WorkloadDriver

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
MANIFESTS = """
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3, annotations: {storageclass.kubernetes.io/is-default-class: "true"}}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-a}
spec:
  nodeAffinity:
    required:
      nodeSelectorTerms: [{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}]}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: shop, annotations: {pv.kubernetes.io/bind-completed: "yes"}}
spec: {volumeName: pv-a}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec: {}
"""


def _pod(name: str, namespace: str, claim: str | None = None, ephemeral: bool = False) -> Pod:
    volumes: list[dict[str, object]] = []
    if claim:
        volumes.append({"name": "d", "persistentVolumeClaim": {"claimName": claim}})
    if ephemeral:
        volumes.append({"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}})
    return Pod.model_validate({"metadata": {"name": name, "namespace": namespace},
                               "spec": {"containers": [{"name": "c", "image": "x"}], "volumes": volumes}})


def _applied() -> SimulatedCluster:
    cluster = SimulatedCluster(lambda: NOW)
    WorkloadDriver(cluster, load=load).apply([MANIFESTS])
    return cluster


def test_applied_manifests_store_their_storage_objects() -> None:
    cluster = _applied()
    assert set(cluster.claims) == {"shop/data", "default/data"}  # a claim without namespace is in default
    assert set(cluster.volumes) == {"pv-a"} and set(cluster.storageclasses) == {"gp3"}


def test_storage_for_answers_the_claims_of_each_pods_namespace_and_their_volumes() -> None:
    claims, volumes, classes = _applied().storage_for([_pod("db-0", "shop", "data")])
    assert [(c.namespace, c.name) for c in claims] == [("shop", "data")]
    assert [v.name for v in volumes] == ["pv-a"]
    assert [c.name for c in classes] == ["gp3"] and classes[0].is_default()


def test_an_ephemeral_volume_names_its_claim_after_the_pod_and_missing_claims_are_absent() -> None:
    cluster = _applied()
    cluster.add_storage({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                         "metadata": {"name": "job-0-scratch", "namespace": "shop"}, "spec": {}})
    claims, volumes, _ = cluster.storage_for([_pod("job-0", "shop", "missing", ephemeral=True)])
    assert [c.name for c in claims] == ["job-0-scratch"]
    assert volumes == []


def test_pods_without_claims_get_nothing() -> None:
    assert _applied().storage_for([_pod("web-0", "shop")]) == ([], [], [])
