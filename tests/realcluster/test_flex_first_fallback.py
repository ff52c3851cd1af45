"""Flex-first fallback on the real control plane: `examples/flex-first.yaml`'s two NodePools (`flex`,
weight 100, c7i-flex only; `general`, weight 1, c/m/r) while EC2 answers every c7i-flex offering with
InsufficientInstanceCapacity (the scenario format's capacity errors on the provisioner's CreateFleet, as
`carpool simulate` injects them). What users see: carpool tried `flex` first (the errors were injected),
said so on the pods (`InsufficientCapacityError`), launched from `general` in the same invocation (the
pods do not wait for another batch), and the real scheduler bound every pod to a `general` node whose
hollow kubelet reports it Running; local EC2 runs no c7i-flex instance and every NodeClaim is `general`'s.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tests.realcluster.controlplane import require_binaries
from tests.realcluster.tier import RealTier

from carpool.sim.run.scenario import CapacityFailure

#: boot to kubelet start; short so the scenario stays short, still after the launch (`CARPOOL_TIER_BOOT_SECONDS`)
BOOT_SECONDS = float(os.environ.get("CARPOOL_TIER_BOOT_SECONDS", "10"))
REPLICAS = 4
#: the watcher's first run, a batch, CreateFleet, the boot, registration and binding, on a shared machine
SERVED_WITHIN = 240.0
#: the fallback is the same invocation's next CreateFleet: seconds, never another watcher pass and batch
SAME_INVOCATION_SECONDS = 15.0
#: no `until`: the shortage lasts the whole scenario, so a c7i-flex node can only come from a broken fallback
SHORTAGE = CapacityFailure.model_validate({"instanceType": "c7i-flex.*", "from": 0,
                                          "error": "InsufficientInstanceCapacity"})


@pytest.fixture(scope="module")
def tier() -> Iterator[RealTier]:
    require_binaries(("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubemark"))
    started = time.monotonic()
    with RealTier(boot_seconds=BOOT_SECONDS, capacity_errors=[SHORTAGE]) as running:
        yield running
    print(f"flex-first fallback scenario: {time.monotonic() - started:.0f} s")


def _running(tier: RealTier) -> list[dict[str, Any]]:
    pods = tier.pods("app=web", namespace="default")
    done = [p for p in pods if p["status"].get("phase") == "Running" and p["spec"].get("nodeName")]
    return done if len(done) == REPLICAS else []


def _family(instance_type: str) -> str:
    return instance_type.split(".", 1)[0]


def test_a_capacity_shortage_falls_back_to_the_general_pool(tier: RealTier) -> None:
    tier.apply([tier.deployment("web", REPLICAS)])
    running = tier.wait_for(f"{REPLICAS} pods Running", lambda: _running(tier), SERVED_WITHIN)

    # flex was tried first: the weight-100 pool's offerings reached CreateFleet and were refused
    refused = {e["LaunchTemplateAndOverrides"]["Overrides"].get("InstanceType") for e in tier.faults.injected}
    assert tier.faults.injected, "no c7i-flex offering reached CreateFleet: the flex pool was not tried first"
    assert refused and all(_family(str(t)) == "c7i-flex" for t in refused), refused

    nodes = {n["metadata"]["name"]: n for n in tier.nodes()}
    for pod in running:
        labels = nodes[pod["spec"]["nodeName"]]["metadata"]["labels"]
        assert labels.get("karpenter.sh/nodepool") == "general", (pod["metadata"]["name"], labels)
        assert _family(labels.get("node.kubernetes.io/instance-type", "")) != "c7i-flex", labels

    instances = tier.instances(("pending", "running"))
    assert instances, "local EC2 runs no instance"
    assert not [i["InstanceId"] for i in instances if _family(i["InstanceType"]) == "c7i-flex"], \
        [(i["InstanceId"], i["InstanceType"]) for i in instances]
    pools = {c["metadata"]["labels"].get("karpenter.sh/nodepool") for c in tier.nodeclaims()}
    assert pools == {"general"}, pools

    # the pods were told why they waited, as Karpenter tells them
    said = [e for e in tier.events("InsufficientCapacityError")
            if e["involvedObject"].get("kind") == "Pod" and "c7i-flex" in e.get("message", "")]
    assert said, sorted({e.get("reason") for e in tier.events()})
    assert not tier.lambdas.errors(), [e.error for e in tier.lambdas.errors()][:2]


def test_the_fallback_launches_in_the_invocation_that_hit_the_errors(tier: RealTier) -> None:
    """The general instances were launched right after the refusals, not by a later watcher pass
    (runs after the scale-up test, on the same tier)."""
    tier.wait_for("the scale-up served", lambda: _running(tier), SERVED_WITHIN)
    first_refusal = tier.started + min(e["at"] for e in tier.faults.injected)
    launches = sorted(tier.stamps.launched.values())
    assert launches, "no CreateFleet answered an instance"
    waited = launches[0] - first_refusal
    assert 0 <= waited < SAME_INVOCATION_SECONDS, (
        f"the first general launch came {waited:.1f} s after the first refusal: another pass, not the fallback")
