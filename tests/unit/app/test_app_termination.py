"""`carpool.app.termination` and `carpool.app.uninstall` on the simulated API server (Nodes and NodeClaims
held by their finalizers as kube-apiserver holds them) with an EC2 whose instances are in a given state:
a deleted NodeClaim becomes a `Deleted` termination with its deadline; a dead node goes undrained; a Node
left behind waits for its instance, then goes; a Node lacking the finalizer gets it; the finalizer patch
itself; and `release-finalizers`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from carpool import labels as L
from carpool.amis import InMemoryAmiSource
from carpool.app import termination, uninstall
from carpool.app.disruption_summary import DisruptSummary
from carpool.app.settings import Settings
from carpool.app.sources import StaticCatalogSource, TextConfigSource
from carpool.app.wiring import Dependencies
from carpool.disruption.decision import Reason
from carpool.karpenter_objects import NODECLAIM, TERMINATION_FINALIZER
from carpool.ports import NodePatch
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.state.memory import MemoryCapacityCache, MemoryLedger, MemoryOfferings
from carpool.state.models import Claim, ClaimStatus

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
CLUSTER = "demo"
CONFIG = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
      terminationGracePeriod: 1h
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


@dataclass
class Ec2:
    """Instances and their state; TerminateInstances moves one to `shutting-down`, as EC2 does."""

    states: dict[str, str] = field(default_factory=dict)
    terminated: list[str] = field(default_factory=list)

    def describe_instances(self, filters: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        wanted = next((f["Values"] for f in filters if f["Name"] == "instance-id"), list(self.states))
        return [{"InstanceId": i, "State": {"Name": s}} for i, s in self.states.items() if i in wanted]

    def terminate_instances(self, ids: Sequence[str]) -> None:
        self.terminated.extend(ids)
        self.states.update(dict.fromkeys(ids, "shutting-down"))


@pytest.fixture
def deps() -> Dependencies:
    cluster = SimulatedCluster(lambda: NOW)
    return Dependencies(
        settings=Settings(cluster_name=CLUSTER, event_bus="bus"), cluster=cluster, compute=Ec2(),  # type: ignore[arg-type]
        ledger=MemoryLedger(), offerings=MemoryOfferings(), capacity=MemoryCapacityCache(), publisher=None,  # type: ignore[arg-type]
        ami_source=InMemoryAmiSource(), config=TextConfigSource(lambda: CONFIG),
        catalog=StaticCatalogSource("us-east-1"), clock=lambda: NOW, karpenter=cluster)


def ec2(deps: Dependencies) -> Ec2:
    assert isinstance(deps.compute, Ec2)
    return deps.compute


def sim(deps: Dependencies) -> SimulatedCluster:
    assert isinstance(deps.cluster, SimulatedCluster)
    return deps.cluster


def node(deps: Dependencies, name: str, instance: str, *, ready: bool = True, finalizer: bool = True,
         owner: str = CLUSTER) -> str:
    ec2(deps).states[instance] = "running"
    return sim(deps).add_node({
        "metadata": {"name": name, "labels": {L.OWNED_BY: owner, L.REGISTERED: "true", L.NODEPOOL: "default"},
                     "finalizers": [TERMINATION_FINALIZER] if finalizer else []},
        "spec": {"providerID": f"aws:///us-east-1a/{instance}"},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}})


def claim(deps: Dependencies, name: str, instance: str, node_name: str) -> Claim:
    made = Claim(name=name, nodepool="default", nodeclass="default", created_at=NOW - timedelta(hours=1),
                 instance_types=["m5.large"], reserved={"nodes": 1})
    deps.ledger.reserve(made, None, NOW, 600)
    deps.ledger.mark_launched(made.model_copy(update={"status": ClaimStatus.LAUNCHED, "instance_id": instance,
                                                      "instance_type": "m5.large"}))
    registered = deps.ledger.mark_registered(name, node_name, NOW, {"nodes": 1})
    assert registered is not None
    return registered


def nodeclaim(deps: Dependencies, name: str, instance: str, owner: str = CLUSTER, grace: str | None = None) -> None:
    spec: dict[str, Any] = {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                            "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}
    if grace:
        spec["terminationGracePeriod"] = grace
    sim(deps).create_object(NODECLAIM, {
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {L.OWNED_BY: owner}, "finalizers": [TERMINATION_FINALIZER]}, "spec": spec})
    sim(deps).patch_status(NODECLAIM, name, {"providerID": f"aws:///us-east-1a/{instance}"})


def begin(deps: Dependencies) -> tuple[set[str], DisruptSummary]:
    summary = DisruptSummary()
    nodes = {n.name: n for n in deps.cluster.list_nodes()}
    released = termination.begin(nodes, deps.ledger.active(), deps, NOW, summary)
    assert not summary.failures, summary.failures
    return released, summary


def test_a_deleted_nodeclaim_becomes_a_deleted_termination_with_its_own_grace_period(deps: Dependencies) -> None:
    name = node(deps, "n1", "i-1")
    claim(deps, "c1", "i-1", name)
    nodeclaim(deps, "c1", "i-1", grace="10m")
    sim(deps).delete_object(NODECLAIM, "c1")
    deleted_at = datetime.fromisoformat(sim(deps).get_object(NODECLAIM, "c1")["metadata"]["deletionTimestamp"]  # type: ignore[index]
                                        .replace("Z", "+00:00"))
    released, _summary = begin(deps)
    assert not released
    stored = deps.ledger.get("c1")
    assert stored is not None and stored.disruption is not None
    assert stored.disruption.reason == Reason.DELETED.value and not stored.disruption.replaced_by
    # the NodeClaim's 10m, not its NodePool's 1h, from the NodeClaim's deletion
    assert stored.disruption.termination_deadline == deleted_at + timedelta(minutes=10)
    held = deps.cluster.get_node(name)
    assert held is not None and held.metadata.deletion_timestamp is not None, "its Node is deleted too, and held"
    assert held.spec.unschedulable and any(t.key == L.DISRUPTED_TAINT for t in held.taints())
    annotations = sim(deps).get_object(NODECLAIM, "c1")["metadata"]["annotations"]  # type: ignore[index]
    assert annotations[termination.TERMINATION_TIMESTAMP].startswith(deleted_at.date().isoformat())
    assert not ec2(deps).terminated, "the drain comes first (the executor's)"


def test_a_deleted_node_whose_instance_is_gone_goes_undrained(deps: Dependencies) -> None:
    name = node(deps, "n1", "i-1", ready=False)
    claim(deps, "c1", "i-1", name)
    ec2(deps).states["i-1"] = "terminated"
    deps.cluster.delete_node(name)
    released, _summary = begin(deps)
    assert released == {"c1"} and deps.ledger.get("c1") is None
    assert deps.cluster.get_node(name) is None and not ec2(deps).terminated


def test_a_node_left_behind_waits_for_its_instance_then_goes(deps: Dependencies) -> None:
    name = node(deps, "n1", "i-1")
    nodeclaim(deps, "c1", "i-1")
    deps.cluster.delete_node(name)
    sim(deps).delete_object(NODECLAIM, "c1")
    begin(deps)
    assert ec2(deps).terminated == ["i-1"], "a carpool node with no claim: its instance is ended"
    begin(deps)  # shutting-down still counts as running (Karpenter's instance filter)
    assert deps.cluster.get_node(name) is not None and ec2(deps).terminated == ["i-1"]
    ec2(deps).states["i-1"] = "terminated"
    begin(deps)
    assert deps.cluster.get_node(name) is None
    begin(deps)  # the NodeClaim goes once its Node did
    assert sim(deps).get_object(NODECLAIM, "c1") is None


def test_another_clusters_node_is_let_go_but_its_instance_never_terminated(deps: Dependencies) -> None:
    name = node(deps, "n1", "i-1", owner="elsewhere")
    deps.cluster.delete_node(name)
    begin(deps)
    assert not ec2(deps).terminated and deps.cluster.get_node(name) is not None


def test_let_go_waits_for_the_instance(deps: Dependencies) -> None:
    name = node(deps, "n1", "i-1")
    deps.cluster.delete_node(name)
    ec2(deps).states["i-1"] = "shutting-down"
    assert not termination.let_go(deps, name, "i-1")
    ec2(deps).states["i-1"] = "terminated"
    assert termination.let_go(deps, name, "i-1") and deps.cluster.get_node(name) is None


def test_a_registered_node_without_the_finalizer_gets_it(deps: Dependencies) -> None:
    name = node(deps, "n1", "i-1", finalizer=False)
    claim(deps, "c1", "i-1", name)
    begin(deps)
    assert deps.cluster.get_node(name).metadata.finalizers == [TERMINATION_FINALIZER]  # type: ignore[union-attr]


def test_the_finalizer_patch_adds_removes_and_never_adds_to_a_node_being_deleted() -> None:
    add = NodePatch(add_finalizers=frozenset({TERMINATION_FINALIZER}))
    assert add.change({}, {}, [], ["other"]).finalizers == ["other", TERMINATION_FINALIZER]
    assert add.change({}, {}, [], [TERMINATION_FINALIZER]).finalizers is None
    assert add.change({}, {}, [], [], deleting=True).finalizers is None
    remove = NodePatch(remove_finalizers=frozenset({TERMINATION_FINALIZER}))
    assert remove.change({}, {}, [], ["a", TERMINATION_FINALIZER]).finalizers == ["a"]
    assert remove.change({}, {}, [], [TERMINATION_FINALIZER], deleting=True).finalizers == []
    assert not remove.change({}, {}, [], ["a"])


def test_release_finalizers_takes_carpools_off_and_leaves_others(deps: Dependencies) -> None:
    held = node(deps, "n1", "i-1")
    kept = node(deps, "k1", "i-9", owner="elsewhere")
    nodeclaim(deps, "c1", "i-1")
    deps.cluster.delete_node(held)
    dry = uninstall.release_finalizers(deps.cluster, deps.karpenter, CLUSTER, dry_run=True)
    assert [str(r) for r in dry] == [
        f"node/n1: finalizer {TERMINATION_FINALIZER} removed (being deleted: it goes now)",
        f"nodeclaim/c1: finalizer {TERMINATION_FINALIZER} removed"]
    assert deps.cluster.get_node(held) is not None, "a dry run writes nothing"
    uninstall.release_finalizers(deps.cluster, deps.karpenter, CLUSTER)
    assert deps.cluster.get_node(held) is None
    assert sim(deps).get_object(NODECLAIM, "c1")["metadata"].get("finalizers") in (None, [])  # type: ignore[index]
    assert deps.cluster.get_node(kept).metadata.finalizers == [TERMINATION_FINALIZER]  # type: ignore[union-attr]


def test_a_claim_being_terminated_while_it_joins_takes_no_pod(deps: Dependencies) -> None:
    from carpool.app.provisioning.inflight import in_flight
    from carpool.state.models import DisruptionProgress

    for name in ("joining", "deleted"):
        made = Claim(name=name, nodepool="default", nodeclass="default", created_at=NOW, instance_types=["m5.large"],
                     reserved={"nodes": 1})
        deps.ledger.reserve(made, None, NOW, 600)
        deps.ledger.mark_launched(made.model_copy(update={
            "status": ClaimStatus.LAUNCHED, "instance_id": f"i-{name}", "instance_type": "m5.large",
            "allocatable": {"cpu": 1930, "pods": 29}}))
    deleted = deps.ledger.get("deleted")
    assert deleted is not None
    deleted.disruption = DisruptionProgress(reason=Reason.DELETED.value, action="delete")
    deps.ledger.save(deleted)
    bins, _existing = in_flight(deps, set(), {})
    assert [b.name for b in bins] == ["joining"]
