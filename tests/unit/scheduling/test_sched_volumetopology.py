"""Volume topology: which zones a pod's persistent volumes allow, and which claims keep it from scheduling
(Karpenter's VolumeTopology: GetRequirements and ValidatePersistentVolumeClaims)."""

from __future__ import annotations

from typing import Any

import pytest

from carpool.api.k8s import Pod
from carpool.api.storage import PersistentVolume, PersistentVolumeClaim, StorageClass
from carpool.requirements import Requirements
from carpool.scheduling import convert
from carpool.scheduling.volumetopology import VolumeTopology, combine, conflict

ZONE = "topology.kubernetes.io/zone"
BOUND = {"pv.kubernetes.io/bind-completed": "yes"}


def storage_class(name: str = "zonal", zones: list[str] | None = None, mode: str | None = "WaitForFirstConsumer",
                  default: bool = False) -> StorageClass:
    doc: dict[str, Any] = {"metadata": {"name": name}, "provisioner": "ebs.csi.aws.com"}
    if default:
        doc["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    if mode:
        doc["volumeBindingMode"] = mode
    if zones:
        doc["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE, "values": zones}]}]
    return StorageClass.model_validate(doc)


def volume(name: str, terms: list[list[dict[str, Any]]], source: str = "csi") -> PersistentVolume:
    sources = {"csi": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"}},
               "local": {"local": {"path": "/mnt/disks"}}, "hostPath": {"hostPath": {"path": "/mnt/disks"}}}
    spec = {**sources[source], "nodeAffinity": {"required": {"nodeSelectorTerms": [
        {"matchExpressions": t} for t in terms]}}}
    return PersistentVolume.model_validate({"metadata": {"name": name}, "spec": spec})


def claim(name: str, sc: str | None = "zonal", volume_name: str | None = None, **meta: Any) -> PersistentVolumeClaim:
    spec: dict[str, Any] = {}
    if sc is not None:
        spec["storageClassName"] = sc
    if volume_name:
        spec["volumeName"] = volume_name
    return PersistentVolumeClaim.model_validate({"metadata": {"name": name, "namespace": "default", **meta},
                                                 "spec": spec})


def pod(*claims: str, ephemeral: bool = False, zones: list[str] | None = None) -> Pod:
    volumes: list[dict[str, Any]] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
                                     for i, c in enumerate(claims)]
    if ephemeral:
        volumes.append({"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}})
    volumes.append({"name": "cache", "emptyDir": {}})
    spec: dict[str, Any] = {"containers": [{"name": "c"}], "volumes": volumes}
    if zones:
        spec["nodeSelector"] = {ZONE: zones[0]}
    return Pod.model_validate({"metadata": {"name": "web-0", "namespace": "default"}, "spec": spec})


def zin(*zones: str) -> list[dict[str, Any]]:
    return [{"key": ZONE, "operator": "In", "values": list(zones)}]


def zones_of(alternatives: tuple[Requirements, ...]) -> list[set[str]]:
    return [set(a[ZONE].values) for a in alternatives]


def test_a_bound_volume_confines_the_pod_to_each_of_its_terms() -> None:
    topo = VolumeTopology([storage_class(zones=["a", "b"])],
                          [volume("pv-1", [zin("c"), zin("d")])], [claim("data", volume_name="pv-1", annotations=BOUND)])
    p = pod("data")
    assert topo.problem(p) is None
    assert zones_of(topo.requirements(p)) == [{"c"}, {"d"}]  # the volume wins over its class


def test_an_unbound_claim_takes_its_class_allowed_topologies() -> None:
    topo = VolumeTopology([storage_class(zones=["a", "b"])], [], [claim("data")])
    assert zones_of(topo.requirements(pod("data"))) == [{"a", "b"}]


def test_a_generic_ephemeral_volume_uses_the_claim_named_after_pod_and_volume() -> None:
    topo = VolumeTopology([storage_class(zones=["b"])], [], [claim("web-0-scratch")])
    assert topo.problem(pod(ephemeral=True)) is None
    assert zones_of(topo.requirements(pod(ephemeral=True))) == [{"b"}]
    assert "web-0-scratch not found" in (VolumeTopology([], [], []).problem(pod(ephemeral=True)) or "")


def test_an_unset_class_is_the_default_class_but_an_empty_one_is_none() -> None:
    classes = [storage_class("gp3", zones=["a"], default=True)]
    assert zones_of(VolumeTopology(classes, [], [claim("data", sc=None)]).requirements(pod("data"))) == [{"a"}]
    empty = VolumeTopology(classes, [], [claim("data", sc="")])
    assert "must name a storage class" in (empty.problem(pod("data")) or "")


@pytest.mark.parametrize(("objects", "reason"), [
    ((), "persistentvolumeclaim default/data not found"),
    (([], [], [claim("data", sc="missing")]), "storageclass missing not found"),
    (([storage_class(mode=None)], [], [claim("data")]), "binds immediately"),
    (([storage_class()], [], [claim("data", volume_name="pv-9", annotations=BOUND)]), "persistentvolume pv-9 not found"),
    (([storage_class()], [volume("pv-1", [zin("a")])], [claim("data", volume_name="pv-1")]),
     "lacks the pv.kubernetes.io/bind-completed annotation"),
    (([storage_class()], [], [claim("data", deletionTimestamp="2026-01-01T00:00:00Z")]), "is being deleted"),
])
def test_claims_that_are_not_ready_keep_the_pod_from_scheduling(objects: tuple[Any, ...], reason: str) -> None:
    topo = VolumeTopology(*objects) if objects else VolumeTopology([], [], [])
    assert reason in (topo.problem(pod("data")) or "")


def test_a_lost_claim_is_rejected() -> None:
    lost = claim("data").model_copy(update={"status": claim("data").status.model_copy(update={"phase": "Lost"})})
    assert "non-existent persistentvolume" in (VolumeTopology([storage_class()], [], [lost]).problem(pod("data")) or "")


@pytest.mark.parametrize("source", ["local", "hostPath"])
def test_a_node_local_volume_drops_its_hostname_term(source: str) -> None:
    host = [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["ip-10-0-0-1"]}]
    topo = VolumeTopology([storage_class()], [volume("pv-1", [host], source)],
                          [claim("data", volume_name="pv-1", annotations=BOUND)])
    assert [len(a) for a in topo.requirements(pod("data"))] == [0]
    assert convert.pod_spec(pod("data"), topo.requirements(pod("data"))).requirements == ()


def test_a_network_volume_keeps_its_hostname_term() -> None:
    host = [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["ip-10-0-0-1"]}]
    topo = VolumeTopology([storage_class()], [volume("pv-1", [host])], [claim("data", volume_name="pv-1", annotations=BOUND)])
    (alt,) = topo.requirements(pod("data"))
    assert set(alt["kubernetes.io/hostname"].values) == {"ip-10-0-0-1"}


def test_several_volumes_combine_keeping_compatible_branches_only() -> None:
    left = (Requirements.from_specs(zin("a")), Requirements.from_specs(zin("b")))
    right = (Requirements.from_specs(zin("b")), Requirements.from_specs(zin("c")))
    assert zones_of(combine(left, right)) == [{"b"}]
    # when no branch is compatible, all are kept (and none can be satisfied)
    assert [a[ZONE].is_empty() for a in combine(left[:1], right)] == [True, True]


def test_pod_spec_ands_the_volume_zone_into_every_node_term() -> None:
    topo = VolumeTopology([storage_class(zones=["b", "c"])], [], [claim("data")])
    p = pod("data", zones=["c"])
    spec = convert.pod_spec(p, topo.requirements(p))
    assert [set(t[ZONE].values) for t in spec.requirements] == [{"c"}]
    assert conflict(spec.requirements, topo.requirements(p)) is None
    clash = pod("data", zones=["a"])
    clashing = convert.pod_spec(clash, topo.requirements(clash))
    assert "admit no common topology.kubernetes.io/zone" in (conflict(clashing.requirements, topo.requirements(clash)) or "")
