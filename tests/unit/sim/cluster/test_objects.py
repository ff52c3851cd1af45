"""Karpenter's objects in the simulated cluster (`carpool.sim.cluster.objects`), held to what kube-apiserver
does with Karpenter's CRDs loaded: create, merge patch, the status subresource, delete with finalizers, the
watch; the garbage collector (`carpool.sim.cluster.garbage`); and Node deletion with finalizers."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from carpool.karpenter_objects import (
    EC2NODECLASS,
    NODECLAIM,
    NODEPOOL,
    TERMINATION_FINALIZER,
    KindNotServed,
    ObjectConflict,
    ObjectGone,
    ObjectInvalid,
)
from carpool.sim.cluster.objects import GENERATE_NAME_ALPHABET

from ..conftest import make_node, make_pod

OWNER = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}]


def nodepool(name: str = "default", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}},
                **spec}}


def nodeclaim(name: str, pool: dict[str, Any] | None = None, finalizers: list[str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"karpenter.sh/nodepool": "default"}}
    if pool is not None:
        meta["ownerReferences"] = [owner_ref(pool)]
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": meta, "spec": {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}]}}


def owner_ref(owner: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "blockOwnerDeletion": True}


def events(cluster, since: str, kind: str = "NodePool") -> list[tuple[str, str, str]]:
    return [(e.type, e.kind, e.obj["metadata"]["name"]) for e in cluster.watch({kind: since}, 0)
            if e.kind not in ("Pod", "Node")]


# -- create ---------------------------------------------------------------------------------------------
def test_create_sets_server_metadata_applies_defaults_and_drops_status(cluster, clock):
    clock.advance(90)
    given = {**nodepool(), "status": {"nodes": 3}}
    given["metadata"]["uid"] = "mine"
    stored = cluster.create_object(NODEPOOL, given)
    meta = stored["metadata"]
    assert meta["generation"] == 1 and meta["resourceVersion"] == cluster.resource_version
    assert meta["uid"] != "mine" and len(meta["uid"]) == 36
    assert meta["creationTimestamp"] == "2025-01-06T09:01:30Z"
    assert "status" not in stored
    # the CRD's defaults, at every level
    assert stored["spec"]["disruption"] == {"consolidateAfter": "0s", "budgets": [{"nodes": "10%"}],
                                            "consolidationPolicy": "WhenEmptyOrUnderutilized"}
    assert stored["spec"]["template"]["spec"]["expireAfter"] == "720h"
    assert cluster.get_object(NODEPOOL, "default") == stored


def test_create_prunes_fields_the_schema_does_not_name(cluster):
    given = nodepool()
    given["spec"]["template"]["spec"]["kubelet"] = {"maxPods": 10}  # a v1beta1 field, not in v1's NodePool
    stored = cluster.create_object(NODEPOOL, given)
    assert "kubelet" not in stored["spec"]["template"]["spec"]


def test_create_of_a_name_taken_is_already_exists(cluster):
    cluster.create_object(NODEPOOL, nodepool())
    with pytest.raises(ObjectConflict, match='nodepools.karpenter.sh "default" already exists'):
        cluster.create_object(NODEPOOL, nodepool())


def test_generate_name_adds_five_random_characters(cluster):
    given = nodepool()
    given["metadata"] = {"generateName": "team-"}
    first, second = (cluster.create_object(NODEPOOL, copy.deepcopy(given))["metadata"]["name"] for _ in range(2))
    for name in (first, second):
        assert name.startswith("team-") and len(name) == 10
        assert set(name[5:]) <= set(GENERATE_NAME_ALPHABET)
    assert first != second


@pytest.mark.parametrize(("metadata", "words"), [
    ({}, "metadata.name: Required value: name or generateName is required"),
    ({"name": "Team_A"}, 'metadata.name: Invalid value: "Team_A": a lowercase RFC 1123 subdomain'),
])
def test_create_without_a_valid_name_is_invalid(cluster, metadata, words):
    given = nodepool()
    given["metadata"] = metadata
    with pytest.raises(ObjectInvalid, match=words.replace("(", r"\(")):
        cluster.create_object(NODEPOOL, given)
    assert cluster.list_objects(NODEPOOL).items == []


def test_create_refuses_what_the_schema_refuses_naming_each_field(cluster):
    given = nodepool(weight=1000)
    del given["spec"]["template"]["spec"]["nodeClassRef"]
    with pytest.raises(ObjectInvalid) as refused:
        cluster.create_object(NODEPOOL, given)
    message = refused.value.message
    assert message.startswith("[") and "spec.weight: Invalid value: 1000: should be less than or equal to 100" in message
    assert "spec.template.spec.nodeClassRef: Required value" in message
    assert cluster.get_object(NODEPOOL, "default") is None


def test_create_applies_the_crds_cel_rules(cluster):
    claim = nodeclaim("c1")
    claim["spec"]["requirements"] = [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["x"]}]
    with pytest.raises(ObjectInvalid, match='spec.requirements\\[0\\].key: Invalid value: "string": label "kubernetes.io/hostname" is restricted'):
        cluster.create_object(NODECLAIM, claim)


def test_a_kind_whose_crd_is_not_installed_is_not_served(cluster):
    cluster.karpenter.installed.discard(EC2NODECLASS)
    with pytest.raises(KindNotServed, match="ec2nodeclasses.karpenter.k8s.aws/v1"):
        cluster.list_objects(EC2NODECLASS)
    with pytest.raises(KindNotServed):
        cluster.create_object(EC2NODECLASS, {"metadata": {"name": "x"}, "spec": {}})
    with pytest.raises(KindNotServed):
        list(cluster.watch({"ec2nodeclasses": ""}, 0))
    assert cluster.list_objects(NODEPOOL).items == []  # the others are


# -- merge patch ------------------------------------------------------------------------------------------
def test_spec_patch_bumps_generation_metadata_patch_does_not(cluster):
    cluster.create_object(NODEPOOL, nodepool())
    labelled = cluster.patch_object(NODEPOOL, "default", {"metadata": {"labels": {"team": "a"}}})
    assert labelled["metadata"]["generation"] == 1 and labelled["metadata"]["labels"] == {"team": "a"}
    weighted = cluster.patch_object(NODEPOOL, "default", {"spec": {"weight": 10}})
    assert weighted["metadata"]["generation"] == 2 and weighted["spec"]["weight"] == 10
    assert int(weighted["metadata"]["resourceVersion"]) > int(labelled["metadata"]["resourceVersion"])
    # a merge patch: null removes, the rest stays
    unweighted = cluster.patch_object(NODEPOOL, "default", {"spec": {"weight": None}})
    assert "weight" not in unweighted["spec"] and unweighted["metadata"]["generation"] == 3
    assert unweighted["spec"]["template"] == weighted["spec"]["template"]


def test_a_patch_that_changes_nothing_writes_nothing(cluster):
    stored = cluster.create_object(NODEPOOL, nodepool())
    again = cluster.patch_object(NODEPOOL, "default", {"spec": {"disruption": {"consolidateAfter": "0s"}}})
    assert again == stored and cluster.resource_version == stored["metadata"]["resourceVersion"]


def test_patch_ignores_status_and_the_servers_own_metadata(cluster):
    stored = cluster.create_object(NODEPOOL, nodepool())
    cluster.patch_status(NODEPOOL, "default", {"nodes": 2})
    patched = cluster.patch_object(NODEPOOL, "default", {"status": {"nodes": 9}, "metadata": {
        "uid": "other", "generation": 40, "creationTimestamp": "2020-01-01T00:00:00Z", "labels": {"a": "b"}}})
    assert patched["status"] == {"nodes": 2}
    assert patched["metadata"]["uid"] == stored["metadata"]["uid"] and patched["metadata"]["generation"] == 1
    assert patched["metadata"]["creationTimestamp"] == stored["metadata"]["creationTimestamp"]


def test_patch_with_a_stale_resource_version_is_a_conflict(cluster):
    stored = cluster.create_object(NODEPOOL, nodepool())
    read = stored["metadata"]["resourceVersion"]
    cluster.patch_object(NODEPOOL, "default", {"spec": {"weight": 5}}, resource_version=read)
    with pytest.raises(ObjectConflict, match="the object has been modified"):
        cluster.patch_object(NODEPOOL, "default", {"spec": {"weight": 6}}, resource_version=read)
    with pytest.raises(ObjectConflict):  # the same precondition carried in the patch itself
        cluster.patch_object(NODEPOOL, "default", {"metadata": {"resourceVersion": read}, "spec": {"weight": 7}})
    assert cluster.get_object(NODEPOOL, "default")["spec"]["weight"] == 5


def test_patch_of_an_object_that_is_gone(cluster):
    with pytest.raises(ObjectGone, match="NodePool 'nope' not found"):
        cluster.patch_object(NODEPOOL, "nope", {"spec": {"weight": 1}})
    with pytest.raises(ObjectGone):
        cluster.patch_status(NODEPOOL, "nope", {"nodes": 1})


def test_patch_is_judged_by_the_schema_and_loses_nothing_when_refused(cluster):
    cluster.create_object(NODEPOOL, nodepool())
    with pytest.raises(ObjectInvalid, match="spec.weight: Invalid value: 0: should be greater than or equal to 1"):
        cluster.patch_object(NODEPOOL, "default", {"spec": {"weight": 0}})
    assert "weight" not in cluster.get_object(NODEPOOL, "default")["spec"]


def test_transition_rules_of_the_crds(cluster):
    pool = cluster.create_object(NODEPOOL, nodepool())
    with pytest.raises(ObjectInvalid, match="nodeClassRef.kind is immutable"):
        cluster.patch_object(NODEPOOL, "default", {"spec": {"template": {"spec": {"nodeClassRef": {"kind": "Other"}}}}})
    cluster.create_object(NODECLAIM, nodeclaim("c1", pool))
    with pytest.raises(ObjectInvalid, match="spec: Invalid value: \"object\": spec is immutable"):
        cluster.patch_object(NODECLAIM, "c1", {"spec": {"expireAfter": "1h"}})
    relabelled = cluster.patch_object(NODECLAIM, "c1", {"metadata": {"labels": {"x": "y"}}})  # metadata may change
    assert relabelled["metadata"]["labels"]["x"] == "y"


# -- the status subresource -------------------------------------------------------------------------------
def test_status_patch_changes_only_status(cluster):
    cluster.create_object(NODEPOOL, nodepool())
    status = {"nodes": 2, "resources": {"cpu": "4"}, "conditions": [{
        "type": "Ready", "status": "True", "reason": "Ready", "message": "", "observedGeneration": 1,
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    written = cluster.patch_status(NODEPOOL, "default", status)
    assert written["status"] == status and written["metadata"]["generation"] == 1
    assert "weight" not in written["spec"]
    merged = cluster.patch_status(NODEPOOL, "default", {"nodes": 3})
    assert merged["status"]["nodes"] == 3 and merged["status"]["resources"] == {"cpu": "4"}


def test_status_patch_is_judged_by_the_status_schema(cluster):
    cluster.create_object(NODEPOOL, nodepool())
    with pytest.raises(ObjectInvalid, match="status.conditions\\[0\\].status: Unsupported value"):
        cluster.patch_status(NODEPOOL, "default", {"conditions": [{
            "type": "Ready", "status": "Maybe", "reason": "R", "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]})


def test_status_patch_with_a_stale_resource_version_is_a_conflict(cluster):
    read = cluster.create_object(NODEPOOL, nodepool())["metadata"]["resourceVersion"]
    cluster.patch_object(NODEPOOL, "default", {"metadata": {"labels": {"a": "b"}}})
    with pytest.raises(ObjectConflict):
        cluster.patch_status(NODEPOOL, "default", {"nodes": 1}, resource_version=read)


# -- delete ---------------------------------------------------------------------------------------------
def test_delete_without_finalizers_removes_the_object(cluster):
    since = cluster.create_object(NODEPOOL, nodepool())["metadata"]["resourceVersion"]
    cluster.delete_object(NODEPOOL, "default")
    assert cluster.get_object(NODEPOOL, "default") is None
    assert events(cluster, since) == [("DELETED", "NodePool", "default")]
    cluster.delete_object(NODEPOOL, "default")  # gone: no error


def test_delete_with_finalizers_marks_the_object_until_the_last_goes(cluster, clock):
    pool = cluster.create_object(NODEPOOL, nodepool())
    claim = cluster.create_object(NODECLAIM, nodeclaim("c1", pool, finalizers=[TERMINATION_FINALIZER, "x.io/other"]))
    since = claim["metadata"]["resourceVersion"]
    clock.advance(5)
    cluster.delete_object(NODECLAIM, "c1")
    marked = cluster.get_object(NODECLAIM, "c1")
    assert marked["metadata"]["deletionTimestamp"] == "2025-01-06T09:00:05Z"
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 0
    assert marked["metadata"]["generation"] == 2  # markAsDeleting bumps it once
    at = cluster.resource_version
    clock.advance(5)
    cluster.delete_object(NODECLAIM, "c1")  # a second delete changes nothing
    assert cluster.get_object(NODECLAIM, "c1") == marked and cluster.resource_version == at
    assert events(cluster, since, "NodeClaim") == [("MODIFIED", "NodeClaim", "c1")]

    with pytest.raises(ObjectInvalid, match='Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers \\[\\]string\\{"y.io/new"\\}'):
        cluster.patch_object(NODECLAIM, "c1", {"metadata": {"finalizers": [TERMINATION_FINALIZER, "x.io/other", "y.io/new"]}})
    kept = cluster.patch_object(NODECLAIM, "c1", {"metadata": {"finalizers": [TERMINATION_FINALIZER]}})
    assert kept["metadata"]["finalizers"] == [TERMINATION_FINALIZER] and cluster.get_object(NODECLAIM, "c1") is not None
    at = cluster.resource_version
    answer = cluster.patch_object(NODECLAIM, "c1", {"metadata": {"finalizers": None}})
    assert "finalizers" not in answer["metadata"]  # the answer: the object as the update left it
    assert cluster.get_object(NODECLAIM, "c1") is None
    deleted = [e for e in cluster.watch({"NodeClaim": at}, 0) if e.kind == "NodeClaim"]
    assert [e.type for e in deleted] == ["DELETED"]
    assert deleted[0].obj["metadata"]["finalizers"] == [TERMINATION_FINALIZER]  # the last state stored


def test_finalizers_may_still_be_added_before_deletion(cluster):
    cluster.create_object(NODEPOOL, nodepool())
    added = cluster.patch_object(NODEPOOL, "default", {"metadata": {"finalizers": ["x.io/keep"]}})
    assert added["metadata"]["finalizers"] == ["x.io/keep"]


# -- list, get, watch -------------------------------------------------------------------------------------
def test_list_is_in_name_order_at_the_clusters_resource_version(cluster):
    for name in ("b", "c", "a"):
        cluster.create_object(NODEPOOL, nodepool(name))
    listed = cluster.list_objects(NODEPOOL)
    assert [o["metadata"]["name"] for o in listed.items] == ["a", "b", "c"]
    assert listed.resource_version == cluster.resource_version
    listed.items[0]["spec"]["weight"] = 3  # a copy: the store is not changed through it
    assert "weight" not in cluster.get_object(NODEPOOL, "a")["spec"]


def test_one_resource_version_sequence_with_pods_and_nodes(cluster):
    cluster.add_node(make_node("n1"))
    pool = cluster.create_object(NODEPOOL, nodepool())
    cluster.add_pod(make_pod("web-0"))
    assert int(pool["metadata"]["resourceVersion"]) == int(cluster.resource_version) - 1


def test_watch_delivers_karpenter_kinds_only_when_named(cluster):
    since = cluster.resource_version
    cluster.create_object(NODEPOOL, nodepool())
    cluster.add_node(make_node("n1"))
    assert [e.kind for e in cluster.watch({"pods": since, "nodes": since}, 0)] == ["Node"]
    named = list(cluster.watch({"pods": since, "nodes": since, "nodepools": since}, 0))
    assert [(e.type, e.kind) for e in named] == [("ADDED", "NodePool"), ("ADDED", "Node")]
    assert isinstance(named[0].obj, dict) and named[0].resource_version == named[0].obj["metadata"]["resourceVersion"]
    named[0].obj["spec"]["weight"] = 3  # each reader its own copy
    assert "weight" not in cluster.get_object(NODEPOOL, "default")["spec"]


def test_watch_of_a_kind_named_without_a_version_starts_with_every_object(cluster):
    cluster.create_object(NODEPOOL, nodepool("a"))
    cluster.create_object(EC2NODECLASS, {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
                                         "metadata": {"name": "default"}, "spec": {
                                             "role": "KarpenterNodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                                             "subnetSelectorTerms": [{"tags": {"a": "b"}}],
                                             "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}})
    now = cluster.resource_version
    got = [(e.type, e.kind) for e in cluster.watch({"Pod": now, "Node": now, "NodePool": "", "EC2NodeClass": ""}, 0)]
    assert got == [("ADDED", "NodePool"), ("ADDED", "EC2NodeClass")]


# -- apply ----------------------------------------------------------------------------------------------
def test_apply_creates_then_replaces_the_spec_keeping_status_and_finalizers(cluster):
    first = cluster.apply_object(nodepool(weight=5, limits={"cpu": "100"}))
    assert first["metadata"]["generation"] == 1
    cluster.patch_status(NODEPOOL, "default", {"nodes": 1})
    cluster.patch_object(NODEPOOL, "default", {"metadata": {"finalizers": ["x.io/keep"]}})
    edited = nodepool(weight=7)
    edited["metadata"]["labels"] = {"team": "a"}
    second = cluster.apply_object(edited)
    assert second["spec"]["weight"] == 7 and "limits" not in second["spec"]  # replaced, not merged
    assert second["spec"]["disruption"]["consolidateAfter"] == "0s"  # defaulted again
    assert second["status"] == {"nodes": 1} and second["metadata"]["finalizers"] == ["x.io/keep"]
    assert second["metadata"]["labels"] == {"team": "a"} and second["metadata"]["generation"] == 2
    assert cluster.apply_object(edited) == second  # applying again changes nothing


# -- garbage collection -------------------------------------------------------------------------------------
def test_deleting_a_nodepool_deletes_its_nodeclaims(cluster):
    pool = cluster.create_object(NODEPOOL, nodepool())
    other = cluster.create_object(NODEPOOL, nodepool("other"))
    cluster.create_object(NODECLAIM, nodeclaim("plain", pool))
    cluster.create_object(NODECLAIM, nodeclaim("held", pool, finalizers=[TERMINATION_FINALIZER]))
    cluster.create_object(NODECLAIM, nodeclaim("elsewhere", other))
    cluster.delete_object(NODEPOOL, "default")
    assert cluster.get_object(NODECLAIM, "plain") is None
    held = cluster.get_object(NODECLAIM, "held")
    assert held is not None and held["metadata"]["deletionTimestamp"]  # a finalizer holds it, being deleted
    assert cluster.get_object(NODECLAIM, "elsewhere") is not None
    assert cluster.garbage.deleted == [("NodeClaim", "plain"), ("NodeClaim", "held")]


def test_owners_are_matched_by_uid(cluster):
    pool = cluster.create_object(NODEPOOL, nodepool())
    cluster.create_object(NODECLAIM, nodeclaim("c1", pool))
    cluster.delete_object(NODEPOOL, "default")
    cluster.create_object(NODEPOOL, nodepool())  # the same name, another object
    stale = dict(pool)
    assert cluster.get_object(NODECLAIM, "c1") is None
    created = cluster.create_object(NODECLAIM, nodeclaim("c2", stale))  # names the old uid: no owner
    assert created["metadata"]["name"] == "c2" and cluster.get_object(NODECLAIM, "c2") is None


def test_a_dependent_with_an_owner_left_loses_only_the_reference_to_the_gone_one(cluster):
    a, b = cluster.create_object(NODEPOOL, nodepool("a")), cluster.create_object(NODEPOOL, nodepool("b"))
    claim = nodeclaim("c1", a)
    claim["metadata"]["ownerReferences"].append(owner_ref(b))
    cluster.create_object(NODECLAIM, claim)
    cluster.delete_object(NODEPOOL, "a")
    kept = cluster.get_object(NODECLAIM, "c1")
    assert [r["name"] for r in kept["metadata"]["ownerReferences"]] == ["b"]


def test_deleting_a_nodeclaim_deletes_its_node_once_the_claim_is_gone(cluster):
    pool = cluster.create_object(NODEPOOL, nodepool())
    claim = cluster.create_object(NODECLAIM, nodeclaim("c1", pool, finalizers=[TERMINATION_FINALIZER]))
    cluster.add_node(make_node("n1"))
    cluster.add_pod(make_pod("web-0", owners=OWNER), controller="Deployment/default/web")
    cluster.bind()
    answer = cluster.merge_patch_node("n1", {"metadata": {"ownerReferences": [owner_ref(claim)]}})
    assert answer.code == 200
    cluster.delete_object(NODECLAIM, "c1")
    assert cluster.node_raw("n1") is not None  # the claim is only being deleted
    cluster.patch_object(NODECLAIM, "c1", {"metadata": {"finalizers": None}})
    assert cluster.node_raw("n1") is None and ("Node", "n1") in cluster.garbage.deleted
    assert [p.name for p in cluster.list_pods()] != ["web-0"]  # the pod went with its node; recreated pending


def test_a_node_naming_a_nodeclaim_that_does_not_exist_is_collected(cluster):
    cluster.add_node(make_node("n1"))
    ref = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": "ghost", "uid": "0000"}
    cluster.merge_patch_node("n1", {"metadata": {"ownerReferences": [ref]}})
    assert cluster.node_raw("n1") is None


def test_owners_of_kinds_the_collector_does_not_know_are_left_alone(cluster):
    cluster.add_node(make_node("n1"))
    ref = {"apiVersion": "example.com/v1", "kind": "Machine", "name": "m", "uid": "0000"}
    cluster.merge_patch_node("n1", {"metadata": {"ownerReferences": [ref]}})
    cluster.karpenter.installed.discard(NODECLAIM)
    cluster.merge_patch_node("n1", {"metadata": {"ownerReferences": [
        ref, {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": "c", "uid": "1"}]}})
    assert cluster.node_raw("n1") is not None


# -- Node deletion with finalizers --------------------------------------------------------------------------
def with_finalizer(name: str) -> dict[str, Any]:
    node = make_node(name)
    node["metadata"]["finalizers"] = [TERMINATION_FINALIZER]
    return node


def test_a_node_with_finalizers_stays_being_deleted_and_keeps_its_pods(cluster, clock):
    cluster.add_node(with_finalizer("n1"))
    cluster.add_pod(make_pod("web-0", owners=OWNER), controller="Deployment/default/web")
    cluster.bind()
    clock.advance(3)
    cluster.delete_node("n1")
    node = cluster.node_raw("n1")
    assert node is not None and node["metadata"]["deletionTimestamp"] == "2025-01-06T09:00:03Z"
    assert node["metadata"]["deletionGracePeriodSeconds"] == 0
    assert cluster.pods["default/web-0"].raw["spec"]["nodeName"] == "n1"  # pods stay until the node goes
    at = cluster.resource_version
    cluster.delete_node("n1")
    cluster.remove_node("n1")  # the cloud node lifecycle controller's DELETE: the same deletion
    assert cluster.resource_version == at
    cluster.add_pod(make_pod("web-9"))
    assert cluster.bind().bound == 0  # a node being deleted takes no new pods


def test_removing_a_nodes_last_finalizer_deletes_it_and_then_its_pods(cluster):
    cluster.add_node(with_finalizer("n1"))
    cluster.add_pod(make_pod("web-0", owners=OWNER), controller="Deployment/default/web")
    cluster.bind()
    cluster.delete_node("n1")
    since = cluster.resource_version
    refused = cluster.merge_patch_node("n1", {"metadata": {"finalizers": [TERMINATION_FINALIZER, "x.io/new"]}})
    assert refused.code == 422 and "no new finalizers can be added" in refused.text
    assert refused.body["details"]["causes"][0]["field"] == "metadata.finalizers"
    answer = cluster.merge_patch_node("n1", {"metadata": {"finalizers": None}})
    assert answer.code == 200 and cluster.node_raw("n1") is None
    changes = [(e.type, e.kind) for e in cluster.watch({"pods": since, "nodes": since}, 0)]
    assert ("DELETED", "Node") in changes and ("MODIFIED", "Node") not in changes
    assert "default/web-0" not in cluster.pods and len(cluster.pods) == 1  # recreated under a new name


def test_update_node_removing_the_last_finalizer_deletes_the_node(cluster):
    cluster.add_node(with_finalizer("n1"))
    cluster.remove_node("n1")  # the instance is gone: the node waits for its finalizer
    assert cluster.node_raw("n1") is not None
    cluster.update_node("n1", lambda raw: raw["metadata"].pop("finalizers") is not None)
    assert cluster.node_raw("n1") is None


def test_a_node_without_finalizers_goes_at_once_as_before(cluster):
    cluster.add_node(make_node("n1"))
    cluster.remove_node("n1")
    assert cluster.node_raw("n1") is None


def test_a_merge_patch_cannot_set_or_clear_a_nodes_deletion_timestamp(cluster):
    cluster.add_node(with_finalizer("n1"))
    cluster.merge_patch_node("n1", {"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}})
    assert "deletionTimestamp" not in cluster.node_raw("n1")["metadata"]
    cluster.delete_node("n1")
    cluster.merge_patch_node("n1", {"metadata": {"deletionTimestamp": None, "labels": {"a": "b"}}})
    assert cluster.node_raw("n1")["metadata"]["deletionTimestamp"]
