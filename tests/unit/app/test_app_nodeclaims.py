"""Claims kept in the cluster as NodeClaims (`carpool.app.nodeclaims`), against the simulated API server
(which judges each object by Karpenter's CRD, as kube-apiserver does): the registrar's status and the
Node's ownerReference, the disruption run's reconcile (created, patched, released, Karpenter's left
alone), a launch whose NodeClaim cannot be written, and `release_nodeclaim`."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from tests.unit.app.test_app_register import CLUSTER, CONFIG, NOW, become_ready, deps_for, join, node, reserve

from carpool import labels, nodeclaims
from carpool.api.loader import load
from carpool.app import nodeclaims as sync
from carpool.app import register
from carpool.app.disruption_summary import DisruptSummary
from carpool.app.wiring import Dependencies
from carpool.karpenter_objects import NODECLAIM, NODEPOOL
from carpool.nodeclaims import ClaimFacts
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.state.models import Claim, ClaimStatus, DisruptionProgress


def with_karpenter() -> tuple[Dependencies, SimulatedCluster]:
    deps = deps_for()
    cluster = deps.cluster
    assert isinstance(cluster, SimulatedCluster)
    deps.karpenter = cluster
    pool = load([CONFIG]).nodepools[0]
    cluster.apply_object(pool.model_dump(by_alias=True, exclude_none=True, mode="json"))
    return deps, cluster


def stored(cluster: SimulatedCluster, name: str) -> dict[str, Any]:
    obj = cluster.get_object(NODECLAIM, name)
    assert obj is not None, f"no NodeClaim {name}"
    return obj


def conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in obj["status"]["conditions"]}


def registered_claim(deps: Dependencies, name: str, iid: str) -> Claim:
    reserve(deps, name, iid, pods=(f"default/web-{name}",))
    node_name = join(deps, iid, ready=True, taints=[])
    register.reconcile(node_name, deps, register.RegisterSummary())
    claim = deps.ledger.get(name)
    assert claim is not None and claim.status == ClaimStatus.REGISTERED
    return claim


# -- the registrar -------------------------------------------------------------------------------------
def test_registration_creates_a_missing_nodeclaim_and_owns_the_node_by_it() -> None:
    deps, cluster = with_karpenter()
    reserve(deps, "c1", "i-1")
    name = join(deps, "i-1")

    register.reconcile(name, deps, register.RegisterSummary())

    obj = stored(cluster, "c1")
    got = conditions(obj)
    assert got["Launched"] == ("True", "Launched")
    assert got["Registered"] == ("True", "Registered")
    assert got["Initialized"] == ("Unknown", "NodeNotReady")
    assert obj["status"]["nodeName"] == name and obj["status"]["providerID"] == "aws:///us-east-1a/i-1"
    assert obj["metadata"]["ownerReferences"][0]["uid"] == cluster.get_object(NODEPOOL, "default")["metadata"]["uid"]
    owners = node(deps, name).metadata.owner_references
    assert [(o.kind, o.name, o.uid) for o in owners] == [("NodeClaim", "c1", obj["metadata"]["uid"])]


def test_initialization_makes_the_nodeclaim_ready_with_the_nodes_capacity() -> None:
    deps, cluster = with_karpenter()
    reserve(deps, "c1", "i-1")
    name = join(deps, "i-1")
    register.reconcile(name, deps, register.RegisterSummary())
    become_ready(deps, name)

    register.reconcile(name, deps, register.RegisterSummary())

    obj = stored(cluster, "c1")
    assert {k: v[0] for k, v in conditions(obj).items()} == dict.fromkeys(
        ("Launched", "Registered", "Initialized", "Ready", "Consolidatable"), "True")  # consolidateAfter 0s
    assert obj["status"]["capacity"]["memory"] == "7600Mi"  # the node's own, not the type's estimate
    assert obj["status"]["allocatable"]["pods"] == "29"


def test_a_node_registered_before_its_nodeclaim_existed_gets_the_owner_reference() -> None:
    deps = deps_for()  # no Karpenter objects yet: registered without a NodeClaim
    reserve(deps, "c1", "i-1")
    name = join(deps, "i-1", ready=True, taints=[])
    register.reconcile(name, deps, register.RegisterSummary())
    assert not node(deps, name).metadata.owner_references
    cluster = deps.cluster
    assert isinstance(cluster, SimulatedCluster)
    deps.karpenter = cluster

    register.reconcile(name, deps, register.RegisterSummary())

    assert [o.name for o in node(deps, name).metadata.owner_references] == ["c1"]


# -- the disruption run's reconcile --------------------------------------------------------------------
def reconcile(deps: Dependencies, running: set[str]) -> sync.ReconcileSummary:
    summary = DisruptSummary()
    done = sync.reconcile(deps, NOW, deps.ledger.active(), deps.cluster.list_nodes(), running, frozenset(), summary)
    assert done is not None
    assert summary.failures == []
    return done


def carpools_nodeclaim(cluster: SimulatedCluster, name: str, iid: str, **over: Any) -> None:
    claim = Claim(name=name, nodepool="default", nodeclass="default", created_at=NOW, status=ClaimStatus.LAUNCHED,
                  instance_id=iid, zone="us-east-1a", launched_at=NOW, instance_types=["m5.large"])
    obj = nodeclaims.build(ClaimFacts(claim=claim, cluster=CLUSTER, pool=None, now=NOW))
    obj["metadata"].update(over)
    cluster.create_object(NODECLAIM, nodeclaims.creation_body(obj))
    cluster.patch_status(NODECLAIM, name, obj["status"])


def test_a_live_claim_without_a_nodeclaim_gets_one() -> None:
    deps, cluster = with_karpenter()
    registered_claim(deps, "c1", "i-1")
    cluster.delete_object(NODECLAIM, "c1")  # a user removed it, or the launch could not write it
    sync.release_nodeclaim(deps, "c1")

    done = reconcile(deps, {"i-1"})

    assert done.created == ["c1"]
    assert conditions(stored(cluster, "c1"))["Ready"][0] == "True"


def test_an_object_in_step_is_not_written_again() -> None:
    deps, cluster = with_karpenter()
    registered_claim(deps, "c1", "i-1")
    reconcile(deps, {"i-1"})
    version = stored(cluster, "c1")["metadata"]["resourceVersion"]

    done = reconcile(deps, {"i-1"})

    assert done.patched == [] and done.created == []
    assert stored(cluster, "c1")["metadata"]["resourceVersion"] == version


def test_a_disruption_in_progress_and_a_template_edit_are_said_on_the_nodeclaim() -> None:
    deps, cluster = with_karpenter()
    claim = registered_claim(deps, "c1", "i-1")
    claim.disruption = DisruptionProgress(reason="Drifted", action="replace", decided_at=NOW,
                                          termination_deadline=NOW + timedelta(hours=1))
    deps.ledger.save(claim)
    cluster.patch_object(NODECLAIM, "c1", {"metadata": {"annotations": {nodeclaims.HASH_ANNOTATION: "1"}}})

    done = reconcile(deps, {"i-1"})

    obj = stored(cluster, "c1")
    assert done.patched == ["c1"]
    assert conditions(obj)["Drifted"] == ("True", "NodePoolDrifted")
    assert conditions(obj)["DisruptionReason"] == ("True", "Drifted")
    assert obj["metadata"]["annotations"][nodeclaims.TERMINATION_TIMESTAMP_ANNOTATION] == "2026-05-01T01:00:00Z"


def test_carpools_nodeclaim_whose_claim_and_instance_are_gone_is_released() -> None:
    deps, cluster = with_karpenter()
    carpools_nodeclaim(cluster, "default-gone", "i-9")

    done = reconcile(deps, set())

    assert done.released == ["default-gone"]
    assert cluster.get_object(NODECLAIM, "default-gone") is None


def test_a_nodeclaim_whose_instance_still_runs_waits_for_it() -> None:
    deps, cluster = with_karpenter()
    carpools_nodeclaim(cluster, "default-ending", "i-9")

    assert reconcile(deps, {"i-9"}).released == []
    assert cluster.get_object(NODECLAIM, "default-ending") is not None


def test_karpenters_nodeclaims_are_left_alone() -> None:
    deps, cluster = with_karpenter()
    carpools_nodeclaim(cluster, "default-x7k2p", "i-8", labels={labels.NODEPOOL: "default"})

    done = reconcile(deps, set())

    assert done.released == [] and cluster.get_object(NODECLAIM, "default-x7k2p") is not None


# -- launch and release --------------------------------------------------------------------------------
class Refusing(SimulatedCluster):
    """An API server that answers nothing carpool asks of Karpenter's objects."""

    def get_object(self, kind: Any, name: str) -> dict[str, Any] | None:
        raise RuntimeError("apiserver unavailable")

    def create_object(self, kind: Any, obj: Any) -> dict[str, Any]:
        raise RuntimeError("apiserver unavailable")


def test_a_nodeclaim_that_cannot_be_written_never_fails_the_launch() -> None:
    deps, _ = with_karpenter()
    deps.karpenter = Refusing(lambda: NOW)
    claim = reserve(deps, "c1", "i-1")
    pool = load([CONFIG]).nodepools[0]

    assert sync.launched(deps, [sync.Launched(claim, pool)], NOW) == ["c1"]


def test_a_retried_launch_brings_the_existing_nodeclaim_in_step() -> None:
    deps, cluster = with_karpenter()
    claim = reserve(deps, "c1", "i-1")
    pool = load([CONFIG]).nodepools[0]
    assert sync.launched(deps, [sync.Launched(claim, pool)], NOW) == []
    cluster.patch_status(NODECLAIM, "c1", {"imageID": "ami-other"})

    assert sync.launched(deps, [sync.Launched(claim, pool)], NOW) == []

    assert stored(cluster, "c1")["status"]["imageID"] == "ami-std"


def test_release_lets_a_deleted_nodeclaim_go() -> None:
    deps, cluster = with_karpenter()
    claim = reserve(deps, "c1", "i-1")
    sync.launched(deps, [sync.Launched(claim, load([CONFIG]).nodepools[0])], NOW)
    cluster.delete_object(NODECLAIM, "c1")
    assert stored(cluster, "c1")["metadata"].get("deletionTimestamp")  # held by the finalizer

    assert sync.release_nodeclaim(deps, "c1")

    assert cluster.get_object(NODECLAIM, "c1") is None
    assert not sync.release_nodeclaim(deps, "c1")


def test_a_run_writes_at_most_its_share_and_leaves_the_rest_to_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    deps, cluster = with_karpenter()
    for n in (1, 2, 3):
        registered_claim(deps, f"c{n}", f"i-{n}")
        sync.release_nodeclaim(deps, f"c{n}")  # as after an upgrade: claims without NodeClaims
    monkeypatch.setattr(sync, "MAX_WRITES_PER_RUN", 2)

    first = reconcile(deps, {"i-1", "i-2", "i-3"})
    second = reconcile(deps, {"i-1", "i-2", "i-3"})

    assert (len(first.created), first.deferred) == (2, 1)
    assert (len(second.created), second.deferred) == (1, 0)
    assert all(cluster.get_object(NODECLAIM, f"c{n}") is not None for n in (1, 2, 3))
