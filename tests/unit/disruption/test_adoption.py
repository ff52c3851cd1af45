"""Karpenter's NodeClaims adopted into carpool's claims (`carpool.adoption`, pure) and the disruption run's
step that applies them (`carpool.app.adopt`) before the orphan sweep: the NodeClaim is the first source,
nothing is replaced or terminated, and what Karpenter froze onto the NodeClaim (expireAfter, hashes)
decides expiry and static drift."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest
from tests.unit.disruption.test_orphans import CLUSTER, GIB, T0, FakeEc2, bound_pod, world

from carpool import adoption
from carpool import labels as L
from carpool.api.k8s import Node
from carpool.app import adopt, cleanup
from carpool.app.disruption_summary import DisruptSummary
from carpool.disruption import candidates, drift, expiry
from carpool.karpenter_hash import nodepool_hash
from carpool.karpenter_objects import EC2NODECLASS, NODECLAIM, NODEPOOL
from carpool.sim.cluster import karpenter_built as kb
from carpool.state.models import Claim, ClaimStatus

IID = "i-0abc1234567890def"
NODE = "ip-10-0-1-17.ec2.internal"
POOL: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default", "uid": "pool-uid", "generation": 1},
    "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                                   "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In",
                                                     "values": ["on-demand"]}],
                                   "expireAfter": "168h"}}},
    "status": {"conditions": [{"type": "Ready", "status": "True", "observedGeneration": 1}]}}
#: Karpenter's hash of the pool's template, as its hash controller wrote it on the pool and its NodeClaims
POOL_HASH = nodepool_hash(POOL) or ""
HASHES = kb.hash_annotations(POOL_HASH, "2222")
POOL["metadata"]["annotations"] = HASHES
CLASS = {"metadata": {"name": "default", "generation": 3, "annotations": HASHES},
         "status": {"conditions": [{"type": "Ready", "status": "True", "observedGeneration": 3}]}}
CAPACITY = {"cpu": "4", "memory": "15896Mi", "pods": "58", "ephemeral-storage": "20Gi"}
ALLOCATABLE = {"cpu": "3920m", "memory": "14962Mi", "pods": "58", "ephemeral-storage": "17Gi"}


def karpenters_nodeclaim(name: str = "default-x7k2p", iid: str = IID, *, registered: bool = True,
                         created: Any = None) -> dict[str, Any]:
    nc = kb.nodeclaim(name, POOL, "m5.xlarge", "us-east-1b", "on-demand", HASHES)
    nc["metadata"]["uid"] = f"uid-{name}"
    nc["metadata"]["creationTimestamp"] = (created or T0 - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    nc["status"] = kb.nodeclaim_status(iid, "us-east-1b", "ami-0karp", NODE, CAPACITY, ALLOCATABLE,
                                       T0 - timedelta(days=2))
    if not registered:
        nc["status"]["conditions"] = [c for c in nc["status"]["conditions"] if c["type"] == "Launched"]
        del nc["status"]["nodeName"]
    return nc


def karpenters_node(nc: dict[str, Any], iid: str = IID, *, unregistered: bool = False) -> dict[str, Any]:
    raw = {"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": NODE, "labels": {L.HOSTNAME: NODE}},
           "spec": {"providerID": f"aws:///us-east-1b/{iid}",
                    "taints": [{"key": L.UNREGISTERED_TAINT, "effect": "NoExecute"}] if unregistered else []},
           "status": {"capacity": {"cpu": "4", "memory": "15896Mi", "pods": "58"},
                      "allocatable": {"cpu": "3920m", "memory": "14962Mi", "pods": "58"},
                      "conditions": [{"type": "Ready", "status": "True"}]}}
    return kb.karpenter_node(raw, nc)


def karpenters_instance(iid: str = IID, claim: str = "default-x7k2p") -> dict[str, Any]:
    tags = kb.instance_tags(CLUSTER, "default", "default", claim, NODE)
    return {"InstanceId": iid, "InstanceType": "m5.xlarge", "ImageId": "ami-0karp", "State": {"Name": "running"},
            "Placement": {"AvailabilityZone": "us-east-1b"}, "PrivateDnsName": NODE, "LaunchTime": T0 - timedelta(days=2),
            "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}


def test_a_registered_nodeclaim_becomes_a_registered_claim_read_from_the_nodeclaim_first() -> None:
    nc = karpenters_nodeclaim()
    node = Node.model_validate(karpenters_node(nc))
    claim = adoption.adopted_claim(nc, node, T0, {("m5.xlarge", "us-east-1b", "on-demand"): 0.192})
    assert (claim.name, claim.nodepool, claim.nodeclass, claim.status) == (
        "default-x7k2p", "default", "default", ClaimStatus.REGISTERED)
    assert (claim.instance_id, claim.instance_type, claim.capacity_type, claim.zone, claim.image_id) == (
        IID, "m5.xlarge", "on-demand", "us-east-1b", "ami-0karp")
    assert claim.node_name == NODE and claim.price == 0.192 and claim.max_pods == 58
    assert claim.created_at == claim.launched_at == T0 - timedelta(days=2)
    assert claim.registered_at == T0 - timedelta(days=2)  # its Registered condition's time
    # charged as a registered node: the node's capacity, and what only the NodeClaim reports
    assert claim.reserved == {"cpu": 4000, "memory": 15896 * 2**20, "pods": 58, "ephemeral-storage": 20 * GIB,
                              "nodes": 1}
    assert claim.allocatable["cpu"] == 3920 and claim.spec_hash is None and claim.pods == []
    assert claim.adopted is not None and claim.adopted.expire_after == "168h"
    assert (claim.adopted.uid, claim.adopted.nodepool_hash) == ("uid-default-x7k2p", POOL_HASH)


def test_a_nodeclaim_whose_node_has_not_registered_is_launched_for_the_registrar_to_finish() -> None:
    nc = karpenters_nodeclaim(registered=False)
    unregistered = Node.model_validate(karpenters_node(nc, unregistered=True))
    for node in (unregistered, None):
        claim = adoption.adopted_claim(nc, node, T0)
        assert claim.status == ClaimStatus.LAUNCHED and claim.node_name is None and claim.registered_at is None
        assert claim.reserved["cpu"] == 4000 and claim.reserved["nodes"] == 1


@pytest.mark.parametrize(("path", "change", "field"), [
    (("metadata", "labels"), {L.NODEPOOL: ""}, "metadata.labels['karpenter.sh/nodepool']"),
    (("spec", "nodeClassRef"), {"name": ""}, "spec.nodeClassRef.name"),
    (("status",), {"providerID": "aws:///us-east-1b/not-an-instance"}, "status.providerID"),
    (("status", "capacity"), {"memory": "lots"}, "status.capacity"),
    (("spec",), {"expireAfter": "1.5h"}, "spec.expireAfter"),
])
def test_a_nodeclaim_that_cannot_be_read_is_refused_naming_the_field(path: tuple[str, ...], change: dict[str, str],
                                                                      field: str) -> None:
    nc = karpenters_nodeclaim()
    target = nc
    for key in path:
        target = target[key]
    target.update(change)
    decisions = adoption.decide([nc], [], [Node.model_validate(karpenters_node(karpenters_nodeclaim()))], T0)
    (refused,) = decisions.refused
    assert not decisions.adoptions and refused.field == field and "default-x7k2p" in str(refused)


def test_what_the_ledger_knows_is_left_alone_and_what_has_no_instance_waits() -> None:
    known = karpenters_nodeclaim("carpools-own")
    same_instance = karpenters_nodeclaim("other-name", "i-0fff")
    unlaunched = karpenters_nodeclaim("no-instance")
    del unlaunched["status"]["providerID"]
    registered_without_node = karpenters_nodeclaim("node-gone", "i-0eee")
    claims = [Claim(name="carpools-own", nodepool="default", nodeclass="default", created_at=T0, instance_id="i-0aaa"),
              Claim(name="adopted-i-0fff", nodepool="default", nodeclass="default", created_at=T0, instance_id="i-0fff")]
    decisions = adoption.decide([known, same_instance, unlaunched, registered_without_node], claims, [], T0)
    assert decisions.adoptions == [] and decisions.refused == []
    assert set(decisions.waiting) == {"no-instance", "node-gone"}
    assert "status.providerID is empty" in decisions.waiting["no-instance"]


def _with(obj: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], **meta}}


def test_static_drift_follows_karpenters_hashes_or_is_not_checked() -> None:
    nc = karpenters_nodeclaim()
    spec_hash, why = adoption.drift_baseline(nc, POOL, CLASS, "carpool-hash")
    assert spec_hash == "carpool-hash" and f"NodePool default hash {POOL_HASH} (computed)" in why  # in step
    # the NodePool edited after Karpenter stopped: its annotation is stale, Karpenter's hash of it is not
    tainted = copy.deepcopy(_with(POOL, generation=2))
    tainted["spec"]["template"]["spec"]["taints"] = [{"key": "team", "effect": "NoSchedule"}]
    spec_hash, why = adoption.drift_baseline(nc, tainted, CLASS, "carpool-hash")
    assert spec_hash == adoption.KARPENTER_DRIFTED and "(computed)" in why
    # edited where the hash does not look (limits, requirements): still in step
    limited = copy.deepcopy(_with(POOL, generation=2))
    limited["spec"]["limits"] = {"cpu": "1000"}
    assert adoption.drift_baseline(nc, limited, CLASS, "carpool-hash")[0] == "carpool-hash"
    # the EC2NodeClass's hash is its annotation's, trusted only at an observed generation
    assert adoption.drift_baseline(nc, POOL, _with(CLASS, annotations=kb.hash_annotations(POOL_HASH, "9999")),
                                   "carpool-hash")[0] == adoption.KARPENTER_DRIFTED
    spec_hash, why = adoption.drift_baseline(nc, POOL, _with(CLASS, generation=4), "carpool-hash")
    assert spec_hash is None and "EC2NodeClass default changed since Karpenter last hashed it" in why
    bare = _with(nc, annotations={})
    spec_hash, why = adoption.drift_baseline(bare, POOL, CLASS, "carpool-hash")
    assert spec_hash is None and "the NodeClaim has no karpenter.sh/nodepool-hash" in why


def test_carpools_hash_gives_no_verdict_where_it_disagrees_with_the_one_karpenter_wrote() -> None:
    """A NodePool whose own annotation, at an observed generation, is not carpool's figure for the same
    spec: carpool's walk missed something of that template, or the annotation is stale; no verdict, as a
    wrong "drifted" would replace every node of the pool. Where carpool has no figure, the annotation
    decides."""
    nc = _with(karpenters_nodeclaim(), annotations=kb.hash_annotations("1111", "2222"))
    other = _with(POOL, annotations=kb.hash_annotations("1111", "2222"))
    spec_hash, why = adoption.drift_baseline(nc, other, CLASS, "carpool-hash")
    assert spec_hash is None and f"is not carpool's figure {POOL_HASH}" in why
    # not observed: the annotation is not Karpenter's for this spec; carpool's figure is not the NodeClaim's
    assert adoption.drift_baseline(nc, _with(other, generation=2), CLASS, "carpool-hash")[0] == adoption.KARPENTER_DRIFTED
    unhashable = copy.deepcopy(other)
    unhashable["spec"]["template"]["spec"]["taints"] = [{"key": "a", "effect": "NoSchedule",
                                                         "timeAdded": "2026-01-01T00:00:00Z"}]
    spec_hash, why = adoption.drift_baseline(nc, unhashable, CLASS, "carpool-hash")
    assert spec_hash == "carpool-hash" and "NodePool default hash 1111" in why and "(computed)" not in why
    spec_hash, why = adoption.drift_baseline(nc, _with(unhashable, generation=2), CLASS, "carpool-hash")
    assert spec_hash is None and "NodePool default changed since Karpenter last hashed it" in why


def test_an_adopted_node_expires_by_its_nodeclaims_expire_after_from_its_creation() -> None:
    from carpool.api.nodepool import NodePool

    nc = karpenters_nodeclaim(created=T0 - timedelta(hours=169))
    claim = adoption.adopted_claim(nc, Node.model_validate(karpenters_node(nc)), T0)
    node = Node.model_validate({**karpenters_node(nc), "metadata": {
        **karpenters_node(nc)["metadata"], "labels": {**karpenters_node(nc)["metadata"]["labels"],
                                                      **adoption.ownership_labels(CLUSTER, claim)}}})
    (candidate,) = candidates.build([node], [], [claim], [], CLUSTER, T0).candidates
    pool = NodePool.model_validate({"metadata": {"name": "default"}, "spec": {"template": {"spec": {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": [], "expireAfter": "720h"}}}})
    # the pool says 720h now; the NodeClaim was created under 168h and is 169h old
    assert expiry.expired(candidate, pool, T0) == f"node {NODE} is 169h old; expireAfter is 168h"
    assert expiry.expired(candidate, pool, T0 - timedelta(hours=2)) is None


def _deps(nodeclaims: list[dict[str, Any]], nodes: list[dict[str, Any]], instances: list[dict[str, Any]],
          claims: list[Claim] | None = None) -> Any:
    deps = world(instances, nodes, claims or [], at=0)
    deps.compute = Tagging(deps.cluster, instances)
    deps.karpenter = deps.cluster
    deps.cluster.create_object(NODEPOOL, POOL)
    deps.cluster.create_object(EC2NODECLASS, {
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
        "spec": {"role": "KarpenterNodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                 "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
                 "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}]}})
    for nc in nodeclaims:
        created = deps.cluster.create_object(NODECLAIM, {k: v for k, v in nc.items() if k != "status"})
        deps.cluster.patch_status(NODECLAIM, created["metadata"]["name"], nc["status"])
    deps.config = Config()
    return deps


class Tagging(FakeEc2):
    """FakeEc2 that also tags (CreateTags), writing into the cluster's action log."""

    def tag_instance(self, instance_id: str, tags: dict[str, str]) -> None:
        self.cluster.actions.append((0.0, "tag", instance_id))
        inst = self.instances[instance_id]
        inst["Tags"] = [*inst["Tags"], *({"Key": k, "Value": v} for k, v in tags.items())]


class Config:
    def load(self) -> Any:
        from carpool.api.loader import Manifests

        return Manifests()


def test_the_step_adopts_before_the_sweep_so_nothing_is_terminated_and_the_node_is_carpools() -> None:
    nc = karpenters_nodeclaim()
    deps = _deps([nc], [karpenters_node(nc)], [karpenters_instance()])
    for i in range(5):
        deps.cluster.add_pod(bound_pod(f"web-{i}", NODE))
    summary = DisruptSummary()
    nodes = adopt.run(deps, T0, summary)
    decisions = cleanup.clean_up(deps, T0, summary, nodes=nodes)
    assert summary.adopted == [IID] and decisions.terminations == [] and decisions.adoptions == []
    stored = deps.ledger.get("default-x7k2p")
    assert stored is not None and stored.status == ClaimStatus.REGISTERED and stored.adopted is not None
    assert deps.ledger.usage()["default"]["nodes"] == 1
    verbs = [verb for _at, verb, _target in deps.cluster.actions]
    assert verbs == ["create-object", "create-object", "create-object", "tag", "patch-node"]
    labels = deps.cluster.get_node(NODE).labels
    assert labels[L.OWNED_BY] == CLUSTER and labels[L.CLAIM] == "default-x7k2p" and labels[L.NODEPOOL] == "default"
    tags = {t["Key"]: t["Value"] for t in deps.compute.instances[IID]["Tags"]}
    assert tags[L.TAG_MANAGED_BY] == CLUSTER and tags[L.TAG_NODECLAIM] == "default-x7k2p"
    assert deps.cluster.get_object(NODECLAIM, "default-x7k2p") is not None  # the NodeClaim stays
    assert all(p.spec.node_name == NODE for p in deps.cluster.list_pods())  # no pod moved
    # as a candidate it is carpool's, static drift not checked (no config pair to hash), nothing else judged
    (candidate,) = candidates.build(deps.cluster.list_nodes(), [], deps.ledger.active(), [], CLUSTER, T0).candidates
    assert candidate.claim == "default-x7k2p" and candidate.adopted is not None and candidate.spec_hash is None
    again = DisruptSummary()
    adopt.run(deps, T0, again)
    assert again == DisruptSummary()  # the next run finds nothing of Karpenter's left to adopt


def test_the_step_reads_no_nodeclaims_while_no_node_is_karpenters() -> None:
    deps = _deps([], [], [])

    class Unreadable:
        def list_objects(self, kind: Any) -> Any:
            raise AssertionError(f"{kind.kind} listed with no Karpenter node in the cluster")

    deps.karpenter = Unreadable()
    assert adopt.run(deps, T0, DisruptSummary()) == []


def test_an_adoption_stopped_before_its_node_was_labelled_is_finished_next_run() -> None:
    nc = karpenters_nodeclaim()
    deps = _deps([nc], [karpenters_node(nc)], [karpenters_instance()])
    claim = adoption.adopted_claim(nc, deps.cluster.get_node(NODE), T0)
    deps.ledger.reserve(claim, None, T0, 900)  # the claim written, then the run died
    summary = DisruptSummary()
    adopt.run(deps, T0, summary)
    assert deps.cluster.get_node(NODE).labels[L.OWNED_BY] == CLUSTER and summary.adopted == []


def test_a_drift_baseline_taken_at_adoption_drifts_the_node_on_a_later_edit() -> None:
    from carpool.api.config import load_config
    from carpool.api.loader import NamedText

    text = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: prod}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: prod}}]
"""
    manifests = load_config([NamedText("config.yaml", text)])
    pool, klass = manifests.nodepools[0], manifests.nodeclasses[0]
    nc = karpenters_nodeclaim()
    decisions = adoption.decide([nc], [], [Node.model_validate(karpenters_node(nc))], T0, adoption.Surroundings(
        {"default": POOL}, {"default": CLASS}, {("default", "default"): drift.spec_hash(pool, klass)}))
    (adopting,) = decisions.adoptions
    assert adopting.claim.spec_hash == drift.spec_hash(pool, klass) and "Karpenter's hashes agree" in adopting.why
    edited = load_config([NamedText("config.yaml", text.replace("spec:\n      nodeClassRef",
                                                                  "spec:\n      taints: [{key: team, effect: NoSchedule}]\n      nodeClassRef"))])
    assert drift.spec_hash(edited.nodepools[0], klass) != adopting.claim.spec_hash


def test_the_registrar_finishes_the_registration_karpenter_began_on_an_adopted_claim() -> None:
    """A NodeClaim Karpenter launched whose node had not registered when Karpenter stopped: adopted as
    LAUNCHED, its node (still `karpenter.sh/unregistered`) is registered by carpool's registrar as its own
    nodes are (Karpenter's `lifecycle/registration.go` would have done the same)."""
    from tests.unit.app.test_app_register import UNREGISTERED, deps_for, join

    from carpool.app import register

    deps = deps_for()
    nc = karpenters_nodeclaim(registered=False, iid="i-1")
    name = join(deps, "i-1", ready=True, owned=False, taints=[UNREGISTERED])
    claim = adoption.adopted_claim(nc, deps.cluster.get_node(name), T0)
    assert claim.status == ClaimStatus.LAUNCHED
    deps.ledger.reserve(claim, None, T0, 900)
    summary = register.RegisterSummary()
    register.reconcile(name, deps, summary)
    node = deps.cluster.get_node(name)
    assert node is not None and summary.registered == [name]
    assert L.UNREGISTERED_TAINT not in [t.key for t in node.spec.taints]
    assert node.labels[L.CLAIM] == claim.name and node.labels[L.OWNED_BY] == "demo"
    stored = deps.ledger.get(claim.name)
    assert stored is not None and stored.status == ClaimStatus.REGISTERED and stored.node_name == name
