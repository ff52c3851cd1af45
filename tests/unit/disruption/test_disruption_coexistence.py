"""Cluster Autoscaler coexistence: node-group pods are left alone; carpool's and nobody's are explained."""

from __future__ import annotations

from typing import Any

import pytest
from disruption_factories import nodepool

from carpool import labels as L
from carpool.api.k8s import Pod
from carpool.coexistence import Coexistence, Server, serves


def pod(spec: dict[str, Any] | None = None) -> Pod:
    return Pod.model_validate({"metadata": {"name": "p", "namespace": "default"},
                               "spec": {"containers": [{"name": "c"}], **(spec or {})}})


def required(*exprs: dict[str, Any]) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": list(exprs)}]}}}}


POOLS = [nodepool()]


@pytest.mark.parametrize("spec", [
    {"nodeSelector": {L.EKS_NODEGROUP: "system"}},
    {"nodeSelector": {"alpha.eksctl.io/nodegroup-name": "ng-1"}},
    {"nodeSelector": {"eks.amazonaws.com/capacityType": "ON_DEMAND"}},
    required({"key": L.EKS_NODEGROUP, "operator": "In", "values": ["system"]}),
    required({"key": L.EKS_NODEGROUP, "operator": "Exists"}),
])
def test_pods_pinned_to_a_node_group_are_cluster_autoscalers(spec):
    v = serves(pod(spec), POOLS)
    assert v.server == Server.NODE_GROUP and v.leave_alone


def test_excluding_node_groups_makes_a_pod_carpools():
    v = serves(pod(required({"key": L.EKS_NODEGROUP, "operator": "DoesNotExist"})), POOLS)
    assert (v.server, v.leave_alone) == (Server.CARPOOL, False)
    assert "NodePool default" in v.reason


def test_a_pod_with_one_alternative_outside_node_groups_is_carpools():
    spec = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": L.EKS_NODEGROUP, "operator": "In", "values": ["system"]}]},
        {"matchExpressions": [{"key": L.ARCH, "operator": "In", "values": ["amd64"]}]},
    ]}}}}
    assert serves(pod(spec), POOLS).server == Server.CARPOOL


def test_user_listed_node_group_keys():
    pools = [nodepool(annotations={"carpool.dev/node-group-label-keys": "example.com/asg, role"})]
    assert serves(pod({"nodeSelector": {"role": "batch"}}), pools).server == Server.NODE_GROUP
    assert serves(pod({"nodeSelector": {"team": "x"}}), POOLS, extra_keys=["team"]).server == Server.NODE_GROUP


def test_nobody_with_the_reason():
    v = serves(pod({"nodeSelector": {"gpu": "a100"}}), POOLS)
    assert v.server == Server.NOBODY and not v.leave_alone and "default:" in v.reason
    tainted = [nodepool(taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])]
    assert "does not tolerate taint dedicated=gpu:NoSchedule" in serves(pod(), tainted).reason
    assert serves(pod(), []).reason == "no NodePool is configured"
    opted = serves(pod(required({"key": L.NODEPOOL, "operator": "DoesNotExist"})), POOLS)
    assert opted.server == Server.NOBODY and "opted out" in opted.reason


def test_pods_of_another_scheduler_are_left_alone():
    v = serves(pod({"schedulerName": "fargate-scheduler"}), POOLS)
    assert (v.server, v.leave_alone) == (Server.NOBODY, True)


def test_plain_pod_is_carpools_and_classifier_is_reusable():
    c = Coexistence(POOLS)
    assert c.serves(pod()).server == Server.CARPOOL
    assert c.serves(pod({"nodeSelector": {L.ZONE: "us-east-1a"}})).server == Server.CARPOOL
