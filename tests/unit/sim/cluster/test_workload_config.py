"""A scenario's NodePools and EC2NodeClasses go to the simulated cluster as `kubectl apply` sends them (no
config parameter): created with the CRD's defaults, edited by a later apply (generation 2), refused with
the CRD's words when its schema refuses them (before any is applied), and deleted by a `delete: {nodepool: NAME}` step."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import yaml

from carpool.api.loader import ManifestErrors, load
from carpool.karpenter_objects import EC2NODECLASS, NODEPOOL, ObjectInvalid
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.sim.cluster.specs import Delete
from carpool.sim.cluster.workload import WorkloadDriver

POOL = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "general"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}}}}
CLASS = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
         "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                  "subnetSelectorTerms": [{"tags": {"a": "b"}}], "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}}


def _driver() -> tuple[SimulatedCluster, WorkloadDriver]:
    cluster = SimulatedCluster(lambda: datetime(2026, 5, 1, tzinfo=UTC))
    return cluster, WorkloadDriver(cluster, load)


def _text(*docs: object) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False)


def test_applied_config_is_in_the_cluster_with_the_crds_defaults() -> None:
    cluster, driver = _driver()
    assert driver.apply([_text(POOL, CLASS)]) == 0
    (pool,) = cluster.list_objects(NODEPOOL).items
    assert pool["metadata"]["generation"] == 1
    assert pool["spec"]["disruption"]["budgets"] == [{"nodes": "10%"}]  # the CRD's default, as the server fills it
    assert [c["metadata"]["name"] for c in cluster.list_objects(EC2NODECLASS).items] == ["default"]


def test_a_later_apply_edits_the_object() -> None:
    cluster, driver = _driver()
    driver.apply([_text(POOL, CLASS)])
    driver.apply([_text({**POOL, "spec": {**POOL["spec"], "weight": 10}})])
    pool = cluster.get_object(NODEPOOL, "general")
    assert pool is not None and pool["spec"]["weight"] == 10 and pool["metadata"]["generation"] == 2


def test_what_the_crd_refuses_is_the_applys_error_and_nothing_is_applied() -> None:
    cluster, driver = _driver()
    refused = {**POOL, "spec": {**POOL["spec"], "weight": 1000}}
    with pytest.raises(ManifestErrors, match=r"spec.weight: Invalid value: 1000"):
        driver.apply([_text(refused, CLASS)])
    assert cluster.list_objects(NODEPOOL).items == [] and cluster.list_objects(EC2NODECLASS).items == []
    # the cluster's API server gives the same verdict to the same object sent to it
    with pytest.raises(ObjectInvalid, match=r"spec.weight"):
        cluster.apply_object(refused)


def test_a_delete_step_deletes_a_nodepool() -> None:
    cluster, driver = _driver()
    driver.apply([_text(POOL, CLASS)])
    assert driver.delete(Delete(nodepool="general")) == 0
    assert cluster.list_objects(NODEPOOL).items == [] and ("NodePool", "general") not in driver.config_docs
    assert [c["metadata"]["name"] for c in cluster.list_objects(EC2NODECLASS).items] == ["default"]
