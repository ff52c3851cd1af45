"""A node still coming up (of a NodePool, not yet initialized) whose kubelet reports an extended resource as
zero, or not yet at all, offers what its claim launched (the pool's figure for its instance type), as
Karpenter's `StateNode.Allocatable`; once initialized, the kubelet's report is final."""

from __future__ import annotations

from typing import Any

from carpool.api.loader import load
from carpool.app.offline_planning import assemble, plan
from carpool.scheduling.scheduler import ScheduleOptions

NODECLASS = {
    "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
    "spec": {"role": "R", "amiSelectorTerms": [{"alias": "al2023@latest"}],
             "subnetSelectorTerms": [{"tags": {"k": "v"}}], "securityGroupSelectorTerms": [{"tags": {"k": "v"}}]},
}
POOL = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "gpu"},
        "spec": {"template": {"spec": {"requirements": [], "nodeClassRef": {
            "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}}
TYPES = [{"name": "g5.xlarge", "cpu": 4, "memoryMiB": 16384, "pods": 58, "resources": {"nvidia.com/gpu": "1"},
          "offerings": [{"zone": "us-east-1a", "capacityType": "on-demand", "price": 1.006}]}]
GPU_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train", "namespace": "ml"},
           "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "1"}}}]}}


def gpu_node(initialized: bool, instance_type: str = "g5.xlarge") -> dict[str, Any]:
    labels = {"karpenter.sh/nodepool": "gpu", "node.kubernetes.io/instance-type": instance_type,
              "topology.kubernetes.io/zone": "us-east-1a", "karpenter.sh/capacity-type": "on-demand",
              "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "karpenter.sh/registered": "true"}
    if initialized:
        labels["karpenter.sh/initialized"] = "true"
    alloc = {"cpu": "3920m", "memory": "15Gi", "pods": "58", "nvidia.com/gpu": "0"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ip-10-0-0-1", "labels": labels},
            "status": {"capacity": alloc, "allocatable": alloc}}


def target(node: dict[str, Any]) -> str:
    result = plan(assemble(load([NODECLASS, POOL, node, GPU_POD]), synthetic=TYPES),
                  ScheduleOptions(max_instance_types=None))
    placement = result.placements["ml/train"]
    return placement.target if placement.kind != "claim" else "new claim"


def test_an_uninitialized_node_offers_the_gpu_its_claim_launched() -> None:
    assert target(gpu_node(initialized=False)) == "ip-10-0-0-1"


def test_an_initialized_node_offers_what_its_kubelet_reports() -> None:
    assert target(gpu_node(initialized=True)) == "new claim"


def test_a_node_of_a_type_its_pool_does_not_offer_has_no_claim_figure() -> None:
    assert target(gpu_node(initialized=False, instance_type="g6.xlarge")) == "new claim"
