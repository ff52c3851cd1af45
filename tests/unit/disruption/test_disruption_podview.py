"""`PodView`: the compact pod the disruption pass reads, from a `Pod` model or projected from API JSON.

The two ways in must agree on every field a decision reads, and the projection must share what the pods of
one workload have in common, or the pass would not fit its Lambda at 150,000 pods.
"""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest

from carpool.adapters.k8s import reads
from carpool.api.k8s import Pod, PodDisruptionBudget
from carpool.disruption import podview, protection

T = "2026-05-01T10:00:00Z"


def pod_json(name: str, *, node: str | None = "n1", phase: str = "Running", owner: str = "ReplicaSet",
             app: str = "web", cpu: str = "250m", extra_spec: dict[str, Any] | None = None,
             annotations: dict[str, str] | None = None, ready: str | None = "True",
             deleting: bool = False) -> dict[str, Any]:
    """A pod as the API server sends it, with the fields a projection must skip (env, probes, volumes,
    statuses, managed fields)."""
    meta: dict[str, Any] = {
        "name": name, "namespace": "shop", "uid": f"uid-{name}", "creationTimestamp": T,
        "labels": {"app": app, "pod-template-hash": "abc"}, "annotations": annotations or {},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner, "name": f"{app}-abc", "uid": "o",
                             "controller": True}],
        "managedFields": [{"manager": "kubelet", "operation": "Update", "fieldsV1": {"f:status": {}}}]}
    if deleting:
        meta["deletionTimestamp"] = T
    spec: dict[str, Any] = {
        "containers": [{"name": app, "image": "x", "env": [{"name": "A", "value": "b"}],
                        "livenessProbe": {"httpGet": {"path": "/", "port": 80}},
                        "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
                        "ports": [{"containerPort": 80, "protocol": "TCP"}]}],
        "volumes": [{"name": "token", "projected": {"sources": []}}],
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                         "tolerationSeconds": 300}],
        **(extra_spec or {})}
    if node:
        spec["nodeName"] = node
    status: dict[str, Any] = {"phase": phase, "containerStatuses": [{"name": app, "ready": True}]}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready, "lastTransitionTime": T},
                                {"type": "PodScheduled", "status": "True"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


VARIED = [
    pod_json("plain"),
    pod_json("unbound", node=None, phase="Pending", ready=None),
    pod_json("daemon", owner="DaemonSet", app="agent"),
    pod_json("static", owner="Node", app="mirror"),
    pod_json("done", phase="Succeeded", ready="False"),
    pod_json("not-ready", ready="False"),
    pod_json("leaving", deleting=True),
    pod_json("protected", annotations={"karpenter.sh/do-not-disrupt": "true"}),
    pod_json("cas", annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}),
    pod_json("costly", annotations={"controller.kubernetes.io/pod-deletion-cost": "-1000000"},
             extra_spec={"priority": 1000000}),
    pod_json("constrained", app="db", extra_spec={
        "nodeSelector": {"kubernetes.io/arch": "arm64"},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}]}]}},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "db"}}}]}},
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                       "whenUnsatisfiable": "DoNotSchedule",
                                       "labelSelector": {"matchLabels": {"app": "db"}}}]}),
    pod_json("sidecars", extra_spec={
        "initContainers": [{"name": "proxy", "restartPolicy": "Always",
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                            "ports": [{"containerPort": 9000, "hostPort": 9000}]},
                           {"name": "migrate", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}],
        "overhead": {"cpu": "50m"}}),
]


def project(items: list[dict[str, Any]], shapes: podview.Shapes | None = None) -> list[podview.PodView]:
    page = json.dumps({"kind": "PodList", "metadata": {"resourceVersion": "7"}, "items": items}).encode()
    shapes = podview.Shapes() if shapes is None else shapes
    return [p.view(shapes) for p in reads.parse_page(page, reads.PodProjection).items or []]


@pytest.mark.parametrize("raw", VARIED, ids=[p["metadata"]["name"] for p in VARIED])
def test_the_projection_and_the_model_give_the_same_view(raw: dict[str, Any]) -> None:
    [projected] = project([raw])
    assert projected == podview.from_pod(Pod.model_validate(raw))


def test_what_decisions_read_from_a_view() -> None:
    views = {v.key.split("/")[1]: v for v in project(VARIED)}
    assert views["plain"].reschedulable and views["plain"].healthy and views["plain"].protection is None
    assert views["plain"].requests == {"cpu": 250, "memory": 256 * 2**20, "pods": 1}
    assert not views["daemon"].reschedulable and views["daemon"].spec is None
    assert not views["static"].reschedulable and not views["done"].reschedulable
    assert not views["not-ready"].healthy and not views["leaving"].healthy and views["leaving"].terminating
    assert views["protected"].protection == "pod shop/protected has karpenter.sh/do-not-disrupt"
    assert views["cas"].protection == "pod shop/cas has cluster-autoscaler.kubernetes.io/safe-to-evict: false"
    assert views["costly"].eviction_cost == pytest.approx(1 - 1e6 / 2**27 + 1e6 / 2**25)
    db = views["constrained"].spec
    assert db is not None and db.anti_affinity and db.spread and len(db.requirements) == 1
    assert set(db.requirements[0]) == {"kubernetes.io/arch", "team"}
    # sidecar-aware: max(regular 250m + sidecar 100m, init 2 + sidecar 100m) + overhead 50m
    assert views["sidecars"].requests["cpu"] == 2150
    assert views["sidecars"].spec is not None and views["sidecars"].spec.host_ports[0].port == 9000


def test_pods_of_one_workload_share_their_shape_and_keep_their_identity() -> None:
    shapes = podview.Shapes()
    replicas = project([pod_json(f"web-{i}", node=f"n{i % 3}") for i in range(50)], shapes)
    other = project([pod_json("api-0", app="api"), pod_json("web-big", cpu="2")], shapes)
    assert len(shapes) == 3
    first, last = replicas[0], replicas[-1]
    assert first.spec is not None and last.spec is not None
    assert first.labels is last.labels and first.requests is last.requests
    assert first.spec.tolerations is last.spec.tolerations
    assert (first.key, first.spec.key, first.spec.uid, first.node) == ("shop/web-0", "shop/web-0", "uid-web-0", "n0")
    assert (last.key, last.spec.uid, last.node) == ("shop/web-49", "uid-web-49", "n1")
    assert other[1].requests["cpu"] == 2000 and other[0].labels["app"] == "api"


def test_a_view_is_a_few_hundred_bytes_where_a_pod_model_is_many_kilobytes() -> None:
    items = [pod_json(f"web-{i}", node=f"n{i % 30}", app=f"app-{i % 10}") for i in range(2000)]
    page = json.dumps({"kind": "PodList", "metadata": {}, "items": items}).encode()
    parsed = reads.parse_page(page, reads.PodProjection).items or []
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    shapes = podview.Shapes()
    views = [p.view(shapes) for p in parsed]
    per_view = (tracemalloc.get_traced_memory()[0] - before) / len(views)
    models = [Pod.model_validate(p) for p in items[:200]]
    per_model = (tracemalloc.get_traced_memory()[0] - before - per_view * len(views)) / len(models)
    tracemalloc.stop()
    assert per_view < 1_000, per_view
    assert per_model > 5 * per_view


def test_pdb_membership_and_allowances_from_views() -> None:
    views = project([pod_json("web-0"), pod_json("web-1", ready="False"), pod_json("api-0", app="api"),
                     pod_json("web-done", phase="Succeeded")])
    web = PodDisruptionBudget.model_validate({"metadata": {"name": "web", "namespace": "shop"},
                                              "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    every = PodDisruptionBudget.model_validate({"metadata": {"name": "all", "namespace": "shop"},
                                                "spec": {"maxUnavailable": 2, "selector": {}}})
    elsewhere = PodDisruptionBudget.model_validate({"metadata": {"name": "web", "namespace": "other"},
                                                    "spec": {"minAvailable": 0, "selector": {}}})
    index = protection.PdbIndex([web, every, elsewhere])
    # web: 2 expected (the finished pod is not), 1 healthy, 1 must stay -> 0;
    # all: 3 expected, 2 healthy, 3 - 2 = 1 must stay -> 1
    assert protection.allowances([web, every, elsewhere], views, index) == {"shop/web": 0, "shop/all": 1,
                                                                           "other/web": 0}
    counts, problem = protection.membership(views[:3], index)
    assert counts == {"shop/web": 2, "shop/all": 3}
    assert problem == "pod shop/web-0 is selected by 2 PodDisruptionBudgets (shop/all, shop/web)"
