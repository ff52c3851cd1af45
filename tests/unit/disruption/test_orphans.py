"""The clean-up rules for instances and claims that lost track of each other (`carpool.disruption.orphans`),
and the disruption function carrying them out (`carpool.app.cleanup.clean_up`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from carpool import labels as L
from carpool.api.k8s import Node
from carpool.app import cleanup
from carpool.app.disruption_summary import DisruptSummary
from carpool.app.settings import Settings
from carpool.app.sources import StaticCatalogSource
from carpool.catalog import Catalog
from carpool.disruption import orphans
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.sizing.allocatable import size_node
from carpool.state.memory import MemoryLedger
from carpool.state.models import Claim, ClaimStatus

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CLUSTER = "prod"
LIMITS = orphans.Limits(CLUSTER, orphan_grace=timedelta(seconds=300), launch_deadline=timedelta(seconds=180),
                        registration_timeout=timedelta(seconds=900))
GIB = 2**30


def ec2_instance(iid: str, claim: str | None = "c1", *, cluster: str = CLUSTER, launched: datetime = T0,
                 spot: bool = False, owned: bool = True) -> dict[str, Any]:
    """A DescribeInstances entry as carpool's CreateFleet tags it."""
    tags = {L.TAG_MANAGED_BY: cluster, L.TAG_NODEPOOL: "default", L.TAG_NODECLASS: "default",
            orphans.CREATED_AT_TAG: launched.isoformat()}
    if owned:
        tags[L.TAG_CLUSTER_OWNED.format(cluster=cluster)] = "owned"
    if claim:
        tags[L.TAG_NODECLAIM] = claim
    inst: dict[str, Any] = {
        "InstanceId": iid, "InstanceType": "m5.xlarge", "ImageId": "ami-0123", "State": {"Name": "running"},
        "Placement": {"AvailabilityZone": "us-east-1b"}, "PrivateDnsName": f"ip-{iid}.ec2.internal",
        "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
    }
    if spot:
        inst["InstanceLifecycle"] = "spot"
    return inst


def view(iid: str, claim: str | None = "c1", **kw: Any) -> orphans.InstanceView:
    return orphans.InstanceView.from_ec2(ec2_instance(iid, claim, **kw))


def node_json(iid: str, *, provider_id: bool = True, unregistered: bool = False) -> dict[str, Any]:
    taints = [{"key": L.UNREGISTERED_TAINT, "effect": "NoExecute"}] if unregistered else []
    spec: dict[str, Any] = {"taints": taints}
    if provider_id:
        spec["providerID"] = f"aws:///us-east-1b/{iid}"
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": f"ip-{iid}.ec2.internal",
                     "labels": {L.NODEPOOL: "default", L.CAPACITY_TYPE: "on-demand", L.INSTANCE_TYPE: "m5.xlarge"}},
        "spec": spec,
        "status": {"capacity": {"cpu": "4", "memory": "15Gi", "pods": "58"},
                   "allocatable": {"cpu": "3920m", "memory": "14Gi", "pods": "58"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def node(iid: str, **kw: Any) -> Node:
    return Node.model_validate(node_json(iid, **kw))


def claim(name: str = "c1", *, status: ClaimStatus = ClaimStatus.RESERVED, instance_id: str | None = None,
          created: datetime = T0, pods: int = 12) -> Claim:
    return Claim(name=name, nodepool="default", nodeclass="default", status=status, created_at=created,
                 instance_types=["m5.xlarge", "m5.2xlarge"], pods=[f"default/{name}-web-{i}" for i in range(pods)],
                 reserved={"cpu": 8000, "memory": 32 * GIB, "nodes": 1}, instance_id=instance_id,
                 instance_type="m5.xlarge" if instance_id else None)


def decide(instances: list[orphans.InstanceView], claims: list[Claim], nodes: list[Node], *, at: float,
           serving: dict[str, int] | None = None) -> orphans.Decisions:
    return orphans.decide(instances, claims, nodes, serving or {}, T0 + timedelta(seconds=at), LIMITS)


# -- adoption: a node that joined is never killed ---------------------------------------------------------
def test_an_orphan_serving_pods_is_adopted_not_killed_however_old() -> None:
    n = node("i-1")
    for at in (60, 301, 3600):
        out = decide([view("i-1")], [], [n], at=at, serving={n.name: 12})
        assert out.terminations == []
        (adoption,) = out.adoptions
        assert adoption.node == n.name and "12 pods" in adoption.why
        c = adoption.claim
        assert (c.name, c.status, c.instance_id, c.node_name) == ("c1", ClaimStatus.REGISTERED, "i-1", n.name)
        assert (c.nodepool, c.nodeclass, c.instance_type, c.zone, c.image_id) == (
            "default", "default", "m5.xlarge", "us-east-1b", "ami-0123")
        assert c.reserved == {"cpu": 4000, "memory": 15 * GIB, "pods": 58, "nodes": 1}  # the node's real capacity
        assert c.allocatable == {}  # never offered as an in-flight node's free room


def test_an_adopted_node_is_charged_every_resource_its_type_has_even_before_the_node_reports_it() -> None:
    gpu_type = {"cpu": 4000, "memory": 15 * GIB, "nvidia.com/gpu": 1, "ephemeral-storage": 20 * GIB, "pods": 29}
    inst = view("i-1")
    out = orphans.decide([inst], [], [node("i-1")], {}, T0 + timedelta(seconds=60), LIMITS,
                         {inst.instance_type: gpu_type})
    (adoption,) = out.adoptions
    # the node's own figures win where it reports them; the GPU its device plugin has not advertised yet
    # is charged from the type, as a launch charges it
    assert adoption.claim.reserved == {"cpu": 4000, "memory": 15 * GIB, "nvidia.com/gpu": 1,
                                       "ephemeral-storage": 20 * GIB, "pods": 58, "nodes": 1}


def test_a_registered_node_without_pods_is_adopted_too() -> None:
    out = decide([view("i-1")], [], [node("i-1")], at=3600)
    assert [a.instance.instance_id for a in out.adoptions] == ["i-1"] and out.terminations == []


def test_an_adopted_node_still_unregistered_gets_a_launched_claim_for_the_registrar_to_finish() -> None:
    (adoption,) = decide([view("i-1")], [], [node("i-1", unregistered=True)], at=600).adoptions
    assert adoption.claim.status == ClaimStatus.LAUNCHED and adoption.claim.node_name is None


def test_adoption_does_not_reuse_the_name_of_a_live_claim_that_records_another_instance() -> None:
    other = claim("c1", status=ClaimStatus.REGISTERED, instance_id="i-9")
    (adoption,) = decide([view("i-1")], [other], [node("i-1")], at=600).adoptions
    assert adoption.claim.name == "adopted-i-1"


# -- repair: the claim named by the instance's tag learns its instance -----------------------------------
def test_a_claim_named_by_the_nodeclaim_tag_is_repaired_once_its_node_joined() -> None:
    reserved = claim("c1")
    inst = view("i-1", spot=True)
    out = decide([inst], [reserved], [node("i-1")], at=50, serving={node("i-1").name: 12})
    assert out.adoptions == [] and out.terminations == [] and out.releases == []
    (repair,) = out.repairs
    fixed = repair.claim
    assert (fixed.name, fixed.instance_id, fixed.instance_type, fixed.zone, fixed.capacity_type, fixed.image_id) == (
        "c1", "i-1", "m5.xlarge", "us-east-1b", "spot", "ami-0123")
    assert fixed.status == ClaimStatus.LAUNCHED and fixed.launched_at == T0
    assert fixed.pods == reserved.pods and fixed.reserved == reserved.reserved  # the rest of the claim is kept


def test_a_registered_claim_lacking_its_instance_keeps_its_status_when_repaired() -> None:
    registered = claim("c1", status=ClaimStatus.REGISTERED).model_copy(update={"node_name": "ip-i-1.ec2.internal"})
    (repair,) = decide([view("i-1")], [registered], [node("i-1")], at=50).repairs
    assert repair.claim.status == ClaimStatus.REGISTERED and repair.claim.instance_id == "i-1"


def test_without_a_node_the_repair_waits_for_the_launch_deadline() -> None:
    early = decide([view("i-1")], [claim("c1")], [], at=120)
    assert early.repairs == [] and early.releases == [] and early.terminations == []
    assert "may still be writing" in early.waiting["i-1"]
    late = decide([view("i-1")], [claim("c1")], [], at=180)
    assert [r.claim.instance_id for r in late.repairs] == ["i-1"] and late.releases == []


def test_a_second_instance_tagged_for_the_same_claim_is_not_recorded_on_it() -> None:
    out = decide([view("i-1"), view("i-2")], [claim("c1")], [node("i-1")], at=600)
    assert [r.instance.instance_id for r in out.repairs] == ["i-1"]
    assert [t.instance_id for t in out.terminations] == ["i-2"]


# -- stale reservations ---------------------------------------------------------------------------------
def test_a_stale_reservation_is_released_after_the_launch_deadline() -> None:
    stale = claim("c1")
    assert decide([], [stale], [], at=179).releases == []
    (release,) = decide([], [stale], [], at=180).releases
    assert release.claim.name == "c1" and "12 pods" in release.why


def test_a_reservation_with_an_instance_tagged_for_it_is_repaired_not_released() -> None:
    out = decide([view("i-1", "c1")], [claim("c1")], [], at=600)
    assert out.releases == [] and [r.claim.name for r in out.repairs] == ["c1"]


def test_launched_and_registered_claims_are_not_stale() -> None:
    launched = claim("c1", status=ClaimStatus.LAUNCHED, instance_id="i-1")
    registered = claim("c2", status=ClaimStatus.REGISTERED, instance_id="i-2")
    out = decide([view("i-1", "c1"), view("i-2", "c2")], [launched, registered], [node("i-2")], at=600)
    assert out == orphans.Decisions()


# -- orphans --------------------------------------------------------------------------------------------
def test_an_orphan_without_a_node_is_terminated_after_the_grace_period() -> None:
    assert decide([view("i-1", None)], [], [], at=299).terminations == []
    (t,) = decide([view("i-1", None)], [], [], at=300).terminations
    assert (t.instance_id, t.reason, t.node, t.claim) == ("i-1", "orphan", None, None)


def test_an_orphan_whose_claim_is_gone_is_terminated_too() -> None:
    (t,) = decide([view("i-1", "released-long-ago")], [], [], at=600).terminations
    assert t.instance_id == "i-1"


def test_instances_without_both_ownership_tags_are_never_touched() -> None:
    foreign = [view("i-1", cluster="other"), view("i-2", owned=False)]
    assert decide(foreign, [], [], at=3600) == orphans.Decisions()


def test_an_orphans_node_object_without_provider_id_is_named_for_draining() -> None:
    pending = node("i-1", provider_id=False)
    (t,) = decide([view("i-1", None)], [], [pending], at=600).terminations
    assert t.node == pending.name


def test_a_node_without_provider_id_that_serves_pods_is_adopted() -> None:
    pending = node("i-1", provider_id=False)
    out = decide([view("i-1", None)], [], [pending], at=600, serving={pending.name: 3})
    assert out.terminations == [] and [a.node for a in out.adoptions] == [pending.name]


# -- registration timeout ------------------------------------------------------------------------------
def test_a_launched_claim_whose_node_never_joined_times_out() -> None:
    launched = claim("c1", status=ClaimStatus.LAUNCHED, instance_id="i-1")
    assert decide([view("i-1")], [launched], [], at=899).terminations == []
    (t,) = decide([view("i-1")], [launched], [], at=900).terminations
    assert (t.instance_id, t.reason, t.claim.name if t.claim else None) == ("i-1", "registration-timeout", "c1")


def test_a_launched_claim_whose_node_joined_never_times_out() -> None:
    launched = claim("c1", status=ClaimStatus.LAUNCHED, instance_id="i-1")
    out = decide([view("i-1")], [launched], [node("i-1", unregistered=True)], at=3600)
    assert out.terminations == [] and "c1" in out.waiting


def test_a_timed_out_claim_whose_node_object_serves_pods_is_not_killed() -> None:
    launched = claim("c1", status=ClaimStatus.LAUNCHED, instance_id="i-1")
    pending = node("i-1", provider_id=False)
    out = decide([view("i-1")], [launched], [pending], at=3600, serving={pending.name: 2})
    assert out.terminations == [] and "serves pods" in out.waiting["c1"]
    (t,) = decide([view("i-1")], [launched], [pending], at=3600).terminations
    assert t.node == pending.name  # without pods it goes, drained first


# -- the executor --------------------------------------------------------------------------------------
class FakeEc2:
    """DescribeInstances / TerminateInstances over a list; terminations are written into the cluster's
    action log so the order against cordon, evictions and node deletion can be checked."""

    def __init__(self, cluster: SimulatedCluster, instances: list[dict[str, Any]]) -> None:
        self.cluster, self.instances = cluster, {i["InstanceId"]: i for i in instances}

    def describe_instances(self, filters: Any) -> list[dict[str, Any]]:
        return list(self.instances.values())

    def terminate_instances(self, ids: list[str]) -> None:
        for iid in ids:
            self.cluster.actions.append((0.0, "terminate", iid))
            self.instances.pop(iid, None)


def world(instances: list[dict[str, Any]], nodes: list[dict[str, Any]], claims: list[Claim], at: float) -> Any:
    now = T0 + timedelta(seconds=at)
    cluster = SimulatedCluster(lambda: now)
    for raw in nodes:
        cluster.add_node(raw)
    ledger = MemoryLedger()
    for c in claims:
        ledger.reserve(c, None, c.created_at, 900)
        ledger.mark_launched(c)
    return SimpleNamespace(cluster=cluster, compute=FakeEc2(cluster, instances), ledger=ledger, clock=lambda: now, cache={}, karpenter=None,
                           settings=Settings(cluster_name=CLUSTER), catalog=StaticCatalogSource("us-east-1"))


def bound_pod(name: str, node_name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "labels": labels or {},
                         "ownerReferences": [{"kind": "ReplicaSet", "name": "web-abc"}]},
            "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]},
            "status": {"phase": "Running"}}


def test_a_terminated_orphan_is_cordoned_and_drained_first() -> None:
    deps = world([ec2_instance("i-1", None)], [node_json("i-1", provider_id=False)], [], at=600)
    summary = DisruptSummary()
    cleanup.clean_up(deps, deps.clock(), summary)
    name = "ip-i-1.ec2.internal"
    verbs = [(verb, target.split()[0]) for _at, verb, target in deps.cluster.actions]
    assert verbs == [("cordon", name), ("taint", name), ("terminate", "i-1"), ("delete-node", name)]
    assert summary.orphans == ["i-1"] and deps.cluster.list_nodes() == []


def test_a_termination_waits_while_a_pod_budget_blocks_the_drain() -> None:
    name = "ip-i-1.ec2.internal"
    deps = world([ec2_instance("i-1", None)], [node_json("i-1", provider_id=False)], [], at=600)
    deps.cluster.add_pod(bound_pod("late", name, {"app": "db"}))  # landed after the decision was made
    deps.cluster.add_pdb({"metadata": {"name": "db"}, "spec": {"minAvailable": 1,
                                                                "selector": {"matchLabels": {"app": "db"}}}})
    summary = DisruptSummary()
    cleanup._terminate(orphans.Termination("i-1", "orphan", "orphan", node=name), deps, summary)
    verbs = [verb for _at, verb, _target in deps.cluster.actions]
    assert verbs == ["cordon", "taint", "eviction-blocked"]
    assert summary.draining == ["i-1"] and summary.orphans == [] and "i-1" in deps.compute.instances


def test_the_executor_adopts_a_node_serving_pods_and_never_terminates_it() -> None:
    name = "ip-i-1.ec2.internal"
    deps = world([ec2_instance("i-1", "c1")], [node_json("i-1")], [], at=3600)
    for i in range(12):
        deps.cluster.add_pod(bound_pod(f"web-{i}", name))
    summary = DisruptSummary()
    cleanup.clean_up(deps, deps.clock(), summary)
    assert summary.adopted == ["i-1"] and summary.orphans == [] and deps.cluster.actions == []
    stored = deps.ledger.find_by_instance("i-1")
    assert stored is not None and stored.status == ClaimStatus.REGISTERED and stored.node_name == name
    # everything the node has: its reported capacity, and what its type has that it does not report yet
    sized = size_node(Catalog.snapshot("us-east-1").types["m5.xlarge"]).capacity
    assert deps.ledger.usage()["default"] == {**sized, "cpu": 4000, "memory": 15 * GIB, "pods": 58, "nodes": 1}
    again = DisruptSummary()
    cleanup.clean_up(deps, deps.clock(), again)  # the next run finds it known: nothing to do
    assert again == DisruptSummary()


def test_the_executor_repairs_and_releases_through_the_ledger() -> None:
    crashed_after = claim("c1", created=T0)
    crashed_before = claim("c2", created=T0)
    deps = world([ec2_instance("i-1", "c1")], [], [crashed_after, crashed_before], at=200)
    summary = DisruptSummary()
    cleanup.clean_up(deps, deps.clock(), summary)
    assert summary.repaired == ["c1"] and summary.released == ["c2"]
    fixed = deps.ledger.get("c1")
    assert fixed is not None and fixed.instance_id == "i-1" and fixed.status == ClaimStatus.LAUNCHED
    assert deps.ledger.get("c2") is None
    assert deps.ledger.nominated(deps.clock(), crashed_before.pods) == {}  # its pods are free again
    assert set(deps.ledger.nominated(T0, crashed_after.pods).values()) == {"c1"}


def test_a_repaired_claim_holds_its_instance_type_not_its_largest_option() -> None:
    crashed_after = claim("c1", created=T0)  # reserved as its largest option, m5.2xlarge: 8 cpu, 32 GiB
    deps = world([ec2_instance("i-1", "c1")], [], [crashed_after], at=200)
    cleanup.clean_up(deps, deps.clock(), DisruptSummary())
    sized = size_node(Catalog.snapshot("us-east-1").types["m5.xlarge"]).capacity
    assert deps.ledger.get("c1").reserved == {**sized, "nodes": 1}
    assert deps.ledger.usage()["default"] == {**sized, "nodes": 1}


def test_a_registered_claim_still_holding_its_largest_option_is_charged_its_node() -> None:
    name = "ip-i-1.ec2.internal"
    stored = claim("c1", status=ClaimStatus.REGISTERED, instance_id="i-1")
    stored.node_name = name
    deps = world([ec2_instance("i-1", "c1")], [node_json("i-1")], [stored], at=3600)
    assert deps.ledger.usage()["default"]["cpu"] == 8000  # stored before launches re-charged claims
    summary = DisruptSummary()
    cleanup.clean_up(deps, deps.clock(), summary)
    assert summary.charged == ["c1"]
    sized = size_node(Catalog.snapshot("us-east-1").types["m5.xlarge"]).capacity
    held = {**sized, "cpu": 4000, "memory": 15 * GIB, "pods": 58, "nodes": 1}  # the node's, then its type's
    assert deps.ledger.get("c1").reserved == held and deps.ledger.usage()["default"] == held
    again = DisruptSummary()
    cleanup.clean_up(deps, deps.clock(), again)  # held exactly now: nothing to write
    assert again.charged == []
