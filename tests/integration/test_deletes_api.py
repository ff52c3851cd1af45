"""`kubectl delete nodeclaim` against the real kube-apiserver with Karpenter's CRDs (skipped without
`KUBE_ENDPOINT`): one disruption run of carpool's executor, through its lightkube adapters, cordons and
taints the NodeClaim's Node, deletes the Node (held by its finalizer), drains it, terminates the instance,
releases the claim, and then both objects go. EC2 and the state table are in memory.

The server is shared by other work: the run sees only this test's Node and NodeClaim (a label selects
them), so nothing of anyone else's is let go."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from real_api import RealApi, ensure_karpenter_crds, real_api, unique

from carpool import labels as L
from carpool.amis import InMemoryAmiSource
from carpool.api.k8s import Node
from carpool.app import disruption_executor
from carpool.app.disruption_summary import DisruptSummary
from carpool.app.settings import Settings
from carpool.app.sources import StaticCatalogSource, TextConfigSource
from carpool.app.wiring import Dependencies
from carpool.karpenter_objects import (
    NODECLAIM,
    TERMINATION_FINALIZER,
    KarpenterObjects,
    ObjectKind,
    ObjectList,
)
from carpool.ports import Cluster
from carpool.state.memory import MemoryCapacityCache, MemoryLedger, MemoryOfferings
from carpool.state.models import Claim, ClaimStatus

NODES = "/api/v1/nodes"
INSTANCE = "i-0de1e7e5de1e7e5de"
CONFIG = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: r
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {a: b}}]
  securityGroupSelectorTerms: [{tags: {a: b}}]
"""


class Ec2:
    """One running instance; TerminateInstances ends it (EC2 answers `terminated` from then on)."""

    def __init__(self) -> None:
        self.states = {INSTANCE: "running"}
        self.terminated: list[str] = []

    def describe_instances(self, filters: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        wanted = next((f["Values"] for f in filters if f["Name"] == "instance-id"), list(self.states))
        return [{"InstanceId": i, "State": {"Name": s}} for i, s in self.states.items() if i in wanted]

    def terminate_instances(self, ids: Sequence[str]) -> None:
        self.terminated.extend(ids)
        self.states.update(dict.fromkeys(ids, "terminated"))


@dataclasses.dataclass
class Mine:
    """The real cluster as this test's run sees it: only the nodes and NodeClaims labelled as its own."""

    cluster: Cluster
    objects: KarpenterObjects
    owner: str

    def list_nodes(self) -> list[Node]:
        return [n for n in self.cluster.list_nodes() if n.labels.get(L.OWNED_BY) == self.owner]

    def list_objects(self, kind: ObjectKind) -> ObjectList:
        listed = self.objects.list_objects(kind)
        return ObjectList([o for o in listed.items
                           if ((o.get("metadata") or {}).get("labels") or {}).get(L.OWNED_BY) == self.owner],
                          listed.resource_version)

    def __getattr__(self, name: str) -> Any:
        for inner in (self.cluster, self.objects):
            if hasattr(inner, name):
                return getattr(inner, name)
        raise AttributeError(name)


@pytest.fixture
def api() -> Iterator[RealApi]:
    with real_api() as real:
        ensure_karpenter_crds(real)
        yield real


def test_a_deleted_nodeclaims_node_is_drained_terminated_and_both_go(api: RealApi) -> None:
    owner = unique("deletes")
    node_name, claim_name = unique("deletes-node"), unique("deletes-nc")
    node = {"metadata": {"name": node_name, "finalizers": [TERMINATION_FINALIZER],
                         "labels": {L.OWNED_BY: owner, L.REGISTERED: "true", L.CLAIM: claim_name, L.NODEPOOL: "default"}},
            "spec": {"providerID": f"aws:///us-east-1a/{INSTANCE}"}}
    nodeclaim = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                 "metadata": {"name": claim_name, "labels": {L.OWNED_BY: owner}, "finalizers": [TERMINATION_FINALIZER]},
                 "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                          "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}}
    paths = [f"{NODES}/{node_name}", f"{NODECLAIM.path}/{claim_name}"]
    try:
        assert api.request("POST", NODES, node).status_code == 201
        ready = {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}
        assert api.request("PATCH", f"{NODES}/{node_name}/status", ready,
                           headers={"Content-Type": "application/merge-patch+json"}).status_code == 200
        assert api.request("POST", NODECLAIM.path, nodeclaim).status_code == 201
        now = datetime.now(UTC)
        ledger = MemoryLedger()
        claim = Claim(name=claim_name, nodepool="default", nodeclass="default", created_at=now - timedelta(hours=1),
                      instance_types=["m5.large"], reserved={"nodes": 1})
        ledger.reserve(claim, None, now, 600)
        ledger.mark_launched(claim.model_copy(update={"status": ClaimStatus.LAUNCHED, "instance_id": INSTANCE,
                                                      "instance_type": "m5.large"}))
        ledger.mark_registered(claim_name, node_name, now, {"nodes": 1})
        mine = Mine(api.cluster(), api.karpenter_objects(), owner)
        ec2 = Ec2()
        deps = Dependencies(
            settings=Settings(cluster_name=owner, event_bus="bus"), cluster=mine, compute=ec2,  # type: ignore[arg-type]
            ledger=ledger, offerings=MemoryOfferings(), capacity=MemoryCapacityCache(), publisher=None,  # type: ignore[arg-type]
            ami_source=InMemoryAmiSource(), config=TextConfigSource(lambda: CONFIG),
            catalog=StaticCatalogSource("us-east-1"), clock=lambda: datetime.now(UTC), karpenter=mine)  # type: ignore[arg-type]

        assert api.request("DELETE", paths[1]).status_code == 200  # kubectl delete nodeclaim
        held = api.request("GET", paths[1]).json()
        assert held["metadata"]["deletionTimestamp"], "the finalizer holds the deleted NodeClaim"

        summary = DisruptSummary()
        disruption_executor.run(deps, datetime.now(UTC), summary)

        assert not summary.failures, summary.failures
        assert ec2.terminated == [INSTANCE] and ledger.get(claim_name) is None
        assert api.request("GET", paths[0]).status_code == 404, "the Node went once its instance had"
        assert api.request("GET", paths[1]).status_code == 404, "and so did the NodeClaim"
        assert any(f"NodeClaim {claim_name} was deleted" in d for d in summary.decisions)
        assert any(f"node {node_name} drained (Deleted)" in d for d in summary.decisions)
    finally:
        for path in paths:
            api.request("PATCH", path, {"metadata": {"finalizers": None}},
                        headers={"Content-Type": "application/merge-patch+json"})
            api.request("DELETE", path)
