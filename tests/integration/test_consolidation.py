"""The disruption executor end to end, minute by minute, against the in-memory state and fakes of the
outside world (a small Kubernetes API with PDB-enforcing evictions and a first-fit kube-scheduler, and an
EC2 that launches what CreateFleet asks for). Everything of carpool's is the real code: the disruption
Lambda's use case (`carpool.app.disrupt.run`), the provisioner's `provision_pods`, pools, AMIs, catalog.

Scenarios: a deployment scaled from 100 to 10 replicas; an AMI alias version bump; a managed node group
with Cluster Autoscaler's pods next to carpool's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from carpool_env import Clock, manifests, nodeclass, nodepool

from carpool import labels as L
from carpool import observability
from carpool.amis import InMemoryAmiSource, alias_paths, parse_alias
from carpool.api.k8s import DaemonSet, Node, Pod, PodDisruptionBudget
from carpool.api.taints import Taint as ApiTaint
from carpool.app import disrupt
from carpool.app.disruption_summary import DisruptSummary
from carpool.app.provisioning import provision
from carpool.app.settings import Settings
from carpool.app.sources import StaticCatalogSource, TextConfigSource
from carpool.app.wiring import Dependencies
from carpool.disruption import podview
from carpool.disruption.podview import PodView
from carpool.ports import (
    EvictionBlocked,
    NodePatch,
    PodViewChanges,
    ResourceVersionExpired,
    TerminationRefused,
    WatchEvent,
)
from carpool.state.memory import MemoryCapacityCache, MemoryLedger, MemoryOfferings
from carpool.state.models import ClaimStatus, UnavailableOffering
from carpool.taints import Taint

CLUSTER = "test"
ZONE = "us-east-1a"
T0 = datetime(2025, 6, 2, 8, 0, tzinfo=UTC)
VERSION = "1.32"
AMIS = {"v20250101": "ami-0aaaaaaaaaaaaaaa1", "v20250201": "ami-0bbbbbbbbbbbbbbb2"}


def config(alias: str = "al2023@v20250101", consolidate_after: str = "2m",
           sizes: tuple[str, ...] = ("large", "xlarge"), limits: dict[str, Any] | None = None) -> str:
    return manifests(
        nodepool(requirements={"karpenter.k8s.aws/instance-family": ["m5"], "karpenter.k8s.aws/instance-size": sizes},
                 disruption={"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": consolidate_after},
                 limits=limits),
        nodeclass(cluster=CLUSTER, role="carpool-node", alias=alias),
    )


def ami_source() -> InMemoryAmiSource:
    """Both AL2023 releases are published; which one a node class gets depends on its alias version."""
    params, images = {}, []
    for version, image_id in AMIS.items():
        for ap in alias_paths(parse_alias(f"al2023@{version}"), VERSION):
            if ap.arch == "amd64" and ap.variants[0] == "standard":
                params[ap.path] = image_id
        images.append({"ImageId": image_id, "Name": f"amazon-eks-node-al2023-x86_64-standard-{VERSION}-{version}",
                       "Architecture": "x86_64", "CreationDate": "2025-01-01T00:00:00.000Z", "State": "available",
                       "OwnerId": "137112412989", "ImageOwnerAlias": "amazon"})
    return InMemoryAmiSource(images=images, parameters=params)


# -- fakes of the outside world ----------------------------------------------------------------------------
@dataclass
class FakeCompute:
    """EC2: CreateFleet launches the first (cheapest) override; instances keep their tags."""

    clock: Clock
    instances: dict[str, dict[str, Any]] = field(default_factory=dict)
    terminated: list[str] = field(default_factory=list)
    #: no capacity anywhere: every override fails with InsufficientInstanceCapacity
    exhausted: bool = False
    #: instances with termination protection: TerminateInstances refuses them (OperationNotPermitted)
    protected: set[str] = field(default_factory=set)

    def create_fleet(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.exhausted:
            return {"Instances": [], "Errors": [
                {"ErrorCode": "InsufficientInstanceCapacity", "ErrorMessage": "none left",
                 "LaunchTemplateAndOverrides": {"Overrides": o}}
                for c in request["LaunchTemplateConfigs"] for o in c["Overrides"]]}
        override = request["LaunchTemplateConfigs"][0]["Overrides"][0]
        count = int((request.get("TargetCapacitySpecification") or {}).get("TotalTargetCapacity", 1))
        tags = {t["Key"]: t["Value"] for t in request["TagSpecifications"][0]["Tags"]}
        ids = []
        for _ in range(count):  # an instant fleet launches its whole target capacity
            iid = f"i-{len(self.instances) + 1:05d}"
            self.instances[iid] = {"InstanceId": iid, "InstanceType": override["InstanceType"], "Tags": dict(tags),
                                   "Placement": {"AvailabilityZone": override["AvailabilityZone"]},
                                   "State": {"Name": "running"}, "LaunchTime": self.clock.now}
            ids.append(iid)
        return {"Instances": [{"InstanceIds": ids, "InstanceType": override["InstanceType"],
                               "LaunchTemplateAndOverrides": {"Overrides": override}}], "Errors": []}

    def tag_instance(self, instance_id: str, tags: dict[str, str]) -> None:
        self.instances[instance_id]["Tags"].update(tags)

    def terminate_instances(self, instance_ids: Any) -> None:
        refused = [iid for iid in instance_ids if iid in self.protected]
        if refused:  # EC2 refuses the whole call
            raise TerminationRefused(refused, "OperationNotPermitted", f"The instance '{refused[0]}' may not be "
                                     "terminated. Modify its 'disableApiTermination' instance attribute and try again.")
        for iid in instance_ids:
            if iid in self.instances and self.instances[iid]["State"]["Name"] != "terminated":
                self.instances[iid]["State"] = {"Name": "terminated"}
                self.terminated.append(iid)

    def describe_instances(self, filters: Any) -> list[dict[str, Any]]:
        want = {f["Name"]: f["Values"] for f in filters}
        out = []
        for inst in self.instances.values():
            if "instance-state-name" in want and inst["State"]["Name"] not in want["instance-state-name"]:
                continue
            if all(inst["Tags"].get(k[4:]) in v for k, v in want.items() if k.startswith("tag:")):
                out.append({**inst, "Tags": [{"Key": k, "Value": v} for k, v in inst["Tags"].items()]})
        return out

    def ensure_launch_template(self, request: Any) -> str:
        return request["LaunchTemplateName"]

    def list_launch_templates(self, cluster: str) -> list[dict[str, Any]]:
        return []

    def delete_launch_template(self, name: str) -> None:
        return None

    def describe_subnets(self, filters: Any) -> list[dict[str, Any]]:
        return [{"SubnetId": "subnet-a", "AvailabilityZone": ZONE, "AvailableIpAddressCount": 4000, "State": "available"}]

    def describe_security_groups(self, filters: Any) -> list[dict[str, Any]]:
        return [{"GroupId": "sg-1"}]


@dataclass
class FakeCluster:
    """The Kubernetes API: evictions honour PDBs, controllers recreate evicted pods (pending), deleting a
    Node deletes its pods (recreated pending too). `on_evict` lets a test check an invariant at the moment
    of each eviction; `low_water` records the fewest healthy pods each PDB ever had."""

    nodes: dict[str, Node] = field(default_factory=dict)
    pods: dict[str, Pod] = field(default_factory=dict)
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    daemonsets: list[DaemonSet] = field(default_factory=list)
    on_evict: Callable[[Pod], None] | None = None
    #: called with the node's name before a cordon is written (a pod the kube-scheduler binds meanwhile)
    on_cordon: Callable[[str], None] | None = None
    evicted_from: list[str] = field(default_factory=list)
    low_water: dict[str, int] = field(default_factory=dict)
    #: (pod key, grace period) of every pod DELETE (the drain deadline's)
    deleted: list[tuple[str, int]] = field(default_factory=list)
    _seq: int = 0

    # -- the Cluster port -----------------------------------------------------------------------------
    def list_pods(self) -> list[Pod]:
        return [p.model_copy(deep=True) for p in self.pods.values()]

    def active_pods(self) -> list[Pod]:
        return [p for p in self.list_pods() if not p.is_terminal()]

    def pods_on_node(self, node_name: str) -> list[Pod]:
        return [p for p in self.list_pods() if p.spec.node_name == node_name]

    def pod_views(self, node_name: str | None = None) -> list[PodView]:
        return [podview.from_pod(p) for p in self.active_pods()
                if node_name is None or (p.spec.node_name or "") == node_name]

    def pod_views_versioned(self) -> tuple[list[PodView], str]:
        return self.pod_views(), str(self._seq)

    def pod_view_changes(self, since: str) -> PodViewChanges:
        """This API server keeps no watch history (the harshest one): every catch-up is a 410, and the
        disruption pass lists every pod again, each run."""
        raise ResourceVersionExpired("Pod", since)

    def list_nodes(self) -> list[Node]:
        return [n.model_copy(deep=True) for n in self.nodes.values()]

    def list_daemonsets(self) -> list[DaemonSet]:
        return list(self.daemonsets)

    def get_lease(self, namespace: str, name: str) -> None:
        """No Karpenter controller in this cluster: its Lease does not exist."""
        return None

    def list_pdbs(self) -> list[PodDisruptionBudget]:
        return list(self.pdbs)

    def cni_env(self) -> dict[str, str]:
        return {}

    def cordon(self, node_name: str) -> None:
        if self.on_cordon is not None:
            self.on_cordon(node_name)
        self.nodes[node_name].spec.unschedulable = True

    def uncordon(self, node_name: str) -> None:
        self.nodes[node_name].spec.unschedulable = False

    def patch_node(self, name: str, patch: NodePatch, *, attempts: int = 5) -> Node:
        """Only what the disruption executor patches: taints removed by key."""
        node = self.nodes[name]
        node.spec.taints = [t for t in node.spec.taints if t.key not in patch.remove_taint_keys]
        return node.model_copy(deep=True)

    def taint(self, node_name: str, taint: Taint) -> None:
        node = self.nodes[node_name]
        if not any(t.key == taint.key for t in node.spec.taints):
            node.spec.taints.append(ApiTaint(key=taint.key, value=taint.value or None, effect=taint.effect))

    def evict(self, pod_key: str) -> None:
        pod = self.pods[pod_key]
        for pdb in self.pdbs:
            if pdb.matches(pod) and self._allowed(pdb) <= 0:
                raise EvictionBlocked(f"{pdb.name}: no disruption allowed")
        if self.on_evict:
            self.on_evict(pod)
        self.evicted_from.append(pod.spec.node_name or "")
        self._recreate(pod)

    def delete_pod(self, pod_key: str, grace_period_seconds: int) -> None:
        """A pod DELETE: no budget is asked; its controller makes a new (pending) pod."""
        pod = self.pods.get(pod_key)
        if pod is None:
            return
        self.deleted.append((pod_key, grace_period_seconds))
        self._recreate(pod)

    def delete_node(self, node_name: str) -> None:
        self.nodes.pop(node_name, None)
        for pod in [p for p in self.pods.values() if p.spec.node_name == node_name]:
            if pod.is_daemonset_pod():
                del self.pods[pod.key]
            else:
                self._recreate(pod)

    def watch(self, resource_versions: Any, timeout_seconds: float, idle_seconds: float | None = None) -> Any:
        return iter(list[WatchEvent]())

    # -- the world around it --------------------------------------------------------------------------
    def add_pod(self, pod: Pod) -> None:
        self.pods[pod.key] = pod

    def _recreate(self, pod: Pod) -> None:
        """The pod's controller replaces it: a new pending pod with the same template."""
        del self.pods[pod.key]
        self._seq += 1
        fresh = pod.model_copy(deep=True)
        fresh.metadata.name = f"{pod.name.rsplit('-', 1)[0]}-r{self._seq}"
        fresh.spec.node_name = None
        fresh.status = type(pod.status)(phase="Pending")
        self.pods[fresh.key] = fresh
        self._record_low_water()

    def _allowed(self, pdb: PodDisruptionBudget) -> int:
        selected = [p for p in self.pods.values() if pdb.matches(p)]
        return pdb.allowed_disruptions(len(selected), sum(1 for p in selected if self.healthy(p)))

    def healthy(self, pod: Pod) -> bool:
        node = self.nodes.get(pod.spec.node_name or "")
        return node is not None and node.is_ready() and pod.status.phase == "Running"

    def _record_low_water(self) -> None:
        for pdb in self.pdbs:
            n = sum(1 for p in self.pods.values() if pdb.matches(p) and self.healthy(p))
            self.low_water[pdb.name] = min(self.low_water.get(pdb.name, n), n)

    def schedule(self) -> None:
        """A first-fit kube-scheduler: taints, cordons, nodeSelector and requests."""
        for pod in sorted(self.pods.values(), key=lambda p: p.key):
            if pod.spec.node_name or pod.is_daemonset_pod():
                continue
            node = next((n for n in sorted(self.nodes.values(), key=lambda n: n.name) if self._fits(pod, n)), None)
            if node is None:
                pod.status = type(pod.status).model_validate({"phase": "Pending", "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]})
                continue
            pod.spec.node_name = node.name
            pod.status = type(pod.status)(phase="Running")
        self._record_low_water()

    def _fits(self, pod: Pod, node: Node) -> bool:
        if not node.is_ready() or node.spec.unschedulable:
            return False
        tolerations = pod.tolerations()
        if any(t.effect != "PreferNoSchedule" and not any(tol.tolerates(t) for tol in tolerations) for t in node.taints()):
            return False
        if any(node.labels.get(k) != v for k, v in pod.spec.node_selector.items()):
            return False
        used: dict[str, int] = {}
        for p in self.pods.values():
            if p.spec.node_name == node.name:
                for k, v in p.requests().items():
                    used[k] = used.get(k, 0) + v
        free = node.allocatable()
        return all(v <= free.get(k, 0) - used.get(k, 0) for k, v in pod.requests().items())


# -- the harness ---------------------------------------------------------------------------------------------
@dataclass
class Harness:
    text: dict[str, str]
    clock: Clock
    cluster: FakeCluster
    compute: FakeCompute
    ledger: MemoryLedger
    deps: Dependencies
    budget_violations: list[str] = field(default_factory=list)
    summaries: list[DisruptSummary] = field(default_factory=list)
    #: instances whose kubelet never comes up (a broken launch)
    stuck: set[str] = field(default_factory=set)

    @classmethod
    def build(cls, text: str, registration_timeout: int = 600) -> Harness:
        holder = {"text": text}
        clock = Clock(T0)
        cluster, compute, ledger = FakeCluster(), FakeCompute(clock), MemoryLedger()
        deps = Dependencies(
            settings=Settings(cluster_name=CLUSTER, cluster_version=VERSION, registration_timeout_seconds=registration_timeout,
                              instance_profile="carpool-node", node_role="arn:aws:iam::123456789012:role/carpool-node",
                              cluster_endpoint="https://test.eks", cluster_ca="Q0E=",
                              cluster_cidr="10.100.0.0/16", cluster_dns="10.100.0.10", cluster_ip_family="ipv4"),
            cluster=cluster, compute=compute, ledger=ledger, offerings=MemoryOfferings(),
            capacity=MemoryCapacityCache(), publisher=None, ami_source=ami_source(),  # type: ignore[arg-type]
            config=TextConfigSource(lambda: holder["text"]), catalog=StaticCatalogSource("us-east-1"), clock=clock,
        )
        return cls(holder, clock, cluster, compute, ledger, deps)

    # the rest of the system, as it behaves between two disruption runs
    def kubelets(self) -> None:
        """Instances become Ready nodes; the registrar registers and initializes them and marks their claims
        registered."""
        known = {n.spec.provider_id for n in self.cluster.nodes.values()}
        for iid, inst in sorted(self.compute.instances.items()):
            pid = f"aws:///{ZONE}/{iid}"
            claim = self.ledger.find_by_instance(iid)
            if inst["State"]["Name"] != "running" or pid in known or claim is None or iid in self.stuck:
                continue
            name = f"node-{iid}"
            alloc = claim.allocatable
            lab = {**claim.labels, L.NODEPOOL: claim.nodepool,
                   L.INSTANCE_TYPE: inst["InstanceType"], L.ZONE: ZONE, L.CAPACITY_TYPE: claim.capacity_type or "",
                   L.OWNED_BY: CLUSTER, L.CLAIM: claim.name, L.IMAGE_ID: claim.image_id or "", L.ARCH: "amd64",
                   L.OS: "linux", L.HOSTNAME: name, L.REGISTERED: "true", L.NODE_INITIALIZED: "true"}
            self.cluster.nodes[name] = Node.model_validate({
                "metadata": {"name": name, "labels": lab},
                "spec": {"providerID": pid},
                "status": {"allocatable": {"cpu": f"{alloc['cpu']}m", "memory": str(alloc["memory"]), "pods": str(alloc["pods"])},
                           "conditions": [{"type": "Ready", "status": "True"}]},
            })
            self.ledger.mark_registered(claim.name, name, self.clock.now)

    def provisioner(self) -> provision.ProvisionOutcome:
        pending = [p for p in self.cluster.list_pods() if p.is_provisionable()]
        return provision.provision_pods(pending, self.deps, reason="provisioning")

    def settle(self, minutes: int = 3) -> None:
        for _ in range(minutes):
            self.clock.now += timedelta(minutes=1)
            self.kubelets()
            self.cluster.schedule()
            self.provisioner()

    def minute(self) -> DisruptSummary:
        self.clock.now += timedelta(minutes=1)
        self.kubelets()
        self.cluster.schedule()
        self.provisioner()
        summary = disrupt.run(self.deps)
        self.summaries.append(summary)
        self._check_budget()
        return summary

    def _check_budget(self) -> None:
        """Default budget (10%, rounded up): nodes being disrupted never exceed it."""
        owned = [n for n in self.cluster.nodes.values() if n.labels.get(L.OWNED_BY) == CLUSTER]
        going = [n for n in owned if any(t.key == L.DISRUPTED_TAINT for t in n.taints())]
        if len(going) > math.ceil(0.1 * len(owned)):
            self.budget_violations.append(f"{self.clock.now}: {len(going)} of {len(owned)} nodes disrupting")

    def run_until_quiet(self, limit: int = 90, quiet: int = 6) -> int:
        calm = 0
        for i in range(limit):
            summary = self.minute()
            busy = summary.decisions or self.disrupting()
            calm = 0 if busy else calm + 1
            if calm >= quiet:
                return i
        return limit

    # views
    def owned_nodes(self) -> list[Node]:
        return [n for n in self.cluster.nodes.values() if n.labels.get(L.OWNED_BY) == CLUSTER]

    def disrupting(self) -> list[str]:
        return [c.name for c in self.ledger.active() if c.disruption is not None]

    def hourly_cost(self) -> float:
        return sum(c.price or 0.0 for c in self.ledger.active())

    def app_pods(self, app: str) -> list[Pod]:
        return [p for p in self.cluster.pods.values() if p.labels.get("app") == app]


def deployment_pod(app: str, i: int, cpu: str = "500m", mem: str = "512Mi", **spec: Any) -> Pod:
    return Pod.model_validate({
        "metadata": {"name": f"{app}-{i}", "namespace": "default", "labels": {"app": app},
                     "ownerReferences": [{"kind": "ReplicaSet", "name": app, "controller": True}]},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}}], **spec},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    })


def pdb(name: str, app: str, min_available: int) -> PodDisruptionBudget:
    return PodDisruptionBudget.model_validate({"metadata": {"name": name, "namespace": "default"},
                                               "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}}})


@pytest.fixture(autouse=True)
def _no_emf(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    observability.tally.clear()


# -- scenarios ------------------------------------------------------------------------------------------------
def test_scale_down_from_100_to_10_replicas_removes_and_consolidates_nodes():
    h = Harness.build(config(consolidate_after="2m"))
    for i in range(100):
        h.cluster.add_pod(deployment_pod("web", i))
    h.cluster.pdbs.append(pdb("web", "web", min_available=8))
    h.settle()
    assert all(p.spec.node_name for p in h.app_pods("web"))
    before_nodes, before_cost = len(h.owned_nodes()), h.hourly_cost()
    assert before_nodes >= 12

    # scale to 10: the ReplicaSet keeps every tenth pod, so the survivors are spread over many nodes
    for i in range(100):
        if i % 10:
            del h.cluster.pods[f"default/web-{i}"]
    h.cluster.low_water.clear()

    first = h.minute()  # the pods just changed: consolidateAfter (2m) has not passed for any node
    assert not first.decisions and len(h.owned_nodes()) == before_nodes

    h.run_until_quiet()
    after = h.owned_nodes()
    assert len(after) <= 3, [n.labels[L.INSTANCE_TYPE] for n in after]
    assert h.hourly_cost() <= 2 * 0.192 + 1e-9 < before_cost
    web = h.app_pods("web")
    assert len(web) == 10 and all(h.cluster.healthy(p) for p in web)
    # never below the PDB (the API enforces evictions; carpool never terminated a node with pods on it)
    assert h.cluster.low_water["web"] >= 8
    assert h.budget_violations == []
    reasons = {r for s in h.summaries for m in s.decisions for r in ("empty", "underutilized") if r in m}
    assert reasons == {"empty", "underutilized"}
    assert observability.total("Disruptions", reason="Empty") >= 1
    # nothing left behind: every running instance has a claim and a node, every claim a node
    running = {iid for iid, i in h.compute.instances.items() if i["State"]["Name"] == "running"}
    assert running == {c.instance_id for c in h.ledger.active()}
    assert {n.spec.provider_id for n in after} == {f"aws:///{ZONE}/{iid}" for iid in running}


def test_ami_alias_version_bump_replaces_every_node_within_budgets_replacement_first():
    h = Harness.build(config(consolidate_after="Never", sizes=("xlarge",)))
    for i in range(5):  # one 3-cpu pod per m5.xlarge: no pod fits next to another
        h.cluster.add_pod(deployment_pod("db", i, cpu="3", mem="4Gi"))
    h.settle()
    old = {n.name for n in h.owned_nodes()}
    assert len(old) == 5 and {n.labels[L.IMAGE_ID] for n in h.owned_nodes()} == {AMIS["v20250101"]}
    h.minute()
    assert h.disrupting() == []  # nothing has drifted yet

    def replacement_registered_first(pod: Pod) -> None:
        node = h.cluster.nodes[pod.spec.node_name or ""]
        claim = h.ledger.get(node.labels[L.CLAIM])
        assert claim is not None and claim.disruption is not None and claim.disruption.reason == "Drifted"
        for name in claim.disruption.replaced_by:
            replacement = h.ledger.get(name)
            assert replacement is not None and replacement.status == ClaimStatus.REGISTERED, name

    h.cluster.on_evict = replacement_registered_first
    h.text["text"] = config(alias="al2023@v20250201", consolidate_after="Never", sizes=("xlarge",))
    max_going = 0
    for _ in range(40):
        h.minute()
        max_going = max(max_going, len(h.disrupting()))
        if not old & set(h.cluster.nodes) and not h.disrupting():
            break
    assert not old & set(h.cluster.nodes), "every old node is gone"
    assert {n.labels[L.IMAGE_ID] for n in h.owned_nodes()} == {AMIS["v20250201"]}
    assert len(h.owned_nodes()) == 5
    assert max_going == 1  # 10% of 5 nodes, rounded up: one at a time
    assert h.budget_violations == []
    h.cluster.schedule()  # the last evicted pod lands on its replacement
    assert len(h.cluster.evicted_from) == 5 and all(h.cluster.healthy(p) for p in h.app_pods("db"))
    assert any("Drifted" in m or "now gives" in m for s in h.summaries for m in s.decisions)


def test_managed_node_group_and_its_pods_are_left_to_cluster_autoscaler():
    h = Harness.build(config(consolidate_after="0s"))
    mng = Node.model_validate({
        "metadata": {"name": "mng-1", "labels": {L.EKS_NODEGROUP: "system", L.INSTANCE_TYPE: "m5.large",
                                                  L.ZONE: ZONE, L.HOSTNAME: "mng-1"}},
        "spec": {"providerID": f"aws:///{ZONE}/i-mng1"},
        "status": {"allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    })
    empty_mng = mng.model_copy(deep=True, update={"metadata": mng.metadata.model_copy(update={"name": "mng-2"})})
    h.cluster.nodes = {"mng-1": mng, "mng-2": empty_mng}
    for i in range(4):  # 1.2 cpu each: one per node-group node, the other two wait for Cluster Autoscaler
        h.cluster.add_pod(deployment_pod("agent", i, cpu="1200m", nodeSelector={L.EKS_NODEGROUP: "system"}))
    h.cluster.add_pod(deployment_pod("web", 0, cpu="250m"))
    h.cluster.schedule()
    pending_agents = [p for p in h.app_pods("agent") if not p.spec.node_name]
    assert len(pending_agents) == 2

    outcome = h.provisioner()
    assert outcome.launched == []  # web fit on the node group's room; the agents are CAS's
    assert {k for k in outcome.ignored} == {p.key for p in pending_agents}
    assert all("node-group label eks.amazonaws.com/nodegroup" in v for v in outcome.ignored.values())
    assert observability.total("PodsServedBy", server="node-group") == 2

    for _ in range(10):
        summary = h.minute()
        assert summary.decisions == []
    assert set(h.cluster.nodes) == {"mng-1", "mng-2"}
    assert not any(n.spec.unschedulable or n.spec.taints for n in h.cluster.nodes.values())
    assert h.cluster.evicted_from == [] and h.compute.instances == {}


def test_a_replacement_that_never_joins_abandons_the_decision_and_the_old_node_is_kept_untainted():
    """Karpenter's orchestration queue: a replacement not initialized 10 minutes after the command fails
    it; the candidate's taint is removed and the node kept. Nothing is launched again for that decision,
    and the node is not decided on again while that replacement still boots (Karpenter's simulation does
    not rely on an uninitialized node); once the registration timeout removed it, the drift, which still
    holds, is decided anew and its new replacement joins."""
    h = Harness.build(config(consolidate_after="Never", sizes=("xlarge",)), registration_timeout=900)
    h.cluster.add_pod(deployment_pod("db", 0, cpu="3", mem="4Gi"))
    h.settle()
    [old] = [n.name for n in h.owned_nodes()]
    h.text["text"] = config(alias="al2023@v20250201", consolidate_after="Never", sizes=("xlarge",))
    h.minute()
    decided = h.clock.now
    on_nodes = {(n.spec.provider_id or "").rsplit("/", 1)[-1] for n in h.owned_nodes()}
    [first] = [i for i in h.compute.instances if i not in on_nodes]  # launched, not joined yet
    h.stuck.add(first)  # this replacement's kubelet never starts
    abandoned: list[str] = []
    while not abandoned:
        summary = h.minute()
        abandoned += [m for m in summary.decisions if "abandoned" in m]
        assert h.cluster.evicted_from == [], "the old node drains only after a replacement has joined"
        assert h.clock.now - decided <= timedelta(minutes=10), "the decision outlived Karpenter's command timeout"
    (message,) = abandoned
    assert old in message and "(1 launch for it)" in message and "10 minutes" in message
    assert not any("launched again" in m for s in h.summaries for m in s.decisions)
    assert not any(c.disruption is not None for c in h.ledger.active() if c.node_name == old)
    while first not in h.compute.terminated:  # kept, untainted, until the registration timeout removes it
        node = h.cluster.nodes[old]
        assert not node.spec.unschedulable and not any(t.key == L.DISRUPTED_TAINT for t in node.spec.taints)
        assert len(h.compute.instances) == 2, "nothing is launched for the node while its replacement boots"
        h.minute()
    assert all(h.cluster.healthy(p) for p in h.app_pods("db"))
    for _ in range(6):  # the drift still holds: decided again, with a replacement that joins
        h.minute()
    assert old not in h.cluster.nodes and len(h.compute.instances) == 3
    assert {n.labels[L.IMAGE_ID] for n in h.owned_nodes()} == {AMIS["v20250201"]}
    h.cluster.schedule()
    assert all(h.cluster.healthy(p) for p in h.app_pods("db"))


def test_no_taint_and_nothing_left_running_when_the_replacement_cannot_be_launched():
    h = Harness.build(config(consolidate_after="Never", sizes=("xlarge",)))
    for i in range(2):
        h.cluster.add_pod(deployment_pod("db", i, cpu="3", mem="4Gi"))
    h.settle()
    assert len(h.owned_nodes()) == 2
    h.compute.exhausted = True  # EC2 has no capacity left for the replacement
    h.text["text"] = config(alias="al2023@v20250201", consolidate_after="Never", sizes=("xlarge",))
    summary = h.minute()
    assert any("replacement failed" in m for m in summary.decisions)
    assert not any(n.spec.unschedulable or n.spec.taints for n in h.owned_nodes())
    assert len(h.compute.instances) == 2 and h.cluster.evicted_from == [] and h.disrupting() == []
    h.compute.exhausted = False  # capacity is back: the drift proceeds, replacement first
    for _ in range(10):
        h.minute()
    assert {n.labels[L.IMAGE_ID] for n in h.owned_nodes()} == {AMIS["v20250201"]}


def test_a_pool_at_its_limit_plans_no_replacement_at_all(caplog: pytest.LogCaptureFixture):
    full = {"cpu": 8}  # two m5.xlarge: no room in the pool's limits for a replacement
    h = Harness.build(config(consolidate_after="Never", sizes=("xlarge",), limits=full))
    for i in range(2):
        h.cluster.add_pod(deployment_pod("db", i, cpu="3", mem="4Gi"))
    h.settle()
    h.text["text"] = config(alias="al2023@v20250201", consolidate_after="Never", sizes=("xlarge",), limits=full)
    with caplog.at_level("INFO", logger="carpool.app.disruption_executor"):
        for _ in range(3):
            assert h.minute().decisions == []
    assert "would fit nowhere" in caplog.text and "now gives" in caplog.text
    assert not any(n.spec.unschedulable or n.spec.taints for n in h.owned_nodes())
    assert len(h.compute.instances) == 2


def _one_underused_on_demand_node() -> tuple[Harness, Node]:
    """No spot capacity anywhere, nine 700m pods on one on-demand m5.2xlarge: the node a cheaper one can
    replace once most of its pods are gone."""
    h = Harness.build(config(consolidate_after="1m", sizes=("large", "xlarge", "2xlarge")))
    catalog = h.deps.catalog.get(T0)
    h.deps.offerings.mark_unavailable(
        UnavailableOffering(instance_type=t, zone=o.zone, capacity_type=L.CAPACITY_SPOT, until=T0 + timedelta(days=1))
        for t in ("m5.large", "m5.xlarge", "m5.2xlarge") for o in catalog.types[t].offerings)
    for i in range(9):
        h.cluster.add_pod(deployment_pod("web", i, cpu="700m"))
    h.settle()
    [big] = h.owned_nodes()
    return h, big


def test_underutilized_on_demand_node_is_replaced_by_a_cheaper_one_first():
    h, big = _one_underused_on_demand_node()
    assert (big.labels[L.INSTANCE_TYPE], big.labels[L.CAPACITY_TYPE]) == ("m5.2xlarge", L.CAPACITY_ON_DEMAND)
    for i in range(1, 9):
        del h.cluster.pods[f"default/web-{i}"]

    def replacement_joined(pod: Pod) -> None:
        assert len(h.owned_nodes()) == 2, "the cheaper node is Ready before the pod is evicted"

    h.cluster.on_evict = replacement_joined
    h.run_until_quiet(limit=20)
    [small] = h.owned_nodes()
    assert (small.labels[L.INSTANCE_TYPE], small.labels[L.CAPACITY_TYPE]) == ("m5.large", L.CAPACITY_ON_DEMAND)
    assert h.cluster.evicted_from == [big.name]
    assert any("underutilized: replace with m5.large" in m for s in h.summaries for m in s.decisions)
    assert h.hourly_cost() == pytest.approx(0.096)
    h.cluster.schedule()
    assert all(h.cluster.healthy(p) for p in h.app_pods("web"))


def test_a_run_out_of_time_leaves_drains_for_the_next_run_and_starts_nothing_new(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from carpool.app import disruption_executor as executor

    h = Harness.build(manifests(
        nodepool(requirements={"karpenter.k8s.aws/instance-family": ["m5"],
                               "karpenter.k8s.aws/instance-size": ["large", "xlarge"]},
                 disruption={"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "2m",
                             "budgets": [{"nodes": "100%"}]}),
        nodeclass(cluster=CLUSTER, role="carpool-node", alias="al2023@v20250101")))
    for i in range(100):
        h.cluster.add_pod(deployment_pod("web", i))
    h.settle()
    for i in range(100):
        if i % 10:
            del h.cluster.pods[f"default/web-{i}"]
    h.minute()
    h.clock.now += timedelta(minutes=3)

    monkeypatch.setattr(executor, "START_SECONDS", -1.0)  # every run is too old for a second drain step
    held = None
    for _ in range(15):  # a multi-node decision leaves more drains than one run takes
        summary = h.minute()
        if "plan" not in summary.stages:
            held = summary
            break
    assert held is not None, "no run ever left a drain for the next one"
    # that run took one drain step (every run makes progress) and started nothing new
    assert all("drained" in m for m in held.decisions) and len(held.decisions) <= 1
    assert h.disrupting()

    monkeypatch.setattr(executor, "START_SECONDS", 35.0)
    h.run_until_quiet()
    assert h.disrupting() == [] and all(p.spec.node_name for p in h.app_pods("web"))


def test_a_run_late_after_advancing_disruptions_in_flight_plans_nothing_new(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 5,000 nodes the reads and the advance of in-flight drains can take a run past `START_SECONDS`;
    a plan begun then takes as long again for at most one decision, so the run ends and the next plans."""
    from carpool.app import disruption_executor as executor

    h = Harness.build(config(consolidate_after="Never", sizes=("xlarge",)))
    h.cluster.add_pod(deployment_pod("db", 0, cpu="3", mem="4Gi"))
    h.settle()
    h.text["text"] = config(alias="al2023@v20250201", consolidate_after="Never", sizes=("xlarge",))
    h.minute()  # drifted: its replacement is launched
    on_nodes = {(n.spec.provider_id or "").rsplit("/", 1)[-1] for n in h.owned_nodes()}
    [replacement] = [i for i in h.compute.instances if i not in on_nodes]
    h.stuck.add(replacement)  # it has not joined yet: the old node's disruption stays in flight, undrained
    assert h.disrupting()
    assert "plan" in h.minute().stages  # in time: the run plans beside the disruption in flight

    monkeypatch.setattr(executor, "START_SECONDS", -1.0)
    late = h.minute()
    assert "advance" in late.stages and "plan" not in late.stages and late.decisions == []
    assert h.disrupting()  # carried on by the next run

    monkeypatch.setattr(executor, "START_SECONDS", 35.0)
    assert "plan" in h.minute().stages


def test_a_budget_blocked_pod_is_deleted_at_the_pools_termination_grace_period():
    """Drift replaces a node whose only pod a PodDisruptionBudget never lets go: with the NodePool's
    `terminationGracePeriod: 10m`, the pod's evictions are refused until the last run at which its own 30 s
    grace still ends by the deadline (drain start + 10 minutes); then it is deleted; the node goes then, not
    never."""
    def with_grace(alias: str) -> str:
        import yaml

        docs = list(yaml.safe_load_all(config(alias=alias, consolidate_after="Never", sizes=("xlarge",))))
        docs[0]["spec"]["template"]["spec"]["terminationGracePeriod"] = "10m"
        return yaml.safe_dump_all(docs, sort_keys=False)

    h = Harness.build(with_grace("al2023@v20250101"))
    h.cluster.add_pod(deployment_pod("db", 0, cpu="3", mem="4Gi"))
    h.cluster.pdbs.append(pdb("db", "db", min_available=1))
    h.settle()
    [old] = [n.name for n in h.owned_nodes()]
    h.text["text"] = with_grace("al2023@v20250201")
    drain_started = deadline = None
    for _ in range(30):
        h.minute()
        claim = next((c for c in h.ledger.active() if c.node_name == old), None)
        if drain_started is None and claim is not None and claim.disruption and claim.disruption.termination_deadline:
            drain_started = h.clock.now
            deadline = claim.disruption.termination_deadline
        if old not in h.cluster.nodes:
            break
    assert drain_started is not None and deadline == drain_started + timedelta(minutes=10)
    assert old not in h.cluster.nodes, "the node went at its deadline"
    assert h.cluster.evicted_from == []  # the budget refused every eviction
    [(key, grace)] = h.cluster.deleted
    # deleted at the last minutely run before its 30 s grace stopped fitting, with what remained: it ends
    # by the deadline, having had at least its own grace
    assert key == "default/db-0" and 30 <= grace < 30 + 60


def test_a_refused_orphan_termination_is_reported_and_the_next_orphan_still_goes():
    """Issue 30 item 4, the clean-up's side: two orphans (carpool's tags, no claim, past the grace period),
    the first under termination protection. Its refusal is logged with the instance and EC2's error and
    counted; the second is terminated in the same run, and consolidation still runs after the clean-up."""
    h = Harness.build(config())
    tags = {L.TAG_MANAGED_BY: CLUSTER, L.TAG_CLUSTER_OWNED.format(cluster=CLUSTER): "owned"}
    for iid in ("i-00001", "i-00002"):
        h.compute.instances[iid] = {"InstanceId": iid, "InstanceType": "m5.large", "Tags": dict(tags),
                                    "Placement": {"AvailabilityZone": ZONE}, "State": {"Name": "running"},
                                    "LaunchTime": T0 - timedelta(hours=1)}
    h.compute.protected.add("i-00001")
    summary = disrupt.run(h.deps)
    assert h.compute.terminated == ["i-00002"] and summary.orphans == ["i-00002"]
    (failure,) = summary.failures
    assert "i-00001" in failure and "OperationNotPermitted" in failure
    assert observability.total("DisruptionActionFailures", action="terminate") == 1
    assert set(summary.stages) >= {"observe", "advance"}  # the run went on to consolidation


def test_a_pod_bound_before_the_cordon_aborts_a_replacement_and_terminates_what_it_launched():
    """Issue 30 item 6, consolidation's side: the replacement is launched, then a pod the plan never saw is
    bound to the node before its cordon. The check after the cordon finds it: the decision is abandoned,
    the node's taint and cordon removed, the replacement terminated and its claim released; no pod is
    evicted. A later run decides again with the new pod counted."""
    h, big = _one_underused_on_demand_node()
    for i in range(1, 9):
        del h.cluster.pods[f"default/web-{i}"]
    raced: list[str] = []

    def bind_meanwhile(node: str) -> None:
        if node == big.name and not raced:
            late = deployment_pod("late", 0, cpu="500m")
            late.spec.node_name, late.status = node, type(late.status)(phase="Running")
            h.cluster.add_pod(late)
            raced.append(late.key)

    h.cluster.on_cordon = bind_meanwhile
    for _ in range(4):
        h.minute()
        if raced:
            break
    aborted = [m for m in h.summaries[-1].decisions if "not disrupting" in m]
    assert raced and aborted and "default/late-0" in aborted[0] and "terminated" in aborted[0]
    node = h.cluster.nodes[big.name]
    assert not node.spec.unschedulable and not node.spec.taints
    assert len(h.compute.terminated) == 1 and h.compute.terminated[0] != (big.spec.provider_id or "").rsplit("/", 1)[-1]
    assert h.disrupting() == [] and h.cluster.evicted_from == []
    assert [c.node_name for c in h.ledger.active()] == [big.name]


class _Died(BaseException):
    """The function's process died (a Lambda timeout, an out-of-memory kill): no `except Exception` sees it."""


def test_a_crash_just_after_the_cordon_leaves_a_decision_the_next_run_carries_on():
    """Issue 30, a crash between any two steps: the run that decided a consolidation dies right after it
    cordoned and tainted the node. The decision was recorded first, so the next runs carry it on (the
    replacement registers, the node is drained and goes); no node stays cordoned with no decision on it."""
    h, big = _one_underused_on_demand_node()
    for i in range(1, 9):
        del h.cluster.pods[f"default/web-{i}"]
    taint, died = h.cluster.taint, []

    def taint_then_die(node: str, what: Any) -> None:
        taint(node, what)
        if node == big.name and not died:
            died.append(node)
            raise _Died(f"disruption function killed after cordoning {node}")

    h.cluster.taint = taint_then_die  # type: ignore[method-assign]
    for _ in range(6):
        try:
            h.minute()
        except _Died:
            break
    assert died == [big.name]
    recorded = [c for c in h.ledger.active() if c.node_name == big.name and c.disruption is not None]
    assert recorded, "the decision was recorded before the cordon"
    h.run_until_quiet(limit=30)
    for node in h.cluster.nodes.values():  # nothing left cordoned that no decision explains
        claim = next((c for c in h.ledger.active() if c.node_name == node.metadata.name), None)
        assert not node.spec.unschedulable or (claim is not None and claim.disruption is not None)
    assert big.name not in h.cluster.nodes and h.disrupting() == []
    [small] = h.owned_nodes()
    assert small.labels[L.INSTANCE_TYPE] == "m5.large"
