"""Consolidation never takes the room that pods nominated to a claim were launched for (issue 30, item 8).

Two waves of six pods, three minutes apart, through the real disruption use case (`carpool.app.disrupt.run`)
and the provisioner's `provision_pods`, with the fakes of `test_consolidation` (a first-fit kube-scheduler
that knows nothing of carpool's nominations). Each minute the disruption run fires just as the nodes that
joined register, a moment before the kube-scheduler binds the pods launched for them: the interleaving of
the deployed clock, where the watcher and the disruption function are both on `rate(1 minute)`.

Counting that room as free, consolidation moved the first wave's pods onto the second wave's nodes, the
second wave went pending again, a new node launched and the next run consolidated again.
"""

from __future__ import annotations

from datetime import timedelta

from test_consolidation import Harness, config, deployment_pod

from carpool.app import disrupt
from carpool.disruption import candidates
from carpool.state.models import ClaimStatus

WAVE = 6
#: three pods of 500m fit an m5.large (2 vCPU): each wave needs two nodes
NEEDED = 4


def _minute(h: Harness) -> None:
    """One minute of the deployed clock: nodes join, the disruption run fires, then the kube-scheduler binds
    and the provisioner serves what is still pending."""
    h.clock.now += timedelta(minutes=1)
    h.kubelets()
    h.summaries.append(disrupt.run(h.deps))
    h.cluster.schedule()
    h.provisioner()


def test_two_waves_launch_four_nodes_and_bind_every_pod():
    h = Harness.build(config(consolidate_after="0s", sizes=("large",)))
    for i in range(WAVE):
        h.cluster.add_pod(deployment_pod("first", i, cpu="500m", mem="1Gi"))
    h.provisioner()
    for minute in range(15):
        if minute == 3:
            for i in range(WAVE):
                h.cluster.add_pod(deployment_pod("second", i, cpu="500m", mem="1Gi"))
            h.provisioner()
        _minute(h)
    launched = len(h.compute.instances)
    pending = [p.key for p in h.cluster.pods.values() if not p.spec.node_name]
    decisions = [d for s in h.summaries for d in s.decisions]
    assert (launched, pending) == (NEEDED, []), decisions
    assert not h.compute.terminated, decisions


def test_the_room_of_pods_nominated_to_a_nodes_claim_is_not_free():
    """The view consolidation simulates with: a node whose claim's pods are still pending offers no room."""
    h = Harness.build(config(consolidate_after="0s", sizes=("large",)))
    for i in range(3):
        h.cluster.add_pod(deployment_pod("wave", i, cpu="500m", mem="1Gi"))
    h.provisioner()
    h.clock.now += timedelta(minutes=1)
    h.kubelets()  # registered, initialized, Ready: its pods are not bound yet
    [claim] = h.ledger.active()
    assert claim.status == ClaimStatus.REGISTERED
    pods = h.cluster.pod_views()
    view = candidates.build(h.cluster.list_nodes(), pods, h.ledger.active(), [], "test", h.clock.now,
                            h.ledger.nominated(h.clock.now, [p.key for p in pods]))
    [node] = view.existing
    assert node.remaining["cpu"] < 500, node.remaining
    assert view.pending == []  # their room is taken on their node, not a second time elsewhere
