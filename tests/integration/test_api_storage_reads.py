"""The storage objects the provisioner reads through the lightkube adapter, served over HTTP by the
simulated kube-apiserver: claims are listed per namespace of the pods that name them (not across the
cluster), bound volumes and StorageClasses once each, and nothing at all for pods without claims."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from carpool.adapters.k8s.cluster import ClusterAccess, LightkubeCluster
from carpool.api.k8s import Pod
from carpool.sim.cluster.apiserver import SimApiServer
from carpool.sim.cluster.simulated import SimulatedCluster

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


class FixedToken:
    stale = False

    def token(self) -> str:
        return "k8s-aws-v1.test"


def claim(name: str, namespace: str, volume: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"storageClassName": "ebs", "accessModes": ["ReadWriteOnce"]}
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if volume:
        spec["volumeName"] = volume
        meta["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec,
            "status": {"phase": "Bound" if volume else "Pending"}}


def volume(name: str, zone: str) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"storageClassName": "ebs", "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}}}}


def pod(name: str, namespace: str, *claims: str) -> Pod:
    return Pod.model_validate({
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [{"name": "c", "image": "x"}],
                 "volumes": [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]},
    })


@pytest.fixture
def served() -> Iterator[tuple[SimApiServer, LightkubeCluster]]:
    sim = SimulatedCluster(lambda: NOW)
    sim.add_storage({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "ebs"},
                     "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer"})
    sim.add_storage(volume("pv-b", "us-east-1b"))
    sim.add_storage(volume("pv-other", "us-east-1a"))
    sim.add_storage(claim("data", "shop", "pv-b"))
    sim.add_storage(claim("data", "other", "pv-other"))  # same name, another namespace
    sim.add_storage(claim("scratch", "shop"))
    with SimApiServer(sim) as server:
        yield server, LightkubeCluster("test", "us-east-1", access=ClusterAccess(server.url, ""), tokens=FixedToken())


def storage_reads(server: SimApiServer) -> list[str]:
    return [r.path for r in server.log if r.path.rsplit("/", 1)[-1] in
            ("persistentvolumeclaims", "persistentvolumes", "storageclasses")]


def test_claims_are_read_per_namespace_with_their_bound_volumes_and_the_classes(
        served: tuple[SimApiServer, LightkubeCluster]) -> None:
    server, adapter = served
    claims, volumes, classes = adapter.storage_for([pod("db-0", "shop", "data", "scratch"), pod("web-0", "shop")])
    assert sorted((c.namespace, c.name, c.spec.volume_name) for c in claims) == [
        ("shop", "data", "pv-b"), ("shop", "scratch", None)]
    assert [v.name for v in volumes] == ["pv-b"]  # only the volumes the claims are bound to
    zone = volumes[0].spec.node_affinity.required.node_selector_terms[0].match_expressions[0]  # type: ignore[union-attr]
    assert zone.values == ["us-east-1b"]
    assert [(c.name, c.volume_binding_mode) for c in classes] == [("ebs", "WaitForFirstConsumer")]
    assert storage_reads(server) == ["/api/v1/namespaces/shop/persistentvolumeclaims", "/api/v1/persistentvolumes",
                                     "/apis/storage.k8s.io/v1/storageclasses"]


def test_a_missing_claim_is_absent_and_no_volume_is_read_for_unbound_claims(
        served: tuple[SimApiServer, LightkubeCluster]) -> None:
    server, adapter = served
    claims, volumes, classes = adapter.storage_for([pod("db-1", "shop", "scratch", "gone")])
    assert [c.name for c in claims] == ["scratch"]
    assert volumes == [] and len(classes) == 1
    assert "/api/v1/persistentvolumes" not in storage_reads(server)


def test_pods_without_claims_read_nothing(served: tuple[SimApiServer, LightkubeCluster]) -> None:
    server, adapter = served
    assert adapter.storage_for([pod("web-1", "shop")]) == ([], [], [])
    assert storage_reads(server) == []
