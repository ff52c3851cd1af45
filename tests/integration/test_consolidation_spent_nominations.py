"""A consolidation's replacement is launched for every pod it moves, even one still nominated to another
registered node's claim: the kube-scheduler (which knows nothing of carpool's plan) bound the pod on the node
going now and packed the registered node full, so that claim's nomination is spent, not a replacement.

Counted as a replacement, the registered claim let the node drain at once, its pods back to pending with
no room coming (Karpenter's perf suite "basic": 196 bound pods sent back to pending mid scale-out). Through
the real disruption use case with the fakes of `test_consolidation`, within the registered claim's hold."""

from __future__ import annotations

from datetime import timedelta

from carpool_env import manifests, nodeclass, nodepool
from test_consolidation import CLUSTER, Harness, deployment_pod

from carpool.app import disrupt


def _bind(h: Harness, key: str, node: str) -> None:
    pod = h.cluster.pods[key]
    pod.spec.node_name = node
    pod.status = type(pod.status)(phase="Running")


def _config() -> str:
    """m5.large and m5.2xlarge on demand (spot nodes would not be replaced by spot), consolidating at once."""
    return manifests(
        nodepool(requirements={"karpenter.k8s.aws/instance-family": ["m5"],
                               "karpenter.k8s.aws/instance-size": ["large", "2xlarge"],
                               "karpenter.sh/capacity-type": ["on-demand"]},
                 disruption={"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}),
        nodeclass(cluster=CLUSTER, role="carpool-node", alias="al2023@v20250101"),
    )


def test_a_pod_nominated_to_a_full_registered_node_gets_room_in_the_replacement():
    h = Harness.build(_config())
    h.cluster.add_pod(deployment_pod("moved", 0, cpu="1500m", mem="1Gi"))
    h.cluster.add_pod(deployment_pod("other", 0, cpu="300m", mem="1Gi"))
    h.cluster.add_pod(deployment_pod("big", 0, cpu="7", mem="1Gi"))
    h.provisioner()  # claim X, an m5.large, for moved-0 and other-0; claim Y, an m5.2xlarge, for big-0
    h.kubelets()  # both registered now: X's nomination of moved-0 holds a while longer
    by_type = {c.instance_type: c for c in h.ledger.active()}
    x, y = by_type["m5.large"], by_type["m5.2xlarge"]
    # the kube-scheduler's own choice: moved-0 on Y, X filled by another pod
    _bind(h, "default/moved-0", y.node_name or "")
    _bind(h, "default/other-0", x.node_name or "")
    filler = deployment_pod("filler", 0, cpu="1500m", mem="1Gi")
    filler.metadata.annotations["karpenter.sh/do-not-disrupt"] = "true"  # it stays on X
    h.cluster.add_pod(filler)
    _bind(h, "default/filler-0", x.node_name or "")
    del h.cluster.pods["default/big-0"]  # Y holds moved-0 only: an m5.large would do
    assert h.ledger.nominated(h.clock.now, ["default/moved-0"]) == {"default/moved-0": x.name}

    h.clock.now += timedelta(seconds=5)  # the next disruption run, within X's hold
    summary = disrupt.run(h.deps)

    decided = next((d for d in summary.decisions if "underutilized" in d), "")
    assert y.node_name in decided, summary.decisions
    assert x.name not in decided, decided  # X's room is no replacement
    launched = [c for c in h.ledger.active() if c.name not in (x.name, y.name)]
    assert [c.pods for c in launched] == [["default/moved-0"]], summary.decisions
