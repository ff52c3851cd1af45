"""Every claim carpool launches is a `karpenter.sh/v1` NodeClaim in the simulated API server, kept in step
with the claim: after a scale-up the NodeClaims match the launched instances one to one (providerID,
instance type, nodeName, Launched/Registered/Initialized True, owned by the NodePool, held by Karpenter's
termination finalizer), the nodes are owned by their NodeClaims, and after the scale-down the removed
nodes' NodeClaims are gone. Run through the real handlers (`carpool.app.nodeclaims`)."""

from __future__ import annotations

from typing import Any

import pytest

from carpool import labels
from carpool.karpenter_objects import NODECLAIM
from carpool.sim.run.result import SimResult
from carpool.sim.run.runner import SimRunner
from carpool.sim.run.scenario import parse_scenario

SCALE_DOWN_AT = 420
POOL = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "general"}, "spec": {
    "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"},
    "template": {
        "metadata": {"labels": {"team": "web"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["c7i", "m7i"]},
                {"key": "karpenter.k8s.aws/instance-size", "operator": "In", "values": ["large"]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
            "expireAfter": "168h",
            "terminationGracePeriod": "1h"}}}}
SCENARIO: dict[str, Any] = {
    "name": "nodeclaims",
    "cluster": {"name": "claims", "version": "1.32", "region": "us-east-1", "zones": ["us-east-1a", "us-east-1b"]},
    "amis": [{"parameter": "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id",
              "name": "amazon-eks-node-al2023-x86_64-standard-1.32-v20250115", "architecture": "x86_64",
              "creationDate": "2025-01-15T00:00:00Z"}],
    "truth": {"memoryOverheadPercent": {"al2023": 6.5}, "bootSeconds": 40, "registrationSeconds": 15},
    "manifests": [
        POOL,
        {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"}, "spec": {
            "role": "carpool-node", "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "claims"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "claims"}}]}},
    ],
    "workload": [
        {"at": 0, "apply": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
                            "spec": {"replicas": 6, "selector": {"matchLabels": {"app": "web"}},
                                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                                         {"name": "web", "image": "nginx",
                                          "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}}]}}}}},
        {"at": SCALE_DOWN_AT, "scale": {"deployment": "web", "replicas": 1}},
    ],
    "duration": 900,
    "tickSeconds": 10,
}


class Run:
    """The scenario run twice over the same script: stopped after the scale-up, and to its end."""

    def __init__(self, duration: int) -> None:
        self.runner = SimRunner(parse_scenario({**SCENARIO, "duration": duration}))
        # the NodePool served by the API server too (`kubectl apply`), so NodeClaims are its dependents
        self.pool = self.runner.cluster.apply_object(POOL)
        self.result: SimResult = self.runner.run()

    def nodeclaims(self) -> dict[str, dict[str, Any]]:
        return {o["metadata"]["name"]: o for o in self.runner.cluster.list_objects(NODECLAIM).items}

    def nodes(self) -> dict[str, dict[str, Any]]:
        return {n.name: n.model_dump(by_alias=True, mode="json") for n in self.runner.cluster.list_nodes()}


@pytest.fixture(scope="module")
def scaled_up() -> Run:
    return Run(SCALE_DOWN_AT - 10)


@pytest.fixture(scope="module")
def scaled_down() -> Run:
    return Run(SCENARIO["duration"])


def conditions(obj: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in obj["status"]["conditions"]}


def test_after_the_scale_up_the_nodeclaims_are_the_launched_instances_one_to_one(scaled_up: Run) -> None:
    running = [i for i in scaled_up.result.instances if i.running]
    assert len(running) >= 2
    claims = scaled_up.nodeclaims()
    by_instance = {o["status"]["providerID"].rsplit("/", 1)[-1]: o for o in claims.values()}
    assert set(by_instance) == {i.instance_id for i in running}
    for instance in running:
        obj = by_instance[instance.instance_id]
        assert obj["status"]["providerID"] == f"aws:///{instance.zone}/{instance.instance_id}"
        assert obj["metadata"]["labels"][labels.INSTANCE_TYPE] == instance.instance_type
        assert obj["metadata"]["labels"][labels.NODEPOOL] == "general"
        assert obj["status"]["nodeName"] == instance.node_name
        assert {k: v for k, v in conditions(obj).items() if k in ("Launched", "Registered", "Initialized", "Ready")} \
            == dict.fromkeys(("Launched", "Registered", "Initialized", "Ready"), "True")
        assert obj["status"]["imageID"].startswith("ami-")
        assert obj["status"]["capacity"]["cpu"] == "2" and obj["status"]["allocatable"]["pods"]


def test_each_nodeclaim_carries_karpenters_spec_owner_and_finalizer(scaled_up: Run) -> None:
    for obj in scaled_up.nodeclaims().values():
        meta, spec = obj["metadata"], obj["spec"]
        assert meta["finalizers"] == ["karpenter.sh/termination"]
        assert meta["ownerReferences"] == [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "general",
                                            "uid": scaled_up.pool["metadata"]["uid"], "blockOwnerDeletion": True}]
        assert meta["labels"][labels.OWNED_BY] == "claims"
        assert spec["expireAfter"] == "168h" and spec["terminationGracePeriod"] == "1h"
        assert spec["nodeClassRef"]["name"] == "default"
        keys = {r["key"] for r in spec["requirements"]}
        assert {labels.INSTANCE_TYPE, labels.NODEPOOL, labels.EC2NODECLASS, "team"} <= keys
        assert spec["resources"]["requests"]["cpu"].endswith("m") or spec["resources"]["requests"]["cpu"].isdigit()


def test_every_node_is_owned_by_its_nodeclaim_and_labelled_for_node_selectors(scaled_up: Run) -> None:
    claims = scaled_up.nodeclaims()
    by_node = {o["status"]["nodeName"]: o for o in claims.values()}
    for name, node in scaled_up.nodes().items():
        owners = node["metadata"].get("ownerReferences") or []
        (owner,) = [o for o in owners if o["kind"] == "NodeClaim"]
        assert owner["uid"] == by_node[name]["metadata"]["uid"] and owner["blockOwnerDeletion"] is True
        assert node["metadata"]["labels"][labels.NODEPOOL] == "general"  # eks-node-viewer --node-selector


def test_after_the_scale_down_the_removed_nodes_nodeclaims_are_gone(scaled_down: Run) -> None:
    removed = {i.instance_id for i in scaled_down.result.launches
               if i.terminated_at is not None and i.terminated_at > SCALE_DOWN_AT}
    assert removed, "consolidation removed no node after the scale-down"
    running = {i.instance_id for i in scaled_down.result.instances if i.running}
    remaining = {o["status"]["providerID"].rsplit("/", 1)[-1] for o in scaled_down.nodeclaims().values()}
    assert remaining == running
    assert not remaining & removed
