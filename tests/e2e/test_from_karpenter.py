"""Issue 39 item 5, the proof of `docs/migrating-from-karpenter.md`: carpool takes over a cluster Karpenter
built, through the real handlers.

`examples/024-from-karpenter.yaml`: three m5.xlarge nodes of NodePool `default`, each with Karpenter's
NodeClaim, an instance tagged as Karpenter tags it and 9 pods between them; Karpenter's controller holds its
Lease until it is scaled to zero at 30 s. carpool stands still until then, then adopts the NodeClaims into
its claims: every node kept, no instance terminated, none launched, no pod moved, the NodeClaims still in
the cluster. Six more pods at 240 s are served by carpool from the same NodePool."""

from __future__ import annotations

from typing import Any

import pytest

from carpool import labels as L
from carpool.karpenter_objects import NODECLAIM
from carpool.sim.cluster.karpenter_built import EKS_CLUSTER_NAME_TAG
from carpool.sim.cluster.kubelet import Kubelets
from carpool.sim.run.runner import SimRunner
from carpool.sim.run.scenario import load_scenario

from .conftest import EXAMPLES

SCENARIO = "024-from-karpenter.yaml"
RELEASED_AT = 30.0
SCALED_AT = 240.0
#: what changes pods or nodes' place in the cluster: none of it may touch Karpenter's nodes
_MOVES = {"cordon", "taint", "evict", "eviction-blocked", "delete", "delete-node", "uncordon"}


@pytest.fixture(scope="module")
def run() -> Any:
    """The run, and each instance's tags as the simulated kubelets last saw them in local EC2 (which stops
    with the run)."""
    seen: dict[str, dict[str, str]] = {}
    polled = Kubelets._instances

    def polling(self: Kubelets) -> dict[str, dict[str, Any]]:
        out = polled(self)
        seen.update({iid: {t["Key"]: t["Value"] for t in inst.get("Tags") or []} for iid, inst in out.items()})
        return out

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Kubelets, "_instances", polling)
        runner = SimRunner(load_scenario(EXAMPLES / SCENARIO))
        result = runner.run()
    runner.seen_tags = seen
    return runner, result


def test_every_node_karpenter_built_is_kept_and_no_instance_is_terminated(run: Any) -> None:
    runner, result = run
    built = set(runner.prebuilt)
    assert len(built) == 3 and not runner.kubelets.terminated
    names = {runner.kubelets.registered[iid] for iid in built}
    assert names <= set(runner.cluster.nodes)
    assert all(t.nodes.get("default", 0) >= 3 for t in result.timeline)
    touched = [a for a in runner.cluster.actions if a[1] in _MOVES and any(n in a[2] for n in names)]
    assert touched == []


def test_nothing_is_launched_for_the_pods_karpenters_nodes_run_and_no_pod_moves(run: Any) -> None:
    runner, result = run
    assert all(i.launched_at >= SCALED_AT for i in result.launches)
    names = {runner.kubelets.registered[iid] for iid in runner.prebuilt}
    on_built = [r for r in runner.cluster.user_pods() if (r.raw.get("spec") or {}).get("nodeName") in names]
    # the 9 pods bound at the start are the ones there at the end: none evicted, deleted or recreated
    assert len(on_built) == 9
    assert all(r.raw["metadata"]["creationTimestamp"] == on_built[0].raw["metadata"]["creationTimestamp"]
               for r in on_built)


def test_the_nodeclaims_are_adopted_once_karpenter_is_scaled_to_zero(run: Any) -> None:
    runner, result = run
    adopted = [d for d in result.decisions if "created by Karpenter: adopted" in d.message]
    assert len(adopted) == 3 and all(RELEASED_AT <= d.at <= RELEASED_AT + 60 for d in adopted)
    assert all("in step with its NodePool and EC2NodeClass" in d.message for d in adopted)
    karpenters = {d.message.split()[1] for d in adopted}  # "NodeClaim <name> (NodePool ..."
    nodeclaims = {o["metadata"]["name"] for o in runner.cluster.list_objects(NODECLAIM).items}
    assert len(karpenters) == 3 and karpenters <= nodeclaims  # Karpenter's objects stay, for a hand-back
    assert result.status is not None
    claims = {c.name: c for c in result.status.claims}
    assert karpenters <= set(claims)
    assert {claims[n].instance_id for n in karpenters} == set(runner.prebuilt)
    assert all(claims[n].node is not None for n in karpenters)
    # charged against the pool: the three adopted nodes and the one carpool launched
    (pool,) = [p for p in result.status.pools if p.name == "default"]
    assert pool.usage["nodes"] == 3 + len([i for i in result.launches if i.terminated_at is None])


def test_adopted_instances_keep_karpenters_tags_and_get_carpools(run: Any) -> None:
    runner, _ = run
    for iid in runner.prebuilt:
        tags = runner.seen_tags[iid]
        assert tags[L.TAG_MANAGED_BY] == "migrate" and tags[EKS_CLUSTER_NAME_TAG] == "migrate"
        assert tags[L.TAG_NODEPOOL] == "default" and tags[L.TAG_NODECLAIM].startswith("default-")


def test_later_pods_are_served_by_carpool_from_the_same_nodepool(run: Any) -> None:
    _, result = run
    assert result.launches and {i.node_pool for i in result.launches} == {"default"}
    assert (result.pods.scheduled, result.pods.pending) == (15, 0)
    assert not any(result.dead_letters.values())
