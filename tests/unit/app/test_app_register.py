"""The registrar's lifecycle rules on a simulated cluster: registration as soon as the Node exists,
the claim once the node is Ready, initialization once Ready + startup taints gone + requested resources
reported; a claim found through the instance's tag and repaired; idempotent on repeated events."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from carpool import labels
from carpool.amis import InMemoryAmiSource
from carpool.api import events
from carpool.api.k8s import Node
from carpool.app import parsing, register
from carpool.app.settings import Settings
from carpool.app.sources import StaticCatalogSource, TextConfigSource
from carpool.app.wiring import Dependencies
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.state.memory import MemoryCapacityCache, MemoryLedger, MemoryOfferings
from carpool.state.models import CapacityRecord, Claim, ClaimStatus

NOW = datetime(2026, 5, 1, tzinfo=UTC)
LATER = NOW + timedelta(minutes=5)  # within the nominations' TTL, after the hold that follows registration
CLUSTER = "demo"
ZONE = "us-east-1a"
AMI = "ami-std"
CONFIG = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    metadata:
      labels: {team: a}
      annotations: {example.com/owner: platform}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
      taints: [{key: dedicated, value: web, effect: NoSchedule}]
      startupTaints: [{key: node.cilium.io/agent-not-ready, value: "true", effect: NoExecute}]
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: r
  amiFamily: AL2023
  amiSelectorTerms: [{id: ami-std}]
  subnetSelectorTerms: [{tags: {a: b}}]
  securityGroupSelectorTerms: [{tags: {a: b}}]
"""
UNREGISTERED = {"key": labels.UNREGISTERED_TAINT, "effect": "NoExecute"}
STARTUP = {"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoExecute"}
TEMPLATE_TAINT = {"key": "dedicated", "value": "web", "effect": "NoSchedule"}


class Ec2:
    """DescribeInstances over a few instances, honouring the `instance-id` filter as EC2 does; CreateTags
    on one of them (an unknown id fails, as EC2's InvalidInstanceID.NotFound does)."""

    def __init__(self) -> None:
        self.instances: dict[str, dict[str, Any]] = {}
        self.calls = 0
        self.tagged: list[tuple[str, dict[str, str]]] = []
        self.tagging_fails = False

    def tag_instance(self, instance_id: str, tags: dict[str, str]) -> None:
        if self.tagging_fails:
            raise RuntimeError("RequestLimitExceeded")
        self.tagged.append((instance_id, dict(tags)))

    def describe_instances(self, filters: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.calls += 1
        wanted = next((f["Values"] for f in filters if f["Name"] == "instance-id"), None)
        return [i for iid, i in self.instances.items() if wanted is None or iid in wanted]

    def launched(self, iid: str, claim: str, cluster: str = CLUSTER, spot: bool = True) -> None:
        self.instances[iid] = {
            "InstanceId": iid, "InstanceType": "m5.large", "ImageId": AMI, "Placement": {"AvailabilityZone": ZONE},
            "LaunchTime": NOW, "State": {"Name": "running"}, **({"InstanceLifecycle": "spot"} if spot else {}),
            "Tags": [{"Key": labels.TAG_MANAGED_BY, "Value": cluster}, {"Key": labels.TAG_NODECLAIM, "Value": claim},
                     {"Key": f"kubernetes.io/cluster/{cluster}", "Value": "owned"}],
        }


class CountingCapacity(MemoryCapacityCache):
    def __init__(self) -> None:
        super().__init__()
        self.observed: list[CapacityRecord] = []

    def observe(self, record: CapacityRecord, now: datetime) -> CapacityRecord:
        self.observed.append(record)
        return super().observe(record, now)


class CountingLedger(MemoryLedger):
    """The reference ledger, counting searches of all claims (the call a claim label saves)."""

    def __init__(self) -> None:
        super().__init__()
        self.searches = 0

    def find_by_instance(self, instance_id: str) -> Claim | None:
        self.searches += 1
        return super().find_by_instance(instance_id)


def deps_for(config: str = CONFIG) -> Dependencies:
    amis = InMemoryAmiSource(images=[{
        "ImageId": AMI, "Name": "amazon-eks-node-al2023-x86_64-standard-1.32-v20250101", "Architecture": "x86_64",
        "CreationDate": "2025-01-01T00:00:00.000Z", "State": "available", "OwnerId": "111122223333", "Tags": []}])
    return Dependencies(
        settings=Settings(cluster_name=CLUSTER, event_bus="bus", cluster_endpoint="https://demo.eks", cluster_ca="Q0E=", cluster_version="1.32", cluster_cidr="10.100.0.0/16", cluster_dns="10.100.0.10", cluster_ip_family="ipv4"), cluster=SimulatedCluster(lambda: NOW),
        compute=Ec2(), ledger=CountingLedger(), offerings=MemoryOfferings(), capacity=CountingCapacity(),  # type: ignore[arg-type]
        publisher=None, ami_source=amis, config=TextConfigSource(lambda: config),  # type: ignore[arg-type]
        catalog=StaticCatalogSource("us-east-1"), clock=lambda: NOW,
    )


def reserve(deps: Dependencies, name: str, iid: str | None, *, pods: tuple[str, ...] = ("default/web-1",),
            requested: dict[str, int] | None = None) -> Claim:
    claim = Claim(name=name, nodepool="default", nodeclass="default", created_at=NOW, instance_types=["m5.large"],
                  pods=list(pods), reserved={"nodes": 1}, requested=requested or {"cpu": 500, "pods": 1},
                  labels={"tier": "web", "carpool.dev/spec-hash": "abc"})
    deps.ledger.reserve(claim, None, NOW, 600)
    if iid:
        claim = claim.model_copy(update={"status": ClaimStatus.LAUNCHED, "instance_id": iid, "instance_type": "m5.large",
                                         "zone": ZONE, "capacity_type": "spot", "image_id": AMI})
        deps.ledger.mark_launched(claim)
    return claim


def join(deps: Dependencies, iid: str, *, ready: bool = False, owned: bool = True, taints: list[dict[str, str]] | None = None,
         extra_labels: dict[str, str] | None = None, gpus: int | None = None) -> str:
    """A Node as the kubelet registers it from carpool's user data (labels and taints it says), plus what the
    kubelet and cloud controller set themselves."""
    name = f"ip-{iid}"
    node_labels = {labels.HOSTNAME: name, labels.ARCH: "amd64", labels.OS: "linux", labels.INSTANCE_TYPE: "m5.large",
                   labels.ZONE: ZONE, labels.NODEPOOL: "default", labels.CAPACITY_TYPE: "spot",
                   labels.EC2NODECLASS: "default", labels.IMAGE_ID: AMI, **(extra_labels or {})}
    if owned:
        node_labels[labels.OWNED_BY] = CLUSTER
    allocatable = {"cpu": "1930m", "memory": "7000Mi", "pods": "29", "ephemeral-storage": "17Gi"}
    if gpus is not None:
        allocatable["nvidia.com/gpu"] = str(gpus)
    deps.cluster.add_node({  # type: ignore[attr-defined]
        "metadata": {"name": name, "labels": node_labels},
        "spec": {"providerID": f"aws:///{ZONE}/{iid}",
                 "taints": [TEMPLATE_TAINT, STARTUP, UNREGISTERED] if taints is None else taints},
        "status": {"capacity": {**allocatable, "memory": "7600Mi"}, "allocatable": allocatable,
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    })
    return name


def node(deps: Dependencies, name: str) -> Node:
    found = deps.cluster.get_node(name)
    assert found is not None
    return found


def become_ready(deps: Dependencies, name: str, *, lift_startup: bool = True) -> None:
    """The kubelet reports Ready; the CNI agent lifts its startup taint (never a karpenter.sh taint)."""
    def change(raw: dict[str, Any]) -> bool:
        raw["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        if lift_startup:
            raw["spec"]["taints"] = [t for t in raw["spec"]["taints"] if t["key"] != STARTUP["key"]]
        return True
    deps.cluster.update_node(name, change)  # type: ignore[attr-defined]


def taint_keys(n: Node) -> list[str]:
    return [t.key for t in n.spec.taints]


def run_event(deps: Dependencies, name: str, message_id: str = "m1") -> tuple[register.RegisterSummary, dict[str, str]]:
    entry = events.node_registered_entry(CLUSTER, node(deps, name), NOW, "bus")
    parsed = parsing.node_lifecycle(json.dumps(events.delivered_event(entry, event_id=message_id)))
    return register.run({message_id: parsed}, deps)


# -- registration ------------------------------------------------------------------------------------------
def test_a_not_ready_node_is_registered_at_once_and_its_claim_keeps_its_pods() -> None:
    deps = deps_for()
    claim = reserve(deps, "c1", "i-1")
    name = join(deps, "i-1", taints=[STARTUP, UNREGISTERED])  # the template taint is missing, too

    summary = register.RegisterSummary()
    register.reconcile(name, deps, summary)

    n = node(deps, name)
    assert summary.registered == [name]
    assert labels.UNREGISTERED_TAINT not in taint_keys(n)
    assert sorted(taint_keys(n)) == ["dedicated", STARTUP["key"]]  # template taint added, startup taint kept
    assert n.labels[labels.REGISTERED] == "true"
    assert n.labels[labels.CLAIM] == "c1" and n.labels[labels.OWNED_BY] == CLUSTER
    assert n.labels["team"] == "a" and n.labels["tier"] == "web"  # NodePool template and claim labels
    assert n.labels[labels.INSTANCE_FAMILY] == "m5" and n.labels[labels.INSTANCE_CPU] == "2"  # the type's labels
    assert "carpool.dev/spec-hash" not in n.labels  # claim bookkeeping is not a node label
    assert n.metadata.annotations["example.com/owner"] == "platform"
    assert labels.NODE_INITIALIZED not in n.labels
    # NotReady: the claim stays in flight and keeps its pod nominated (no second node for them)
    assert deps.ledger.get(claim.name).status == ClaimStatus.LAUNCHED
    assert deps.ledger.nominated(LATER) == {"default/web-1": "c1"}
    assert summary.waiting[name] == "node is not Ready"


def test_the_instance_is_named_after_its_claim_once_its_node_registers_and_only_then() -> None:
    deps = deps_for()
    reserve(deps, "c1", "i-1")
    name = join(deps, "i-1")
    summary = register.RegisterSummary()
    register.reconcile(name, deps, summary)
    assert deps.compute.tagged == [("i-1", {labels.TAG_NODECLAIM: "c1"})]  # type: ignore[attr-defined]
    assert summary.tagged == ["i-1"]
    become_ready(deps, name)
    register.reconcile(name, deps, register.RegisterSummary())  # registered already: not tagged again
    assert len(deps.compute.tagged) == 1  # type: ignore[attr-defined]


def test_a_failed_tag_does_not_hold_back_registration() -> None:
    deps = deps_for()
    reserve(deps, "c1", "i-1")
    deps.compute.tagging_fails = True  # type: ignore[attr-defined]
    name = join(deps, "i-1")
    summary, retry = run_event(deps, name)
    assert retry == {} and summary.registered == [name] and summary.tagged == []
    assert labels.UNREGISTERED_TAINT not in taint_keys(node(deps, name))


def test_labels_the_node_already_has_keep_their_value() -> None:
    deps = deps_for()
    reserve(deps, "c1", "i-1")
    name = join(deps, "i-1", extra_labels={"team": "b", labels.INSTANCE_CPU: "2"})
    register.reconcile(name, deps, register.RegisterSummary())
    assert node(deps, name).labels["team"] == "b"


def test_do_not_sync_taints_leaves_the_taints_to_the_provider_but_still_lifts_unregistered() -> None:
    deps = deps_for()
    reserve(deps, "c1", "i-1")
    name = join(deps, "i-1", taints=[UNREGISTERED], extra_labels={labels.DO_NOT_SYNC_TAINTS: "true"})
    register.reconcile(name, deps, register.RegisterSummary())
    assert taint_keys(node(deps, name)) == []


def test_the_claim_is_registered_once_the_node_is_ready_and_its_nominations_go() -> None:
    deps = deps_for()
    reserve(deps, "c1", "i-1")
    name = join(deps, "i-1")
    register.reconcile(name, deps, register.RegisterSummary())
    become_ready(deps, name, lift_startup=False)

    summary = register.RegisterSummary()
    register.reconcile(name, deps, summary)

    claim = deps.ledger.get("c1")
    assert claim.status == ClaimStatus.REGISTERED and claim.node_name == name
    assert deps.ledger.nominated(LATER) == {}  # held only while the kube-scheduler binds them
    assert summary.claimed == [name] and summary.registered == []  # registration is not written twice
    assert summary.waiting[name] == f"startup taint {STARTUP['key']}=true:NoExecute still exists"


# -- initialization -------------------------------------------------------------------------------------------
def test_initialized_once_ready_and_startup_taints_are_gone_then_capacity_is_learned_once() -> None:
    deps = deps_for()
    reserve(deps, "c1", "i-1")
    name = join(deps, "i-1")
    register.reconcile(name, deps, register.RegisterSummary())
    become_ready(deps, name)

    summary, retry = run_event(deps, name)

    n = node(deps, name)
    assert retry == {}
    assert summary.initialized == [name] and summary.learned == [name]
    assert n.labels[labels.NODE_INITIALIZED] == "true"
    assert deps.capacity.observed[0].key == ("m5.large", AMI)  # type: ignore[attr-defined]

    actions = len(deps.cluster.actions)  # type: ignore[attr-defined]
    again, _ = run_event(deps, name, "m2")  # a repeated event changes nothing
    assert again.ignored == {name: "already registered and initialized"}
    assert len(deps.capacity.observed) == 1  # type: ignore[attr-defined]
    assert len(deps.cluster.actions) == actions  # type: ignore[attr-defined]


@pytest.mark.parametrize("taint", [
    {"key": labels.NOT_READY_TAINT, "effect": "NoSchedule"},
    {"key": labels.CLOUD_PROVIDER_UNINITIALIZED_TAINT, "value": "true", "effect": "NoSchedule"},
    {"key": "readiness.k8s.io/network", "effect": "NoSchedule"},
])
def test_known_ephemeral_taints_hold_initialization(taint: dict[str, str]) -> None:
    deps = deps_for()
    reserve(deps, "c1", "i-1")
    name = join(deps, "i-1", ready=True, taints=[taint, UNREGISTERED])
    summary = register.RegisterSummary()
    register.reconcile(name, deps, summary)
    assert summary.waiting[name].startswith("known ephemeral taint ")
    assert labels.NODE_INITIALIZED not in node(deps, name).labels


def test_a_gpu_node_is_initialized_only_once_its_gpus_are_reported() -> None:
    deps = deps_for()
    reserve(deps, "c1", "i-1", requested={"cpu": 500, "pods": 1, "nvidia.com/gpu": 1})
    name = join(deps, "i-1", ready=True, taints=[UNREGISTERED], gpus=0)  # the kubelet zeroes it until the plugin registers
    summary = register.RegisterSummary()
    register.reconcile(name, deps, summary)
    assert summary.waiting[name] == "resource nvidia.com/gpu was requested but is not reported by the node yet"

    def plugin_registers(raw: dict[str, Any]) -> bool:
        raw["status"]["allocatable"]["nvidia.com/gpu"] = "1"
        return True
    deps.cluster.update_node(name, plugin_registers)  # type: ignore[attr-defined]
    summary = register.RegisterSummary()
    register.reconcile(name, deps, summary)
    assert summary.initialized == [name]


# -- finding the claim ----------------------------------------------------------------------------------------
def test_a_claim_that_never_learned_its_instance_is_found_by_the_instance_tag_and_repaired() -> None:
    deps = deps_for()
    reserve(deps, "c1", None)  # the provisioner stopped after CreateFleet, before recording the launch
    deps.compute.launched("i-7", "c1")  # type: ignore[attr-defined]
    name = join(deps, "i-7", ready=True, taints=[UNREGISTERED])

    summary = register.RegisterSummary()
    register.reconcile(name, deps, summary)

    claim = deps.ledger.get("c1")
    assert summary.repaired == ["c1"] and summary.claimed == [name]
    assert (claim.instance_id, claim.instance_type, claim.zone, claim.capacity_type, claim.image_id) == (
        "i-7", "m5.large", ZONE, "spot", AMI)
    assert claim.status == ClaimStatus.REGISTERED and deps.ledger.find_by_instance("i-7").name == "c1"
    assert node(deps, name).labels[labels.CLAIM] == "c1"


def test_a_node_without_carpools_label_is_recognised_by_its_instance() -> None:
    deps = deps_for()
    reserve(deps, "c1", "i-1")
    name = join(deps, "i-1", owned=False)
    register.reconcile(name, deps, register.RegisterSummary())
    assert node(deps, name).labels[labels.OWNED_BY] == CLUSTER
    assert labels.UNREGISTERED_TAINT not in taint_keys(node(deps, name))


@pytest.mark.parametrize("cluster", ["other", None])
def test_an_instance_carpool_did_not_launch_for_this_cluster_is_left_alone(cluster: str | None) -> None:
    deps = deps_for()
    reserve(deps, "c1", None)
    if cluster:
        deps.compute.launched("i-7", "c1", cluster=cluster)  # type: ignore[attr-defined]
    name = join(deps, "i-7", owned=False)  # e.g. Karpenter's own node: it tags karpenter.sh/nodeclaim too
    summary = register.RegisterSummary()
    register.reconcile(name, deps, summary)
    assert summary.ignored == {name: "no claim for instance i-7"}
    assert labels.UNREGISTERED_TAINT in taint_keys(node(deps, name))
    assert deps.ledger.get("c1").instance_id is None


def test_a_node_of_another_carpool_cluster_is_ignored_without_any_lookup() -> None:
    deps = deps_for()
    name = join(deps, "i-1", owned=False, extra_labels={labels.OWNED_BY: "other"})
    summary = register.RegisterSummary()
    register.reconcile(name, deps, summary)
    assert summary.ignored == {name: "node launched by carpool for cluster 'other'"}
    assert deps.compute.calls == 0  # type: ignore[attr-defined]


def test_a_matching_label_is_read_by_key_without_searching() -> None:
    deps = deps_for()
    reserve(deps, "c1", "i-1")
    name = join(deps, "i-1", extra_labels={labels.CLAIM: "c1"})
    assert register.claim_of(node(deps, name), deps).name == "c1"
    assert deps.ledger.searches == 0  # type: ignore[attr-defined]


def test_the_instance_wins_over_a_label_naming_another_instances_claim() -> None:
    deps = deps_for()
    reserve(deps, "c1", "i-1")
    reserve(deps, "c2", "i-2", pods=("default/web-2",))
    name = join(deps, "i-2", extra_labels={labels.CLAIM: "c1"})
    assert register.claim_of(node(deps, name), deps).name == "c2"
    assert deps.ledger.searches == 1  # type: ignore[attr-defined]


# -- API races ------------------------------------------------------------------------------------------------
def test_a_write_overtaken_by_another_writer_is_applied_again_from_a_fresh_read() -> None:
    deps = deps_for()
    reserve(deps, "c1", "i-1")
    name = join(deps, "i-1")
    deps.cluster.compete_for(name, writes=2)  # type: ignore[attr-defined]
    summary, retry = run_event(deps, name)
    assert retry == {} and summary.registered == [name]
    verbs = [verb for _, verb, _ in deps.cluster.actions]  # type: ignore[attr-defined]
    assert verbs == ["patch-conflict", "patch-conflict", "patch-node"]


def test_a_node_that_keeps_conflicting_is_retried_through_the_queue() -> None:
    deps = deps_for()
    reserve(deps, "c1", "i-1")
    name = join(deps, "i-1")
    deps.cluster.compete_for(name, writes=50)  # type: ignore[attr-defined]
    summary, retry = run_event(deps, name, "m9")
    assert list(retry) == ["m9"] and "conflicting" in retry["m9"]
    assert summary.registered == []


def test_an_event_for_a_node_already_gone_is_ignored() -> None:
    deps = deps_for()
    reserve(deps, "c1", "i-1")
    name = join(deps, "i-1")
    entry = events.node_registered_entry(CLUSTER, node(deps, name), NOW, "bus")
    deps.cluster.delete_node(name)
    parsed = parsing.node_lifecycle(json.dumps(events.delivered_event(entry, event_id="m1")))
    summary, retry = register.run({"m1": parsed}, deps)
    assert retry == {} and summary.ignored == {name: "node no longer exists"}



def test_one_nodes_failure_is_retried_alone_and_the_others_are_registered() -> None:
    deps = deps_for()
    reserve(deps, "c1", "i-1")
    reserve(deps, "c2", "i-2", pods=("default/web-2",))
    good, bad = join(deps, "i-1"), join(deps, "i-2")
    batch = {}
    for mid, name in (("m-good", good), ("m-bad", bad)):
        entry = events.node_registered_entry(CLUSTER, node(deps, name), NOW, "bus")
        batch[mid] = parsing.node_lifecycle(json.dumps(events.delivered_event(entry, event_id=mid)))
    read = deps.cluster.get_node

    def flaky_get(name: str) -> Node | None:
        if name == bad:
            raise ConnectionError("API server unreachable")
        return read(name)

    deps.cluster.get_node = flaky_get  # type: ignore[method-assign]
    summary, retry = register.run(batch, deps)
    assert retry == {"m-bad": "ConnectionError: API server unreachable"}
    assert summary.registered == [good]
