"""From API models to scheduler inputs."""

from __future__ import annotations

from sched_factories import GIB, claim_of, pool, run

from carpool import labels as L
from carpool.api.k8s import Node, Pod
from carpool.api.nodepool import NodePool
from carpool.scheduling import convert
from carpool.scheduling.inputs import InFlightClaim

POD = {
    "metadata": {"name": "web-1", "namespace": "shop", "labels": {"app": "web", "pod-template-hash": "abc"},
                 "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "u",
                                      "controller": True}]},
    "spec": {
        "nodeSelector": {"kubernetes.io/arch": "amd64"},
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}},
                        "ports": [{"containerPort": 80, "hostPort": 8080}]}],
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}]},
                    {"matchExpressions": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]},
                ]},
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 5, "preference": {"matchExpressions": [{"key": "x", "operator": "Exists"}]}}],
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}],
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "web"}},
                                                       "namespaceSelector": {}, "topologyKey": "topology.kubernetes.io/zone"}}],
            },
        },
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
             "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["pod-template-hash"], "minDomains": 2}],
    },
}


def test_pod_spec_carries_every_constraint():
    spec = convert.pod_spec(Pod.model_validate(POD))
    assert spec.key == "shop/web-1" and spec.namespace == "shop"
    assert spec.requests == {"cpu": 250, "memory": 512 * 2**20, "pods": 1}
    assert len(spec.requirements) == 2
    assert all(t[L.ARCH].has("amd64") for t in spec.requirements)
    assert spec.requirements[0][L.ZONE].has("zone-a") and spec.requirements[1][L.CAPACITY_TYPE].has("spot")
    assert spec.preferred_node_affinity[0].weight == 5
    assert spec.tolerations[0].key == "dedicated"
    assert spec.anti_affinity[0].topology_key == L.HOSTNAME
    assert spec.preferred_anti_affinity[0].term.all_namespaces
    s = spec.spread[0]
    assert not s.hard and s.min_domains == 2
    assert s.selector.matches({"app": "web", "pod-template-hash": "abc"})
    assert not s.selector.matches({"app": "web", "pod-template-hash": "other"})
    assert spec.host_ports[0].port == 8080
    assert spec.owner == "ReplicaSet/web-abc"


def test_missing_selector_selects_nothing():
    pod = Pod.model_validate({"metadata": {"name": "p"}, "spec": {"affinity": {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": L.HOSTNAME}]}}}})
    assert not convert.pod_spec(pod).affinity[0].selector.matches({})


def test_pool_spec_reads_carpool_annotations():
    np = NodePool.model_validate({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "flex", "annotations": {
            "carpool.dev/ordered-requirements": "karpenter.k8s.aws/instance-family",
            "carpool.dev/split": "70", "carpool.dev/split-by": "cpu"}},
        "spec": {"weight": 10, "limits": {"cpu": "100"}, "template": {
            "metadata": {"labels": {"team": "a"}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                     "requirements": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In",
                                       "values": ["c7i-flex", "*"]}],
                     "taints": [{"key": "t", "effect": "NoSchedule"}]}}},
    })
    spec = convert.pool_spec(np, [])
    assert spec.weight == 10 and spec.limits == {"cpu": 100000}
    assert spec.ordered_keys == (L.INSTANCE_FAMILY,)
    assert spec.split_share == 70 and spec.split_by == "cpu"
    assert spec.requirements[L.NODEPOOL].has("flex") and spec.labels == {"team": "a"}
    assert str(spec.taints[0]) == "t:NoSchedule"


def test_existing_node_and_unknown_in_flight_zone():
    node = Node.model_validate({"metadata": {"name": "n1", "labels": {L.ZONE: "zone-a"}},
                                "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}}})
    bound = Pod.model_validate({"metadata": {"name": "b", "labels": {"app": "z"}},
                                "spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}})
    existing = convert.existing_node(node, [bound])
    assert existing.remaining["cpu"] == 1000 and existing.remaining["pods"] == 9
    # an in-flight claim whose zone is not known yet ("") must not invent a zone domain
    inflight = InFlightClaim("c1", "default", {L.ZONE: "", L.NODEPOOL: "default"}, {"cpu": 4000, "memory": 4 * GIB, "pods": 5})
    pod = convert.pod_spec(Pod.model_validate({"metadata": {"name": "z", "labels": {"app": "z"}}, "spec": {
        "containers": [{"resources": {"requests": {"cpu": "100m"}}}],
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": L.ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                       "labelSelector": {"matchLabels": {"app": "z"}}}]}}))
    full = convert.existing_node(node, [bound, bound.model_copy(update={"metadata": bound.metadata.model_copy(update={"name": "b2"})})])
    assert full.remaining["cpu"] == 0
    result = run([pod], [pool()], in_flight=[inflight], existing=[full])
    assert claim_of(result, "default/z").zone in ("zone-b", "zone-c")
