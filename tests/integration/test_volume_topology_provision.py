"""The provisioner confines pods with persistent volume claims to their volumes' zones, as `carpool plan`
does: a claim bound to a zonal volume puts the node in that volume's zone, an unbound claim of a
`WaitForFirstConsumer` class in one of its `allowedTopologies`, and a pod whose claim is missing gets
no node at all (new capacity cannot help it) and is reported unschedulable with why."""

from __future__ import annotations

from typing import Any

from carpool_env import MakeDeps, manifests, nodeclass, nodepool

from carpool.api.k8s import Pod
from carpool.app.provisioning import provision
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.sim.cluster.workload import WorkloadDriver

ZONE = "topology.kubernetes.io/zone"
CONFIG = manifests(nodepool("general", requirements={"karpenter.k8s.aws/instance-family": ["m6i", "c6i"]}),
                   nodeclass())

STORAGE = """
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: ebs-wait}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
  - matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [us-east-1b]}]
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-b}
spec:
  storageClassName: ebs-wait
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-0b}
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1b]}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data-b
  namespace: shop
  annotations: {pv.kubernetes.io/bind-completed: "yes"}
spec:
  storageClassName: ebs-wait
  volumeName: pv-b
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 10Gi}}
status: {phase: Bound}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data-new, namespace: shop}
spec:
  storageClassName: ebs-wait
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 10Gi}}
status: {phase: Pending}
"""


def _pod(name: str, claim: str | None) -> dict[str, Any]:
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}] if claim else []
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "shop", "uid": name},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                     "volumes": volumes},
            "status": {"phase": "Pending",
                       "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}


def _cluster_with_storage(make_deps: MakeDeps) -> tuple[Any, SimulatedCluster]:
    from carpool.api.loader import load

    deps = make_deps(CONFIG)
    cluster = deps.cluster
    assert isinstance(cluster, SimulatedCluster)
    WorkloadDriver(cluster, load=load).apply([STORAGE])
    return deps, cluster


def _provision(deps: Any, cluster: SimulatedCluster, *pods: dict[str, Any]) -> provision.ProvisionOutcome:
    for raw in pods:
        cluster.add_pod(raw)
    return provision.provision_pods([Pod.model_validate(p) for p in pods], deps, reason="test")


def test_a_pod_whose_claim_is_bound_to_a_volume_in_zone_b_gets_a_node_in_zone_b_only(make_deps: MakeDeps) -> None:
    deps, cluster = _cluster_with_storage(make_deps)
    outcome = _provision(deps, cluster, _pod("db-0", "data-b"))
    assert [c.pods for c in outcome.launched] == [["shop/db-0"]], outcome
    assert outcome.launched[0].zone == "us-east-1b"
    assert outcome.launched[0].labels.get(ZONE) == "us-east-1b"  # the node is labelled for the volume's zone


def test_an_unbound_wait_for_first_consumer_claim_follows_its_class_allowed_topologies(make_deps: MakeDeps) -> None:
    deps, cluster = _cluster_with_storage(make_deps)
    outcome = _provision(deps, cluster, _pod("db-1", "data-new"))
    assert [c.zone for c in outcome.launched] == ["us-east-1b"], outcome


def test_a_pod_with_a_missing_claim_is_not_launched_for_and_is_reported(make_deps: MakeDeps) -> None:
    deps, cluster = _cluster_with_storage(make_deps)
    outcome = _provision(deps, cluster, _pod("lost-0", "no-such-claim"), _pod("web-0", None))
    assert [c.pods for c in outcome.launched] == [["shop/web-0"]], outcome
    assert outcome.unschedulable["shop/lost-0"] == {"*": "persistentvolumeclaim shop/no-such-claim not found"}
    assert "shop/lost-0" not in outcome.failed


def test_storage_is_read_once_per_batch_and_only_when_a_pod_mounts_a_claim(make_deps: MakeDeps,
                                                                           monkeypatch: Any) -> None:
    deps, cluster = _cluster_with_storage(make_deps)
    calls: list[list[str]] = []
    real = cluster.storage_for

    def counted(pods: Any) -> Any:
        calls.append(sorted(p.key for p in pods))
        return real(pods)

    monkeypatch.setattr(cluster, "storage_for", counted)
    _provision(deps, cluster, _pod("web-1", None))
    assert calls == []
    _provision(deps, cluster, _pod("db-2", "data-b"), _pod("db-3", "data-new"), _pod("web-2", None))
    assert calls == [["shop/db-2", "shop/db-3"]]
