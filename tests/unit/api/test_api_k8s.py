"""Kubernetes shapes: Pod requests (init containers, sidecars, overhead), provisionability, selectors,
Node, DaemonSet and PodDisruptionBudget."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from carpool import taints as domain
from carpool.api.k8s import DaemonSet, Node, Pod, PodDisruptionBudget
from carpool.api.selectors import LabelSelector, NodeSelectorRequirement

GI = 2**30
MI = 2**20


def container(
    cpu: str | None = None,
    memory: str | None = None,
    *,
    limits: dict[str, Any] | None = None,
    sidecar: bool = False,
) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    c: dict[str, Any] = {"name": "c", "resources": {"requests": requests}}
    if limits:
        c["resources"]["limits"] = limits
    if sidecar:
        c["restartPolicy"] = "Always"
    return c


def pod(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None, **spec: Any) -> Pod:
    return Pod.model_validate(
        {"metadata": {"name": "p"}, "spec": {"containers": containers, "initContainers": init or [], **spec}}
    )


# --- requests -------------------------------------------------------------------------------------------
def test_requests_sum_containers_and_count_one_pod() -> None:
    p = pod([container("250m", "256Mi"), container("1", "1Gi")])
    assert p.requests() == {"cpu": 1250, "memory": GI + 256 * MI, "pods": 1}


def test_empty_pod_requests_one_pod_slot() -> None:
    assert Pod().requests() == {"pods": 1}


def test_largest_init_container_wins_when_bigger() -> None:
    p = pod([container("500m", "128Mi")], init=[container("2", "64Mi"), container("100m", "1Gi")])
    assert p.requests() == {"cpu": 2000, "memory": GI, "pods": 1}


def test_init_container_smaller_than_containers_does_not_add() -> None:
    p = pod([container("1", "1Gi")], init=[container("500m", "512Mi")])
    assert p.requests() == {"cpu": 1000, "memory": GI, "pods": 1}


def test_sidecars_run_alongside_containers_and_later_inits() -> None:
    # sidecar (300m) starts first; then a regular init (1) runs next to it: 1300m peak during init.
    # Afterwards containers (500m) run with the sidecar: 800m. The pod needs max(1300, 800) = 1300m.
    p = pod([container("500m")], init=[container("300m", sidecar=True), container("1")])
    assert p.requests()["cpu"] == 1300


def test_sidecar_started_after_an_init_does_not_count_for_it() -> None:
    # regular init (1) runs alone; the sidecar starts after it and then runs with the containers.
    p = pod([container("500m")], init=[container("1"), container("300m", sidecar=True)])
    assert p.requests()["cpu"] == 1000
    p2 = pod([container("900m")], init=[container("1"), container("300m", sidecar=True)])
    assert p2.requests()["cpu"] == 1200


def test_overhead_is_added() -> None:
    p = pod([container("1", "1Gi")], init=[container("2")], overhead={"cpu": "250m", "memory": "120Mi"})
    assert p.requests() == {"cpu": 2250, "memory": GI + 120 * MI, "pods": 1}


def test_requests_default_to_limits_per_resource() -> None:
    p = pod([container(limits={"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": 1})])
    assert p.spec.containers[0].resources.requests == {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1"}
    assert p.requests() == {"cpu": 2000, "memory": GI, "nvidia.com/gpu": 1, "pods": 1}


def test_explicit_request_is_not_overridden_by_limit() -> None:
    p = pod([container("100m", limits={"cpu": "2", "memory": "1Gi"})])
    assert p.requests() == {"cpu": 100, "memory": GI, "pods": 1}


def test_bad_quantity_names_the_field() -> None:
    with pytest.raises(ValidationError) as info:
        pod([container("fast")])
    assert info.value.errors()[0]["loc"] == ("spec", "containers", 0, "resources", "requests", "cpu")


# --- provisionable --------------------------------------------------------------------------------------
def pending(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "metadata": {"name": "web-1", "namespace": "shop"},
        "spec": {"containers": [container("1")]},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }
    for path, value in changes.items():
        target = doc
        *parents, leaf = path.split(".")
        for part in parents:
            target = target.setdefault(part, {})
        target[leaf] = value
    return doc


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, True),
        ({"spec.nodeName": "ip-10-0-0-1"}, False),
        ({"status.nominatedNodeName": "ip-10-0-0-1"}, False),
        ({"metadata.ownerReferences": [{"kind": "DaemonSet", "name": "ds", "apiVersion": "apps/v1"}]}, False),
        ({"metadata.ownerReferences": [{"kind": "Node", "name": "n1", "apiVersion": "v1"}]}, False),
        ({"metadata.ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "apiVersion": "apps/v1"}]}, True),
        (
            {"status.conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]},
            False,
        ),
        ({"status.conditions": [{"type": "PodScheduled", "status": "True"}]}, False),
        ({"status.conditions": []}, False),
        ({"status.phase": "Failed"}, False),
        ({"metadata.deletionTimestamp": "2024-01-01T00:00:00Z"}, False),
    ],
)
def test_is_provisionable(changes: dict[str, Any], expected: bool) -> None:
    assert Pod.model_validate(pending(**changes)).is_provisionable() is expected


def test_identity_and_daemonset_ownership() -> None:
    p = Pod.model_validate(pending(**{"metadata.ownerReferences": [{"kind": "DaemonSet", "name": "ds"}]}))
    assert p.key == "shop/web-1"
    assert p.is_daemonset_pod()
    assert Pod.model_validate({"metadata": {"name": "x"}}).key == "default/x"


def test_unknown_fields_are_ignored() -> None:
    p = Pod.model_validate(
        {
            "metadata": {"name": "x", "managedFields": [{}], "selfLink": "/x"},
            "spec": {
                "containers": [{"name": "c", "livenessProbe": {"httpGet": {}}}],
                "volumes": [{"name": "v"}],
            },
            "status": {"podIP": "10.0.0.1"},
        }
    )
    assert p.name == "x"


# --- scheduling parts -----------------------------------------------------------------------------------
def test_affinity_topology_tolerations_and_host_ports() -> None:
    p = Pod.model_validate(
        {
            "metadata": {"name": "x", "labels": {"app": "web"}},
            "spec": {
                "containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}],
                "initContainers": [
                    {"name": "s", "restartPolicy": "Always", "ports": [{"hostPort": 9000, "protocol": "UDP"}]}
                ],
                "nodeSelector": {"kubernetes.io/arch": "arm64"},
                "priority": 1000,
                "priorityClassName": "high",
                "schedulerName": "default-scheduler",
                "tolerations": [{"key": "batch", "operator": "Exists", "effect": "NoSchedule"}],
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "karpenter.k8s.aws/instance-family",
                                            "operator": "In",
                                            "values": ["c7*"],
                                        }
                                    ]
                                }
                            ]
                        },
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 50,
                                "preference": {
                                    "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]
                                },
                            }
                        ],
                    },
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "labelSelector": {"matchLabels": {"app": "web"}},
                                "topologyKey": "kubernetes.io/hostname",
                            }
                        ],
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 10,
                                "podAffinityTerm": {
                                    "labelSelector": {
                                        "matchExpressions": [{"key": "app", "operator": "Exists"}]
                                    },
                                    "topologyKey": "topology.kubernetes.io/zone",
                                },
                            }
                        ],
                    },
                    "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []},
                },
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "topology.kubernetes.io/zone",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": {"app": "web"}},
                        "minDomains": 3,
                        "nodeAffinityPolicy": "Honor",
                        "nodeTaintsPolicy": "Ignore",
                    }
                ],
            },
        }
    )
    affinity = p.spec.affinity
    assert (
        affinity is not None and affinity.node_affinity is not None and affinity.pod_anti_affinity is not None
    )
    [term] = affinity.node_affinity.required
    assert term.requirements()["karpenter.k8s.aws/instance-family"].has("c7g")
    assert affinity.node_affinity.preferred[0].weight == 50
    anti = affinity.pod_anti_affinity
    assert anti.required[0].topology_key == "kubernetes.io/hostname"
    assert anti.required[0].selects(p, "default")
    assert anti.preferred[0].pod_affinity_term.label_selector is not None
    tsc = p.spec.topology_spread_constraints[0]
    assert (tsc.max_skew, tsc.min_domains, tsc.when_unsatisfiable) == (1, 3, "ScheduleAnyway")
    assert (tsc.node_affinity_policy, tsc.node_taints_policy) == ("Honor", "Ignore")
    assert p.tolerations() == [domain.Toleration(key="batch", operator="Exists", effect="NoSchedule")]
    assert p.tolerations()[0].tolerates(domain.Taint("batch", "NoSchedule", "yes"))
    assert p.host_ports() == [("0.0.0.0", "TCP", 8080), ("0.0.0.0", "UDP", 9000)]
    assert (p.spec.priority, p.spec.priority_class_name) == (1000, "high")


def test_bad_topology_spread_is_rejected() -> None:
    with pytest.raises(ValidationError):
        Pod.model_validate(
            {
                "spec": {
                    "topologySpreadConstraints": [
                        {"maxSkew": 0, "topologyKey": "z", "whenUnsatisfiable": "Maybe"}
                    ]
                }
            }
        )


def test_node_selector_requirement_to_domain() -> None:
    req = NodeSelectorRequirement(key="cpu", operator="Gte", values=["4"]).to_domain()
    assert req.has("4") and not req.has("3")
    with pytest.raises(ValidationError):
        NodeSelectorRequirement(key="cpu", operator="In")


# --- label selectors ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ({}, {"app": "web"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "web", "tier": "fe"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "db"}, False),
        (
            {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]},
            {"app": "api"},
            True,
        ),
        ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}, {}, False),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}, {}, True),
        (
            {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]},
            {"app": "web"},
            False,
        ),
        ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, {"app": ""}, True),
        ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, {"x": "y"}, False),
        ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, {"x": "y"}, True),
        ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, {"app": "y"}, False),
        (
            {
                "matchLabels": {"tier": "fe"},
                "matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}],
            },
            {"app": "web", "tier": "be"},
            False,
        ),
    ],
)
def test_label_selector_matches(selector: dict[str, Any], labels: dict[str, str], expected: bool) -> None:
    assert LabelSelector.model_validate(selector).matches(labels) is expected


@pytest.mark.parametrize(
    "expression",
    [
        {"key": "a", "operator": "In"},
        {"key": "a", "operator": "Exists", "values": ["x"]},
        {"key": "a", "operator": "Gt", "values": ["1"]},
    ],
)
def test_label_selector_validation(expression: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        LabelSelector.model_validate({"matchExpressions": [expression]})


# --- node -----------------------------------------------------------------------------------------------
def test_node() -> None:
    node = Node.model_validate(
        {
            "metadata": {"name": "ip-10-0-0-1.ec2.internal", "labels": {"karpenter.sh/nodepool": "default"}},
            "spec": {
                "providerID": "aws:///us-east-1a/i-0123456789abcdef0",
                "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}],
                "unschedulable": True,
            },
            "status": {
                "capacity": {"cpu": "2", "memory": "7910348Ki", "pods": "29"},
                "allocatable": {
                    "cpu": "1930m",
                    "memory": "7068748Ki",
                    "pods": "29",
                    "ephemeral-storage": "18242267924",
                },
                "conditions": [
                    {"type": "MemoryPressure", "status": "False"},
                    {"type": "Ready", "status": "True"},
                ],
                "nodeInfo": {
                    "architecture": "amd64",
                    "kubeletVersion": "v1.30.2-eks-1552ad0",
                    "machineID": "m",
                    "systemUUID": "u",
                },
            },
        }
    )
    assert node.instance_id() == "i-0123456789abcdef0"
    assert node.capacity() == {"cpu": 2000, "memory": 7910348 * 1024, "pods": 29}
    assert node.allocatable()["cpu"] == 1930
    assert node.is_ready()
    assert node.taints() == [domain.Taint("karpenter.sh/unregistered", "NoExecute")]
    assert node.spec.unschedulable
    assert node.status.node_info is not None and node.status.node_info.machine_id == "m"
    assert node.to_json_dict()["spec"]["providerID"] == "aws:///us-east-1a/i-0123456789abcdef0"
    assert not Node.model_validate(
        {"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}
    ).is_ready()
    assert Node().instance_id() is None


# --- daemonset ------------------------------------------------------------------------------------------
def test_daemonset_template_pod_is_per_node_overhead() -> None:
    ds = DaemonSet.model_validate(
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "aws-node", "namespace": "kube-system"},
            "spec": {
                "selector": {"matchLabels": {"k8s-app": "aws-node"}},
                "template": {
                    "metadata": {"labels": {"k8s-app": "aws-node"}},
                    "spec": {
                        "containers": [container("25m", "64Mi")],
                        "initContainers": [container("10m")],
                        "tolerations": [{"operator": "Exists"}],
                    },
                },
            },
        }
    )
    tp = ds.template_pod()
    assert tp.requests() == {"cpu": 25, "memory": 64 * MI, "pods": 1}
    assert tp.is_daemonset_pod() and not tp.is_provisionable()
    assert tp.namespace == "kube-system" and tp.labels == {"k8s-app": "aws-node"}
    assert tp.tolerations()[0].tolerates(domain.Taint("anything", "NoSchedule"))


# --- pdb ------------------------------------------------------------------------------------------------
def pdb(**spec: Any) -> PodDisruptionBudget:
    return PodDisruptionBudget.model_validate(
        {
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
        }
    )


def test_pdb_min_available_and_max_unavailable() -> None:
    assert pdb(minAvailable=2).allowed_disruptions(expected=5, healthy=5) == 3
    assert pdb(minAvailable="50%").allowed_disruptions(expected=5, healthy=5) == 2  # 2.5 rounds up to 3 kept
    assert pdb(maxUnavailable=1).allowed_disruptions(expected=5, healthy=5) == 1
    assert pdb(maxUnavailable="10%").allowed_disruptions(expected=5, healthy=5) == 1  # 0.5 rounds up
    assert pdb(maxUnavailable=1).allowed_disruptions(expected=5, healthy=3) == 0


def test_pdb_selects_pods_of_its_namespace() -> None:
    web = Pod.model_validate({"metadata": {"name": "w", "namespace": "shop", "labels": {"app": "web"}}})
    other_ns = Pod.model_validate({"metadata": {"name": "w", "namespace": "dev", "labels": {"app": "web"}}})
    assert pdb(minAvailable=1).matches(web)
    assert not pdb(minAvailable=1).matches(other_ns)
    no_selector = PodDisruptionBudget.model_validate(
        {"metadata": {"name": "x", "namespace": "shop"}, "spec": {"minAvailable": 1}}
    )
    assert not no_selector.matches(web)


@pytest.mark.parametrize(
    "spec", [{"minAvailable": 1, "maxUnavailable": 1}, {"minAvailable": "x%"}, {"maxUnavailable": -1}]
)
def test_pdb_validation(spec: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        pdb(**spec)
