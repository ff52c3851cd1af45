"""`carpool.disruption.deletion`: which deleted NodeClaims and Nodes become terminations, which Nodes and
NodeClaims left behind may go, which Nodes lack the finalizer (Karpenter's termination controllers)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from carpool import labels as L
from carpool.api.k8s import Node
from carpool.disruption import deletion
from carpool.disruption.decision import Reason
from carpool.karpenter_objects import TERMINATION_FINALIZER
from carpool.state.models import Claim, ClaimStatus, DisruptionProgress

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
CLUSTER = "demo"


def node(name: str, instance: str, *, deleted: datetime | None = None, finalizer: bool = True,
         ready: bool = True, owned: bool = True, registered: bool = True) -> Node:
    meta: dict[str, Any] = {"name": name, "labels": {L.NODEPOOL: "default"}}
    if owned:
        meta["labels"][L.OWNED_BY] = CLUSTER
    if registered:
        meta["labels"][L.REGISTERED] = "true"
    if finalizer:
        meta["finalizers"] = [TERMINATION_FINALIZER]
    if deleted is not None:
        meta["deletionTimestamp"] = deleted.isoformat()
    return Node.model_validate({
        "metadata": meta, "spec": {"providerID": f"aws:///us-east-1a/{instance}"},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}})


def claim(name: str, instance: str | None, node_name: str | None = None, reason: str | None = None) -> Claim:
    return Claim(name=name, nodepool="default", nodeclass="default", created_at=NOW - timedelta(hours=1),
                 status=ClaimStatus.REGISTERED if node_name else ClaimStatus.LAUNCHED, instance_id=instance,
                 node_name=node_name,
                 disruption=DisruptionProgress(reason=reason, action="replace") if reason else None)


def nodeclaim(name: str, instance: str | None = None, *, deleted: datetime | None = None, grace: str | None = None,
              node_name: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "finalizers": [TERMINATION_FINALIZER]}
    if deleted is not None:
        meta["deletionTimestamp"] = deleted.isoformat().replace("+00:00", "Z")
    status: dict[str, Any] = {}
    if instance:
        status["providerID"] = f"aws:///us-east-1a/{instance}"
    if node_name:
        status["nodeName"] = node_name
    return {"metadata": meta, "spec": {"terminationGracePeriod": grace} if grace else {}, "status": status}


def test_a_deleted_nodeclaim_terminates_its_claim_and_deletes_its_node() -> None:
    at = NOW - timedelta(seconds=30)
    d = deletion.decide([node("n1", "i-1")], [claim("c1", "i-1", "n1")],
                        [nodeclaim("c1", "i-1", deleted=at, grace="10m")], CLUSTER)
    [t] = d.terminations
    assert (t.claim.name, t.node, t.deleted_at, t.grace_seconds) == ("c1", "n1", at, 600)
    assert t.delete_node and t.delete_nodeclaim is None and t.nodeclaim == "c1" and t.takes_over
    assert "NodeClaim c1 was deleted" in t.why
    assert not d.let_go and not d.nodeclaims_gone and not d.finalize


def test_a_deleted_node_terminates_its_claim_and_deletes_its_nodeclaim_found_by_instance() -> None:
    at = NOW - timedelta(seconds=5)
    d = deletion.decide([node("n1", "i-1", deleted=at)], [claim("c1", "i-1", "n1")],
                        [nodeclaim("other-name", "i-1")], CLUSTER)
    [t] = d.terminations
    assert t.node == "n1" and not t.delete_node and t.delete_nodeclaim == "other-name"
    assert t.deleted_at == at and t.grace_seconds is None and "Node n1 was deleted" in t.why


def test_a_node_without_the_finalizer_is_never_deleted_by_carpool_before_its_drain() -> None:
    """Deleting it would drop it at once, its pods bound to nothing: it is drained first, deleted after."""
    d = deletion.decide([node("n1", "i-1", finalizer=False)], [claim("c1", "i-1", "n1")],
                        [nodeclaim("c1", "i-1", deleted=NOW)], CLUSTER)
    [t] = d.terminations
    assert not t.delete_node
    assert d.finalize == ["n1"]  # the finalizer is added, so the delete at the end of the drain waits


def test_a_deletion_takes_a_consolidation_over_but_not_an_interruption_or_a_termination_in_progress() -> None:
    deleted = [node("n1", "i-1", deleted=NOW), node("n2", "i-2", deleted=NOW), node("n3", "i-3", deleted=NOW)]
    claims = [claim("c1", "i-1", "n1", Reason.UNDERUTILIZED.value), claim("c2", "i-2", "n2", Reason.INTERRUPTED.value),
              claim("c3", "i-3", "n3", Reason.DELETED.value)]
    d = deletion.decide(deleted, claims, [], CLUSTER)
    assert [t.claim.name for t in d.terminations] == ["c1"]
    # the NodeClaim of an interrupted node is still deleted (its pair), its drain left as it is
    d = deletion.decide(deleted, claims, [nodeclaim("c2", "i-2")], CLUSTER)
    assert {t.claim.name: t.takes_over for t in d.terminations} == {"c1": True, "c2": False}


def test_a_claim_whose_node_never_joined_is_a_termination_without_a_node() -> None:
    d = deletion.decide([], [claim("c1", "i-1")], [nodeclaim("c1", "i-1", deleted=NOW)], CLUSTER)
    [t] = d.terminations
    assert t.node is None and not t.delete_node


def test_nothing_deleted_is_nothing_to_do() -> None:
    d = deletion.decide([node("n1", "i-1")], [claim("c1", "i-1", "n1")], [nodeclaim("c1", "i-1")], CLUSTER)
    assert not d


def test_a_deleted_node_no_claim_holds_is_let_go_with_whether_it_is_carpools() -> None:
    d = deletion.decide([node("n1", "i-1", deleted=NOW), node("k1", "i-9", deleted=NOW, owned=False),
                         node("plain", "i-8", deleted=NOW, finalizer=False)], [], [], CLUSTER)
    assert [(g.node, g.instance_id, g.ours) for g in d.let_go] == [("n1", "i-1", True), ("k1", "i-9", False)]


def test_a_deleted_nodeclaim_goes_only_once_its_node_is_gone() -> None:
    deleted = nodeclaim("c1", "i-1", deleted=NOW, node_name="n1")
    waiting = deletion.decide([node("n1", "i-1", deleted=NOW)], [], [deleted], CLUSTER)
    assert not waiting.nodeclaims_gone and [g.node for g in waiting.let_go] == ["n1"]
    gone = deletion.decide([], [], [deleted, nodeclaim("kept", "i-2")], CLUSTER)
    assert [(n.name, n.instance_id) for n in gone.nodeclaims_gone] == [("c1", "i-1")]


def test_only_registered_carpool_nodes_of_live_claims_get_the_finalizer() -> None:
    nodes = [node("n1", "i-1", finalizer=False), node("n2", "i-2", finalizer=False, registered=False),
             node("n3", "i-3", finalizer=False, owned=False), node("n4", "i-4", finalizer=False)]
    d = deletion.decide(nodes, [claim("c1", "i-1", "n1"), claim("c2", "i-2", "n2"), claim("c3", "i-3", "n3")], [],
                        CLUSTER)
    assert d.finalize == ["n1"]


def test_the_deadline_counts_from_the_deletion() -> None:
    assert deletion.deadline(NOW, 300) == NOW + timedelta(minutes=5)
    assert deletion.deadline(NOW, None) is None
    assert deletion.grace_seconds(nodeclaim("c", grace="1h30m")) == 5400
    assert deletion.deletion_timestamp(nodeclaim("c", deleted=NOW)) == NOW
