"""Launch templates are reused while claims use them and deleted once unused for an hour."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from carpool_env import CLUSTER, MakeDeps, manifests, nodeclass, nodepool, pending_pods

from carpool.app import disrupt
from carpool.app.launching import LAUNCH_TEMPLATE_LABEL
from carpool.app.provisioning import provision

CONFIG = manifests(
    nodepool(requirements={"node.kubernetes.io/instance-type": ["m5.large"],
                           "karpenter.sh/capacity-type": ["on-demand"]}),
    nodeclass(tags={"carpool-test": "launch-template-gc"}),  # a template name no other test shares
)


@pytest.fixture
def deps(make_deps: MakeDeps) -> Any:
    # moto stamps CreateTime with the wall clock, so this test's clock starts there
    return make_deps(CONFIG, start=datetime.now(UTC))


def _templates(deps: Any) -> set[str]:
    return {t["LaunchTemplateName"] for t in deps.compute.list_launch_templates(CLUSTER)}


def test_templates_are_reused_then_collected_when_unused(deps: Any) -> None:
    # pods too big to share an m5.large, so each needs its own node (and launch)
    first = provision.provision_pods(pending_pods(1, cpu="1500m", prefix="a", deps=deps), deps, reason="test").launched[0]
    second = provision.provision_pods(pending_pods(1, cpu="1500m", prefix="b", deps=deps), deps, reason="test").launched[0]
    assert first.name != second.name
    name = first.labels[LAUNCH_TEMPLATE_LABEL]
    assert name.startswith(f"carpool/{CLUSTER}/")
    assert second.labels[LAUNCH_TEMPLATE_LABEL] == name          # same AMI, max pods, user data: reused
    assert _templates(deps) == {name}  # one template, created once (the `aws` fixture left none behind)

    for claim in (first, second):  # their nodes joined: live claims, not registration time-outs
        deps.ledger.mark_registered(claim.name, f"node-{claim.name}", deps.clock())
    deps.clock.now += timedelta(hours=2)
    assert name not in disrupt.run(deps).launch_templates_deleted   # still used by live claims
    assert name in _templates(deps)
    for claim in deps.ledger.active():
        deps.ledger.release(claim)
    assert name in disrupt.run(deps).launch_templates_deleted
    assert name not in _templates(deps)
