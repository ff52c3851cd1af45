"""A claim's NodeClaim as Karpenter v1.14.1 would write it (`carpool.nodeclaims`): every spec field from the
NodePool template, the labels and annotations, the owner and finalizer, status and conditions with
operatorpkg's semantics, and the patch one read needs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from carpool import labels, nodeclaims
from carpool.api.k8s import Node
from carpool.api.nodepool import NodePool
from carpool.nodeclaims import ClaimFacts
from carpool.requirements import Requirement, Requirements
from carpool.state.models import Claim, ClaimStatus, DisruptionProgress

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
CREATED = NOW - timedelta(minutes=10)
POOL = NodePool.model_validate({
    "metadata": {"name": "gpu"},
    "spec": {
        "template": {
            "metadata": {"labels": {"team": "ml"}, "annotations": {"example.com/a": "1"}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [
                    {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g5", "g6"]},
                    {"key": "node.kubernetes.io/instance-type", "operator": "Exists", "minValues": 2},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                    {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["2"]},
                ],
                "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
                "startupTaints": [{"key": "example.com/agent", "value": "boot", "effect": "NoExecute"}],
                "expireAfter": "336h",
                "terminationGracePeriod": "2h",
            },
        },
        "disruption": {"consolidateAfter": "5m"},
    },
})
TYPE_LABELS = {labels.ARCH: "amd64", labels.OS: "linux", labels.INSTANCE_FAMILY: "g5", labels.REGION: "us-east-1",
               labels.INSTANCE_CPU: "4"}


def claim(**kw: Any) -> Claim:
    base: dict[str, Any] = dict(
        name="gpu-0123456789", nodepool="gpu", nodeclass="default", created_at=CREATED, status=ClaimStatus.LAUNCHED,
        instance_id="i-1", instance_type="g5.xlarge", zone="us-east-1a", capacity_type="on-demand",
        image_id="ami-1", launched_at=CREATED + timedelta(seconds=3),
        instance_types=["g5.xlarge", "g5.2xlarge", "g6.xlarge"],
        requested={"cpu": 1500, "memory": 2 * 2**30, "pods": 3, "nvidia.com/gpu": 1},
        allocatable={"cpu": 3920, "memory": 14 * 2**30, "pods": 58, "nvidia.com/gpu": 1},
        labels={"carpool.dev/launch-template": "carpool/x/abc"})
    return Claim(**{**base, **kw})


def node(*, ready: bool = True, node_labels: dict[str, str] | None = None,
         taints: list[dict[str, str]] | None = None) -> Node:
    return Node.model_validate({
        "metadata": {"name": "ip-10-0-0-1.ec2.internal", "labels": node_labels or {},
                     "creationTimestamp": "2026-05-01T11:51:00Z"},
        "spec": {"providerID": "aws:///us-east-1a/i-1", "taints": taints or []},
        "status": {"capacity": {"cpu": "4", "memory": "15842Mi", "pods": "58", "nvidia.com/gpu": "1"},
                   "allocatable": {"cpu": "3920m", "memory": "14800Mi", "pods": "58", "nvidia.com/gpu": "1"},
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    })


def facts(c: Claim | None = None, **kw: Any) -> ClaimFacts:
    base: dict[str, Any] = dict(claim=c or claim(), cluster="prod", pool=POOL, now=NOW, pool_uid="uid-gpu",
                                type_labels=TYPE_LABELS, capacity={"cpu": 4000, "memory": 15 * 2**30, "pods": 58})
    return ClaimFacts(**{**base, **kw})


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in obj["status"]["conditions"]}


REGISTERED = {labels.REGISTERED: "true"}
INITIALIZED = {labels.REGISTERED: "true", labels.NODE_INITIALIZED: "true"}


# -- spec ---------------------------------------------------------------------------------------------
def test_every_spec_field_comes_from_the_nodepool_template() -> None:
    spec = nodeclaims.build(facts())["spec"]
    assert spec["nodeClassRef"] == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    assert spec["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    assert spec["startupTaints"] == [{"key": "example.com/agent", "value": "boot", "effect": "NoExecute"}]
    assert spec["expireAfter"] == "336h"
    assert spec["terminationGracePeriod"] == "2h"
    assert spec["resources"] == {"requests": {"cpu": "1500m", "memory": "2Gi", "nvidia.com/gpu": "1", "pods": "3"}}


def test_requirements_layer_the_template_with_its_labels_the_node_class_and_the_instance_types() -> None:
    reqs = {r["key"]: r for r in nodeclaims.build(facts())["spec"]["requirements"]}
    assert reqs[labels.INSTANCE_TYPE] == {"key": labels.INSTANCE_TYPE, "operator": "In",
                                          "values": ["g5.xlarge", "g5.2xlarge", "g6.xlarge"], "minValues": 2}
    assert reqs[labels.INSTANCE_FAMILY] == {"key": labels.INSTANCE_FAMILY, "operator": "In", "values": ["g5", "g6"]}
    assert reqs[labels.CAPACITY_TYPE]["values"] == ["on-demand"]
    assert reqs[labels.INSTANCE_CPU] == {"key": labels.INSTANCE_CPU, "operator": "Gt", "values": ["2"]}
    assert reqs[labels.NODEPOOL] == {"key": labels.NODEPOOL, "operator": "In", "values": ["gpu"]}
    assert reqs[labels.EC2NODECLASS] == {"key": labels.EC2NODECLASS, "operator": "In", "values": ["default"]}
    assert reqs["team"] == {"key": "team", "operator": "In", "values": ["ml"]}
    # carpool's bookkeeping is not a requirement, nor are the keys Karpenter keeps for its simulation
    assert not [k for k in reqs if k.startswith("carpool.dev/") or k in (labels.REGISTERED, labels.NODE_INITIALIZED)]


def test_the_planned_requirements_are_used_when_given_and_a_min_values_they_cannot_meet_is_dropped() -> None:
    planned = POOL.requirements().add(Requirement.in_(labels.ZONE, "us-east-1a", "us-east-1b"))
    one_type = claim(instance_types=["g5.xlarge"])
    reqs = {r["key"]: r for r in nodeclaims.build(facts(one_type, requirements=planned))["spec"]["requirements"]}
    assert reqs[labels.ZONE]["values"] == ["us-east-1a", "us-east-1b"]
    assert reqs[labels.INSTANCE_TYPE] == {"key": labels.INSTANCE_TYPE, "operator": "In", "values": ["g5.xlarge"]}


def test_at_most_600_instance_types_are_listed_cheapest_first() -> None:
    many = [f"t{i}.large" for i in range(700)]
    pool = POOL.model_copy(deep=True)
    pool.spec.template.spec.requirements = []
    spec = nodeclaims.build(facts(claim(instance_types=many), pool=pool))["spec"]
    (types,) = [r for r in spec["requirements"] if r["key"] == labels.INSTANCE_TYPE]
    assert types["values"] == many[:600]


def test_a_pool_without_grace_period_taints_or_requests_leaves_those_fields_out() -> None:
    pool = NodePool.model_validate({"metadata": {"name": "gpu"}, "spec": {"template": {"spec": {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": []}}}})
    spec = nodeclaims.build(facts(claim(requested={}), pool=pool))["spec"]
    assert set(spec) == {"requirements", "nodeClassRef", "expireAfter"}
    assert spec["expireAfter"] == "720h"  # the CRD's default


# -- metadata -----------------------------------------------------------------------------------------
def test_metadata_names_the_claim_owns_it_by_the_nodepool_and_holds_the_termination_finalizer() -> None:
    meta = nodeclaims.build(facts())["metadata"]
    assert meta["name"] == "gpu-0123456789"
    assert meta["finalizers"] == ["karpenter.sh/termination"]
    assert meta["ownerReferences"] == [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "gpu",
                                        "uid": "uid-gpu", "blockOwnerDeletion": True}]
    assert meta["annotations"]["example.com/a"] == "1"
    assert meta["annotations"]["karpenter.sh/nodepool-hash-version"] == "carpool-v1"
    assert meta["annotations"]["karpenter.sh/nodepool-hash"].isdigit()


def test_no_owner_reference_without_the_nodepool_object() -> None:
    assert "ownerReferences" not in nodeclaims.build(facts(pool_uid=None))["metadata"]


def test_labels_are_what_kubectl_get_nodeclaims_prints_and_what_the_node_gets() -> None:
    got = nodeclaims.build(facts())["metadata"]["labels"]
    assert got[labels.INSTANCE_TYPE] == "g5.xlarge"
    assert got[labels.CAPACITY_TYPE] == "on-demand"
    assert got[labels.ZONE] == "us-east-1a"
    assert got[labels.NODEPOOL] == "gpu"
    assert got[labels.EC2NODECLASS] == "default"
    assert got[labels.REGION] == "us-east-1" and got[labels.ARCH] == "amd64" and got["team"] == "ml"
    assert got[labels.OWNED_BY] == "prod"
    assert "carpool.dev/launch-template" not in got
    assert nodeclaims.is_carpools({"metadata": {"labels": got}}, "prod")
    assert not nodeclaims.is_carpools({"metadata": {"labels": {labels.NODEPOOL: "gpu"}}}, "prod")


def test_the_template_hash_moves_with_the_template_but_not_with_requirements_or_expiry() -> None:
    edited = POOL.model_copy(deep=True)
    edited.spec.template.spec.requirements = []
    edited.spec.template.spec.expire_after = "Never"
    assert nodeclaims.template_hash(edited) == nodeclaims.template_hash(POOL)
    edited.spec.template.metadata.labels["team"] = "infra"
    assert nodeclaims.template_hash(edited) != nodeclaims.template_hash(POOL)


# -- status -------------------------------------------------------------------------------------------
def test_a_launched_claim_is_launched_with_its_instance_and_awaits_its_node() -> None:
    obj = nodeclaims.build(facts())
    status = obj["status"]
    assert status["providerID"] == "aws:///us-east-1a/i-1"
    assert status["imageID"] == "ami-1"
    assert status["capacity"] == {"cpu": "4", "memory": "15Gi", "pods": "58"}
    assert status["allocatable"] == {"cpu": "3920m", "memory": "14Gi", "nvidia.com/gpu": "1", "pods": "58"}
    assert "nodeName" not in status
    got = conditions(obj)
    assert got["Launched"] == {"type": "Launched", "status": "True", "reason": "Launched", "message": "",
                               "lastTransitionTime": "2026-05-01T11:50:03Z", "observedGeneration": 1}
    assert (got["Registered"]["status"], got["Registered"]["reason"]) == ("Unknown", "NodeNotFound")
    assert got["Registered"]["message"] == "Node not registered with cluster"
    assert (got["Initialized"]["status"], got["Initialized"]["reason"]) == ("Unknown", "AwaitingReconciliation")
    assert got["Ready"]["status"] == "Unknown" and got["Ready"]["reason"] == "ReconcilingDependents"
    assert set(got["Ready"]["message"].split(", ")) == {"Registered=Unknown", "Initialized=Unknown"}
    assert [c["type"] for c in status["conditions"]][-1] == "Ready"
    assert not {"Drifted", "Consolidatable", "DisruptionReason"} & set(got)


def test_a_registered_node_names_itself_and_its_own_capacity_replaces_the_estimate() -> None:
    obj = nodeclaims.build(facts(node=node(node_labels=REGISTERED, taints=[
        {"key": "example.com/agent", "value": "boot", "effect": "NoExecute"}])))
    status = obj["status"]
    assert status["nodeName"] == "ip-10-0-0-1.ec2.internal"
    assert status["capacity"] == {"cpu": "4", "memory": "15842Mi", "nvidia.com/gpu": "1", "pods": "58"}
    assert status["allocatable"]["memory"] == "14800Mi"
    got = conditions(obj)
    assert got["Registered"]["status"] == "True"
    assert got["Registered"]["lastTransitionTime"] == "2026-05-01T11:51:00Z"
    assert got["Initialized"]["reason"] == "StartupTaintsExist"
    assert got["Initialized"]["message"] == 'StartupTaint "example.com/agent=boot:NoExecute" still exists'


def test_a_node_not_ready_is_said_with_karpenters_reason() -> None:
    got = conditions(nodeclaims.build(facts(node=node(ready=False, node_labels=REGISTERED))))
    assert (got["Initialized"]["reason"], got["Initialized"]["message"]) == ("NodeNotReady", "Node status is NotReady")


def test_an_initialized_node_makes_the_nodeclaim_ready() -> None:
    c = claim(status=ClaimStatus.REGISTERED, node_name="ip-10-0-0-1.ec2.internal", registered_at=NOW)
    got = conditions(nodeclaims.build(facts(c, node=node(node_labels=INITIALIZED))))
    assert {t: got[t]["status"] for t in ("Launched", "Registered", "Initialized", "Ready")} == dict.fromkeys(
        ("Launched", "Registered", "Initialized", "Ready"), "True")
    assert got["Ready"]["reason"] == "Ready"


def test_consolidatable_once_consolidate_after_passed_since_the_pods_last_changed() -> None:
    quiet = claim(status=ClaimStatus.REGISTERED, registered_at=NOW - timedelta(hours=1),
                  pods_changed_at=NOW - timedelta(minutes=6))
    got = conditions(nodeclaims.build(facts(quiet, node=node(node_labels=INITIALIZED))))
    assert got["Consolidatable"]["status"] == "True"
    assert got["Consolidatable"]["lastTransitionTime"] == "2026-05-01T11:59:00Z"
    busy = claim(status=ClaimStatus.REGISTERED, registered_at=NOW - timedelta(hours=1),
                 pods_changed_at=NOW - timedelta(minutes=4))
    assert "Consolidatable" not in conditions(nodeclaims.build(facts(busy, node=node(node_labels=INITIALIZED))))
    never = POOL.model_copy(deep=True)
    never.spec.disruption.consolidate_after = "Never"
    assert "Consolidatable" not in conditions(nodeclaims.build(facts(quiet, pool=never,
                                                                     node=node(node_labels=INITIALIZED))))


def test_a_disruption_in_progress_and_a_drift_are_conditions() -> None:
    c = claim(status=ClaimStatus.REGISTERED, registered_at=NOW,
              disruption=DisruptionProgress(reason="Drifted", action="replace", decided_at=NOW - timedelta(minutes=1),
                                            termination_deadline=NOW + timedelta(hours=2)))
    obj = nodeclaims.build(facts(c, node=node(node_labels=INITIALIZED), drift="NodePoolDrifted"))
    got = conditions(obj)
    assert (got["Drifted"]["status"], got["Drifted"]["reason"]) == ("True", "NodePoolDrifted")
    assert (got["DisruptionReason"]["status"], got["DisruptionReason"]["reason"]) == ("True", "Drifted")
    assert got["DisruptionReason"]["lastTransitionTime"] == "2026-05-01T11:59:00Z"
    assert obj["metadata"]["annotations"]["karpenter.sh/nodeclaim-termination-timestamp"] == "2026-05-01T14:00:00Z"


def test_the_creation_body_has_no_status() -> None:
    body = nodeclaims.creation_body(nodeclaims.build(facts()))
    assert "status" not in body and body["kind"] == "NodeClaim" and body["apiVersion"] == "karpenter.sh/v1"


# -- changes against one read -------------------------------------------------------------------------
def stored(obj: dict[str, Any], generation: int = 1) -> dict[str, Any]:
    out = {**obj, "metadata": {**obj["metadata"], "generation": generation, "resourceVersion": "7", "uid": "u1"}}
    return out


def test_an_object_that_says_what_the_claim_says_needs_nothing() -> None:
    current = stored(nodeclaims.build(facts()))
    assert not nodeclaims.changes(current, facts())


def test_registration_patches_the_status_and_keeps_the_unchanged_conditions_transition_times() -> None:
    current = stored(nodeclaims.build(facts()))
    later = facts(node=node(node_labels=REGISTERED), now=NOW + timedelta(minutes=1))
    change = nodeclaims.changes(current, later)
    assert change.metadata is None
    assert change.status is not None and change.status["nodeName"] == "ip-10-0-0-1.ec2.internal"
    got = {c["type"]: c for c in change.status["conditions"]}
    assert got["Registered"]["status"] == "True"
    assert got["Launched"]["lastTransitionTime"] == conditions(current)["Launched"]["lastTransitionTime"]
    # the status Unknown stayed Unknown: its transition time is kept although the reason moved on
    assert got["Initialized"]["lastTransitionTime"] == conditions(current)["Initialized"]["lastTransitionTime"]


def test_conditions_carry_the_objects_generation() -> None:
    current = stored(nodeclaims.build(facts()), generation=3)
    change = nodeclaims.changes(current, facts())
    assert change.status is not None
    assert {c["observedGeneration"] for c in change.status["conditions"]} == {3}


def test_a_lost_finalizer_or_owner_is_put_back_under_the_read_version_and_carpools_labels_set() -> None:
    current = stored(nodeclaims.build(facts(pool_uid=None)))
    current["metadata"]["finalizers"] = ["example.com/other"]
    current["metadata"]["labels"] = {**current["metadata"]["labels"], labels.ZONE: "wrong", "user": "kept"}
    change = nodeclaims.changes(current, facts())
    assert change.locked
    assert change.metadata == {
        "labels": {labels.ZONE: "us-east-1a"},
        "finalizers": ["example.com/other", "karpenter.sh/termination"],
        "ownerReferences": [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "gpu", "uid": "uid-gpu",
                             "blockOwnerDeletion": True}],
    }


def test_no_finalizer_is_added_to_an_object_being_deleted() -> None:
    current = stored(nodeclaims.build(facts()))
    current["metadata"]["finalizers"] = []
    current["metadata"]["deletionTimestamp"] = "2026-05-01T11:59:00Z"
    assert nodeclaims.changes(current, facts()).metadata is None


def test_a_cleared_disruption_removes_its_condition() -> None:
    disrupted = claim(disruption=DisruptionProgress(reason="Underutilized", action="delete", decided_at=NOW))
    current = stored(nodeclaims.build(facts(disrupted)))
    change = nodeclaims.changes(current, facts())
    assert change.status is not None
    assert "DisruptionReason" not in {c["type"] for c in change.status["conditions"]}


def test_requirements_given_as_a_set_of_keys_round_trip() -> None:
    reqs = nodeclaims.build(facts())["spec"]["requirements"]
    assert Requirements.from_specs(reqs)[labels.INSTANCE_TYPE].has("g6.xlarge")
