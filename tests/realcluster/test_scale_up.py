"""A Deployment scaled up is served on the real control plane: the real ReplicaSet controller makes the
pods, the real scheduler marks them Unschedulable, carpool's watcher sees them, its provisioner launches,
each instance's kubelet registers, carpool's registrar lifts `karpenter.sh/unregistered`, the real
scheduler binds and the kubelet reports the pods Running. What users see is checked: pods Running on
carpool's nodes, one instance per node, a NodeClaim per instance, Karpenter's events."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from tests.realcluster.controlplane import require_binaries
from tests.realcluster.tier import RealTier, percentiles

#: boot to kubelet start; shorter than EC2's ~40 s so the test stays short (`CARPOOL_TIER_BOOT_SECONDS`)
BOOT_SECONDS = float(os.environ.get("CARPOOL_TIER_BOOT_SECONDS", "10"))
REPLICAS = 4
#: the watcher's first run, a batch, CreateFleet, the boot, registration and binding, on a shared machine
SERVED_WITHIN = 240.0


@pytest.fixture(scope="module")
def tier() -> Iterator[RealTier]:
    require_binaries(("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubemark"))
    with RealTier(boot_seconds=BOOT_SECONDS) as running:
        yield running


def _running(tier: RealTier) -> list[dict]:
    pods = tier.pods("app=web", namespace="default")
    done = [p for p in pods if p["status"].get("phase") == "Running" and p["spec"].get("nodeName")]
    return done if len(done) == REPLICAS else []


def test_a_deployment_scaled_up_is_served_on_carpools_nodes(tier: RealTier) -> None:
    tier.apply([tier.deployment("web", 0)])
    tier.scale("web", REPLICAS)
    running = tier.wait_for(f"{REPLICAS} pods Running", lambda: _running(tier), SERVED_WITHIN)

    nodes = {n["metadata"]["name"]: n for n in tier.nodes()}
    instances = {i["InstanceId"]: i for i in tier.instances(("running",))}
    claims = tier.nodeclaims()
    for pod in running:
        node = nodes[pod["spec"]["nodeName"]]
        assert node["metadata"]["labels"].get("karpenter.sh/nodepool"), node["metadata"]["labels"]
        assert not [t for t in node["spec"].get("taints") or [] if t["key"] == "karpenter.sh/unregistered"]
    used = {pod["spec"]["nodeName"] for pod in running}
    by_provider = {n["spec"].get("providerID"): name for name, n in nodes.items()}
    # one instance per node: every node the pods run on is a distinct running instance
    node_instances = {nodes[name]["spec"]["providerID"].rsplit("/", 1)[-1] for name in used}
    assert node_instances <= set(instances), (node_instances, set(instances))
    assert len(node_instances) == len(used)
    # a NodeClaim per instance, naming it as its providerID and its node
    claimed = {c["status"].get("providerID"): c for c in claims}
    for iid, inst in instances.items():
        provider = f"aws:///{inst['Placement']['AvailabilityZone']}/{iid}"
        assert provider in claimed, (provider, list(claimed))
        assert claimed[provider]["status"].get("nodeName") == by_provider.get(provider)
    reasons = {e.get("reason") for e in tier.events()}
    assert "Launched" in reasons or "Nominated" in reasons, reasons
    assert not [e for e in tier.lambdas.errors()], [e.error for e in tier.lambdas.errors()][:2]
    # the functions reached the API server with their EKS tokens, each as its own role
    callers = {arn for arn, refused in tier.authenticator.decisions if not refused}
    assert {arn.split("/")[1] for arn in callers} >= {f"carpool-{tier.cluster}-{f}" for f in ("watcher", "registrar")}
    assert not [why for _arn, why in tier.authenticator.decisions if why]


def test_every_pod_has_its_time_to_capacity_stamped(tier: RealTier) -> None:
    """Each served pod waited for a node launched for it: its steps are stamped, in order (runs after the
    scale-up test, on the same tier)."""
    tier.wait_for("the scale-up served", lambda: _running(tier), SERVED_WITHIN)
    steps = tier.stamps.steps()
    served = {f"default/{p['metadata']['name']}" for p in _running(tier)}
    assert served <= set(steps), (served - set(steps), tier.stamps.pending, tier.stamps.bound)
    assert all(v >= 0 for pod in steps.values() for v in pod.values()), steps
    print("time to capacity on the real control plane (s):", percentiles(steps))
