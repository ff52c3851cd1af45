"""The snapshot: only carpool's nodes are candidates; protection, PDBs, room and pending pods."""

from __future__ import annotations

from datetime import timedelta

from disruption_factories import NOW, World

from carpool import labels as L
from carpool.api.taints import Taint
from carpool.disruption import protection
from carpool.state.models import Claim, ClaimStatus, DisruptionProgress


def test_only_nodes_carpool_launched_with_a_known_claim_are_candidates():
    w = World()
    w.node("mine")
    w.node("mng", owned=False, extra_labels={L.EKS_NODEGROUP: "system"})
    stray = w.node("lost")
    w.claims = [c for c in w.claims if c.node_name != "lost"]  # claim gone from the ledger
    w.node("other-cluster")
    w.nodes[-1].labels[L.OWNED_BY] = "prod"
    view = w.view()
    assert [c.node for c in view.candidates] == ["mine"]
    assert "managed node group system" in view.ignored["mng"]
    assert "not in the ledger" in view.ignored[stray.name]
    assert "cluster 'prod'" in view.ignored["other-cluster"]
    # every Ready, schedulable node is room, carpool's or not
    assert {n.name for n in view.existing} == {"mine", "mng", "lost", "other-cluster"}


def test_candidate_reports_pods_price_utilisation_and_room():
    w = World()
    w.node("a")
    w.pod("web-1", "a", cpu="1", mem="2Gi")
    w.pod("agent", "a", cpu="100m", daemonset=True)
    w.pod("done", "a", phase="Succeeded")
    c = w.view().candidate("a")
    assert c is not None
    assert [p.key for p in c.pods] == ["default/web-1"]  # not the DaemonSet or finished pod
    assert c.price == 0.192 and c.instance_type == "m5.xlarge" and c.pool == "default"
    assert abs(c.utilization() - 1.1 / 4) < 1e-9
    room = next(n for n in w.view().existing if n.name == "a").remaining
    assert room["cpu"] == 4000 - 1100


def test_cordoned_or_disrupted_nodes_are_not_room():
    w = World()
    w.node("a")
    w.node("b")
    w.nodes[0].spec.unschedulable = True
    w.claims[1].disruption = DisruptionProgress(reason="Empty")
    w.nodes[1].spec.taints = [Taint(key=L.DISRUPTED_TAINT, effect="NoSchedule")]
    view = w.view()
    assert view.existing == []
    assert view.candidate("b").disrupting


def test_do_not_disrupt_and_cluster_autoscaler_annotations_protect():
    w = World()
    w.node("a")
    w.node("b", annotations={L.CAS_SCALE_DOWN_DISABLED: "true"})
    w.node("c")
    w.node("d")
    w.pod("p1", "a", annotations={L.DO_NOT_DISRUPT: "true"})
    w.pod("p2", "c", annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"})
    w.pod("p3", "d")
    view = w.view()
    assert "karpenter.sh/do-not-disrupt" in view.candidate("a").protected
    assert "scale-down-disabled" in view.candidate("b").protected
    assert "safe-to-evict" in view.candidate("c").protected
    assert view.candidate("d").protected is None


def test_pdb_allowances_from_status_or_computed():
    w = World()
    w.node("a")
    for i in range(3):
        w.pod(f"web-{i}", "a", labels={"app": "web"})
    w.pdb("web", {"app": "web"}, min_available=3)
    w.pdb("api", {"app": "api"}, max_unavailable=1, allowed=0)
    view = w.view()
    assert view.pdb_allowed == {"default/web": 0, "default/api": 0}
    assert view.candidate("a").pdbs == {"default/web": 3}
    tracker = protection.PdbTracker(view.pdb_allowed)
    assert "default/web" in tracker.blocker(view.candidate("a").pdbs)


def test_pod_under_two_pdbs_blocks_its_node():
    w = World()
    w.node("a")
    w.pod("web-1", "a", labels={"app": "web", "tier": "front"})
    w.pdb("by-app", {"app": "web"}, max_unavailable=1)
    w.pdb("by-tier", {"tier": "front"}, max_unavailable=1)
    assert "2 PodDisruptionBudgets" in w.view().candidate("a").protected


def test_quiet_since_resets_when_the_pods_change():
    w = World()
    w.node("a", quiet_for=timedelta(minutes=30))
    w.pod("web-1", "a")
    view = w.view()
    assert view.candidate("a").quiet_since == NOW - timedelta(minutes=30)
    w.pod("web-2", "a")  # a new pod arrived after the digest was recorded
    w.quiet.clear()
    assert w.view().candidate("a").quiet_since == NOW


def test_pending_pods_and_reserved_nodes():
    w = World()
    w.node("a")
    w.node("b", disruption=DisruptionProgress(reason="Drifted", replaced_by=["claim-a"]))
    w.node("c")
    w.pod("waiting", None)
    w.pod("coming", None)
    view = w.view(nominated={"default/coming": "claim-c"})
    assert [p.key for p in view.pending] == ["default/waiting"]
    assert "replaces node b" in view.candidate("a").reserved
    assert "nominated" in view.candidate("c").reserved


def test_the_room_of_pods_nominated_to_a_nodes_claim_is_taken_on_that_node():
    w = World()
    w.node("c")
    w.pod("coming", None, cpu="1500m")
    free = next(n for n in w.view().existing if n.name == "c").remaining["cpu"]
    view = w.view(nominated={"default/coming": "claim-c"})
    room = next(n for n in view.existing if n.name == "c")
    assert free - room.remaining["cpu"] == 1500
    assert [p.key for p in room.pods] == ["default/coming"]
    assert view.pending == []  # not counted twice


def test_pods_nominated_to_a_claim_still_coming_reserve_nothing_and_others_reserve_their_room():
    w = World()
    w.node("a")
    w.claims.append(Claim(name="claim-booting", nodepool="default", nodeclass="default", status=ClaimStatus.LAUNCHED,
                          created_at=NOW, instance_id="i-booting", allocatable={"cpu": 2000}))
    w.pod("for-booting", None)
    w.pod("for-unknown", None)
    view = w.view(nominated={"default/for-booting": "claim-booting", "default/for-unknown": "claim-gone"})
    # the booting claim's room is theirs and is never room for consolidation; a nomination to a claim the
    # ledger no longer has holds nothing: that pod's room is reserved on the existing nodes
    assert [p.key for p in view.pending] == ["default/for-unknown"]
    assert next(n for n in view.existing if n.name == "a").pods == ()
