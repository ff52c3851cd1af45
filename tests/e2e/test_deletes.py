"""Deletes do what Karpenter does, end to end through the real handlers, local AWS and the simulated API
server (Nodes and NodeClaims held by `karpenter.sh/termination`, the garbage collector deleting a NodePool's
NodeClaims): `kubectl delete nodeclaim`, `kubectl delete node` and `kubectl delete nodepool` cordon and
drain the node (PodDisruptionBudgets hold its evictions, a do-not-disrupt pod waits for the
terminationGracePeriod), terminate its instance, then let the Node and the NodeClaim go; the evicted pods
are provisioned again like any pending pod (carpool launches no replacement of its own, as Karpenter
launches none); and no path leaves a Node stuck Terminating (a consolidation's nodes are gone, not held).
Times are simulated seconds; the disruption function runs every minute."""

from __future__ import annotations

from typing import Any

import pytest

from carpool import labels
from carpool.karpenter_objects import NODECLAIM, TERMINATION_FINALIZER
from carpool.sim.run.result import SimResult
from carpool.sim.run.runner import SimRunner
from carpool.sim.run.scenario import parse_scenario

DELETE_AT = 300
GRACE = 180
CLASS = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"}, "spec": {
    "role": "carpool-node", "amiSelectorTerms": [{"alias": "al2023@latest"}],
    "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "deletes"}}],
    "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "deletes"}}]}}


def pool(name: str, *, weight: int = 0, grace: str | None = None, consolidate: str = "WhenEmpty",
         after: str = "30m", capacity: str = "on-demand") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
                         {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity]}]}
    if grace:
        spec["terminationGracePeriod"] = grace
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": {
        **({"weight": weight} if weight else {}),
        "disruption": {"consolidationPolicy": consolidate, "consolidateAfter": after},
        "template": {"spec": spec}}}


def deployment(name: str, replicas: int, *, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """One pod per m5.large node (1,500m of its 1,930m)."""
    pod_spec: dict[str, Any] = {"containers": [{"name": name, "image": name,
                                                "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}}]}
    return {"at": 0, "apply": {"apiVersion": "apps/v1", "kind": "Deployment",
                               "metadata": {"name": name, "namespace": "default"},
                               "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                                        "template": {"metadata": {"labels": {"app": name},
                                                                  "annotations": annotations or {}},
                                                     "spec": pod_spec}}}}


def scenario(name: str, manifests: list[dict[str, Any]], workload: list[dict[str, Any]],
             duration: int = 1500) -> dict[str, Any]:
    return {
        "name": name,
        "cluster": {"name": "deletes", "version": "1.32", "region": "us-east-1", "zones": ["us-east-1a", "us-east-1b"]},
        "amis": [{"parameter": "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id",
                  "name": "amazon-eks-node-al2023-x86_64-standard-1.32-v20250115", "architecture": "x86_64",
                  "creationDate": "2025-01-15T00:00:00Z"}],
        "truth": {"bootSeconds": 40, "registrationSeconds": 15},
        "manifests": [*manifests, CLASS],
        "workload": workload, "duration": duration, "tickSeconds": 10, "expect": {"allPodsScheduled": True}}


class Run:
    """One scenario run, with the simulated cluster it ended with."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.runner = SimRunner(parse_scenario(raw))
        self.result: SimResult = self.runner.run()

    def api(self, verb: str) -> list[tuple[float, str]]:
        """The API calls carpool (and the scenario) made of one verb: (time, target)."""
        return [(d.at, d.message.split(" ", 1)[1]) for d in self.result.decisions
                if d.source == "k8s-api" and d.message.startswith(f"{verb} ")]

    def nodeclaims(self) -> dict[str, dict[str, Any]]:
        return {o["metadata"]["name"]: o for o in self.runner.cluster.list_objects(NODECLAIM).items}

    def node_of(self, instance_id: str) -> str:
        (found,) = [i.node_name for i in self.result.launches if i.instance_id == instance_id]
        assert found is not None
        return found

    def deleted(self, kind: str) -> list[str]:
        """The objects of `kind` the scenario's delete step deleted (the workload log line names them)."""
        lines = [d.message for d in self.result.decisions if d.source == "workload" and d.message.startswith("deleted ")]
        return [part.split(" ", 1)[1] for line in lines for part in line.split(", ")[1:] if part.startswith(f"{kind} ")]


def nothing_held(run: Run) -> None:
    """No Node and no NodeClaim is left being deleted (held by a finalizer nobody will remove)."""
    stuck = [n.name for n in run.runner.cluster.list_nodes() if n.metadata.deletion_timestamp is not None]
    stuck += [name for name, o in run.nodeclaims().items() if o["metadata"].get("deletionTimestamp")]
    assert not stuck, f"left Terminating: {stuck}"


def no_errors(run: Run) -> None:
    assert not [d.message for d in run.result.decisions if d.level == "ERROR"]
    assert run.result.expectations == {"allPodsScheduled": True}


# -- kubectl delete nodeclaim: a PodDisruptionBudget paces the drain ---------------------------------------
@pytest.fixture(scope="module")
def nodeclaims_deleted() -> Run:
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": "default"},
           "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}}
    return Run(scenario("delete-nodeclaims", [pool("default"), pdb], [
        deployment("web", 3), {"at": DELETE_AT, "delete": {"nodeClaims": {"nodePool": "default", "count": 2}}}]))


def test_deleted_nodeclaims_have_their_nodes_cordoned_drained_and_terminated(nodeclaims_deleted: Run) -> None:
    run = nodeclaims_deleted
    deleted = run.deleted("NodeClaim")
    assert len(deleted) == 2
    claims_at_start = {i.instance_id for i in run.result.launches if i.launched_at < DELETE_AT}
    gone = [i for i in run.result.launches if i.instance_id in claims_at_start and i.terminated_at is not None]
    assert len(gone) == 2 and all(i.terminated_at > DELETE_AT for i in gone)  # type: ignore[operator]
    nodes = {i.node_name for i in gone}
    assert nodes <= {target for _at, target in run.api("cordon")}
    assert nodes <= {target.split()[0] for _at, target in run.api("taint") if labels.DISRUPTED_TAINT in target}
    assert not nodes & {n.name for n in run.runner.cluster.list_nodes()}, "the deleted claims' Nodes are gone"
    assert not set(deleted) & set(run.nodeclaims()), "the deleted NodeClaims are gone"
    nothing_held(run)
    no_errors(run)


def test_the_budget_paces_the_evictions_and_the_pods_land_on_new_nodes(nodeclaims_deleted: Run) -> None:
    run = nodeclaims_deleted
    blocked = [at for at, target in run.api("eviction-blocked") if target.startswith("default/web-")]
    evicted = [at for at, target in run.api("evict") if target.startswith("default/web-")]
    assert blocked and len(evicted) == 2, "one eviction at a time: the budget refused the second at first"
    assert evicted[0] <= blocked[0] < evicted[1]
    # no replacement of carpool's own: the new nodes come after the evictions, for the pods they left pending
    late = sorted(i.launched_at for i in run.result.launches if i.launched_at > DELETE_AT)
    assert len(late) == 2 and late[0] > evicted[0] and late[1] > evicted[1]
    assert not [d for d in run.result.decisions if "replacement claims" in d.message]
    running = [i for i in run.result.instances if i.running]
    assert len(running) == 3 and run.result.pods.pending == 0
    # the NodeClaims left are the running instances', each still holding its finalizer
    left = run.nodeclaims()
    assert {o["status"]["providerID"].rsplit("/", 1)[-1] for o in left.values()} == {i.instance_id for i in running}
    assert all(o["metadata"]["finalizers"] == [TERMINATION_FINALIZER] for o in left.values())


# -- kubectl delete node: a do-not-disrupt pod holds it until the terminationGracePeriod ---------------------
@pytest.fixture(scope="module")
def node_deleted() -> Run:
    return Run(scenario("delete-node", [pool("jobs", grace=f"{GRACE}s")], [
        deployment("batch", 1, annotations={"karpenter.sh/do-not-disrupt": "true"}),
        {"at": DELETE_AT, "delete": {"nodes": {"nodePool": "jobs"}}}]))


def test_a_deleted_node_waits_for_its_do_not_disrupt_pod_until_the_grace_period_then_goes(node_deleted: Run) -> None:
    run = node_deleted
    (node,) = run.deleted("Node")
    assert node in {target for _at, target in run.api("cordon")}
    batch = [(at, target) for at, target in run.api("delete") if target.startswith("default/batch-")]
    assert len(batch) == 1 and not [t for _at, t in run.api("evict") if t.startswith("default/batch-")]
    at, target = batch[0]
    # deleted at the last minutely run at which its own 30 s grace still ends by deletion + 180 s
    assert DELETE_AT + GRACE - 30 - 60 < at <= DELETE_AT + GRACE - 30 + 10
    assert int(target.rsplit("grace=", 1)[1].rstrip("s")) >= 30
    assert node not in {n.name for n in run.runner.cluster.list_nodes()}
    (launch,) = [i for i in run.result.launches if i.node_name == node]
    assert launch.terminated_at is not None and launch.terminated_at >= at
    # Karpenter deletes the Node's NodeClaim too; it is gone with its instance
    assert launch.instance_id not in {o["status"].get("providerID", "").rsplit("/", 1)[-1]
                                      for o in run.nodeclaims().values()}
    # the pod is back, on a new node of its pool
    jobs = [i for i in run.result.instances if i.running and i.node_pool == "jobs"]
    assert len(jobs) == 1 and jobs[0].launched_at > at
    nothing_held(run)
    no_errors(run)


# -- kubectl delete nodepool: the garbage collector deletes its NodeClaims, and the nodes go the same way ----
@pytest.fixture(scope="module")
def nodepool_deleted() -> Run:
    return Run(scenario("delete-nodepool", [pool("primary", weight=50), pool("fallback", weight=10)], [
        deployment("web", 2), {"at": DELETE_AT, "delete": {"nodepool": "primary"}}]))


def test_a_deleted_nodepools_nodeclaims_and_nodes_go_and_its_pods_move_to_another_pool(nodepool_deleted: Run) -> None:
    run = nodepool_deleted
    first = [i for i in run.result.launches if i.launched_at < DELETE_AT]
    assert len(first) == 2 and {i.node_pool for i in first} == {"primary"}
    assert all(i.terminated_at is not None and i.terminated_at > DELETE_AT for i in first)
    primary = [n.name for n in run.runner.cluster.list_nodes() if n.labels.get(labels.NODEPOOL) == "primary"]
    assert not primary
    assert {o["metadata"]["labels"][labels.NODEPOOL] for o in run.nodeclaims().values()} == {"fallback"}
    running = [i for i in run.result.instances if i.running]
    assert len(running) == 2 and {i.node_pool for i in running} == {"fallback"}
    # terminated as deleted, not replaced as drifted (its NodePool gone): the fallback nodes came for the pods
    drained = [d.message for d in run.result.decisions if " drained (" in d.message]
    assert len(drained) == 2 and all("drained (Deleted)" in m for m in drained)
    assert not [d for d in run.result.decisions if "replacement claims" in d.message]
    nothing_held(run)
    no_errors(run)


# -- every other end of a node lets it go too --------------------------------------------------------------
@pytest.fixture(scope="module")
def consolidated() -> Run:
    return Run(scenario("consolidated", [pool("default", after="30s")], [
        deployment("web", 3), {"at": DELETE_AT, "scale": {"deployment": "web", "replicas": 1}}], duration=900))


def test_a_consolidation_leaves_no_node_held_by_the_finalizer(consolidated: Run) -> None:
    run = consolidated
    removed = [i for i in run.result.launches if i.terminated_at is not None]
    assert len(removed) == 2, "the two emptied nodes were consolidated"
    names = {n.name: n for n in run.runner.cluster.list_nodes()}
    assert not {i.node_name for i in removed} & set(names)
    assert [n.metadata.finalizers for n in names.values()] == [[TERMINATION_FINALIZER]], \
        "the node left carries the finalizer its registration added"
    nothing_held(run)
    no_errors(run)


@pytest.fixture(scope="module")
def reclaimed() -> Run:
    """A spot instance EC2 reclaims: its Node, deleted by the cloud node lifecycle controller, is let go."""
    return Run(scenario("reclaimed", [pool("default", capacity="spot")], [
        deployment("web", 2), {"at": DELETE_AT, "spotInterruption": {"nodePool": "default"}}], duration=900))


def test_an_instance_ended_outside_carpool_leaves_no_node_held_by_the_finalizer(reclaimed: Run) -> None:
    run = reclaimed
    (gone,) = [i for i in run.result.launches if i.terminated_at is not None]
    assert gone.node_name not in {n.name for n in run.runner.cluster.list_nodes()}
    assert len([i for i in run.result.instances if i.running]) == 2
    nothing_held(run)
    no_errors(run)
