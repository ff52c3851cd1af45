"""A scenario's `delete` of NodeClaims or Nodes (`kubectl delete nodeclaim|node`): what it names, what it
refuses, and which objects the workload driver picks (the oldest of the NodePool, none being deleted)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from carpool import labels as L
from carpool.api.loader import load
from carpool.karpenter_objects import TERMINATION_FINALIZER
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.sim.cluster.specs import Delete
from carpool.sim.cluster.workload import WorkloadDriver
from carpool.sim.run.scenario import parse_scenario, runnable_problems

NOW = datetime(2026, 6, 1, tzinfo=UTC)
POOL = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"}, "spec": {"template": {
    "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
             "requirements": []}}}}
CLASS = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"}, "spec": {
    "role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}], "subnetSelectorTerms": [{"tags": {"a": "b"}}],
    "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}}


def scenario(delete: dict[str, Any]) -> dict[str, Any]:
    return {"name": "d", "cluster": {"name": "d", "version": "1.32", "region": "us-east-1", "zones": ["us-east-1a"]},
            "manifests": [POOL, CLASS], "workload": [{"at": 10, "delete": delete}], "duration": 60}


def test_a_delete_names_nodeclaims_or_nodes_of_a_nodepool() -> None:
    step = parse_scenario(scenario({"nodeClaims": {"nodePool": "default", "count": 2}})).workload[0]
    assert step.delete is not None and step.delete.node_claims is not None
    assert (step.delete.node_claims.node_pool, step.delete.node_claims.count) == ("default", 2)
    assert not runnable_problems(parse_scenario(scenario({"nodes": {}})))


def test_a_delete_of_nothing_or_of_an_unknown_nodepools_nodes_is_refused() -> None:
    with pytest.raises(ValidationError, match="delete needs"):
        Delete.model_validate({})
    with pytest.raises(ValidationError):
        Delete.model_validate({"nodes": {"count": 0}})
    assert runnable_problems(parse_scenario(scenario({"nodes": {"nodePool": "gpu"}}))) == [
        "workload[0].delete.nodes.nodePool: no NodePool 'gpu' in the scenario's manifests (defined: default)"]


def test_the_oldest_nodes_of_the_pool_are_deleted_and_held_by_their_finalizer() -> None:
    cluster = SimulatedCluster(lambda: NOW)
    for name, created, pool in (("c", "3", "default"), ("a", "1", "default"), ("b", "2", "other"), ("g", "0", None)):
        cluster.add_node({"metadata": {"name": name, "labels": {L.NODEPOOL: pool} if pool else {},
                                       "finalizers": [TERMINATION_FINALIZER]}})
        cluster.nodes[name].raw["metadata"]["creationTimestamp"] = f"2026-06-01T00:00:0{created}Z"
    driver = WorkloadDriver(cluster, load)
    assert driver.delete_nodes(Delete.model_validate({"nodes": {"nodePool": "default"}})) == ["Node a"]
    assert cluster.get_node("a").metadata.deletion_timestamp is not None  # type: ignore[union-attr]
    # the next oldest not being deleted, of any pool that launched it (never a node no NodePool launched)
    assert driver.delete_nodes(Delete.model_validate({"nodes": {"count": 5}})) == ["Node b", "Node c"]
