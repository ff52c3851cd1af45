"""Learned capacity end to end on local AWS: the registrar stores what a node really reports under (type,
AMI it runs); a fresh process reads it back from DynamoDB; the next plan uses it ("learned")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from carpool_env import (
    CLUSTER,
    T0,
    LambdaContext,
    MakeDeps,
    manifests,
    nodeclass,
    nodepool,
    pending_pods,
    sqs_batch,
)

from carpool import labels
from carpool.api import events
from carpool.api.k8s import Node
from carpool.app import images, pools, wiring
from carpool.app.provisioning import provision
from carpool.sim.localaws.lambda_runtime import load_handler
from carpool.state.models import Claim, ClaimStatus

ROOT = Path(__file__).resolve().parents[2]
CONFIG = manifests(
    nodepool(requirements={"node.kubernetes.io/instance-type": ["m5.large", "m5.xlarge"],
                           "karpenter.sh/capacity-type": ["on-demand"]}),
    nodeclass(),
)
REPORTED_MIB = 7300  # less than the 7577 MiB the flat 7.5% estimate gives an m5.large


@pytest.fixture
def deps(make_deps: MakeDeps) -> Any:
    d = make_deps(CONFIG)
    wiring.use(d)  # the registrar handler runs on these (make_deps forgets them afterwards)
    return d


def _node_for(claim: Claim, image_id: str) -> Node:
    return Node.model_validate({
        "metadata": {"name": f"ip-{claim.instance_id}", "labels": {
            labels.INSTANCE_TYPE: claim.instance_type, labels.ARCH: "amd64", labels.OS: "linux",
            labels.ZONE: claim.zone, labels.NODEPOOL: claim.nodepool, labels.OWNED_BY: CLUSTER,
            labels.IMAGE_ID: image_id}},
        "spec": {"providerID": f"aws:///{claim.zone}/{claim.instance_id}"},
        "status": {"capacity": {"cpu": "2", "memory": f"{REPORTED_MIB}Mi", "pods": "29"},
                   "allocatable": {"cpu": "1930m", "memory": f"{REPORTED_MIB - 674}Mi", "pods": "29"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    })


def _register(deps: Any, node: Node) -> dict[str, Any]:
    """The node joins the (simulated) cluster and the registrar handles its event."""
    deps.cluster.add_node(node.to_json_dict())
    entry = events.node_registered_entry(CLUSTER, node, deps.clock(), "bus")
    return load_handler("registrar", ROOT / "functions")(sqs_batch([entry]), LambdaContext())


def test_registration_learns_and_a_fresh_process_plans_with_it(deps: Any) -> None:
    outcome = provision.provision_pods(pending_pods(1, cpu="1"), deps, reason="test")
    (claim,) = outcome.launched
    assert claim.instance_type == "m5.large"
    assert _register(deps, _node_for(claim, claim.image_id)) == {"batchItemFailures": []}
    assert deps.ledger.get(claim.name).status == ClaimStatus.REGISTERED

    # a fresh process (a new Lambda container) reads the cache back from DynamoDB
    code = ("import json; from datetime import datetime, UTC;"
            "from carpool.adapters.aws.dynamodb.learned_capacity import DynamoCapacityCache;"
            "recs = DynamoCapacityCache().all(datetime(2026, 3, 2, tzinfo=UTC));"
            "print(json.dumps({f'{t}|{i}': r.capacity.get('memory') for (t, i), r in recs.items()}))")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "shared")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert json.loads(out.stdout.strip()) == {f"m5.large|{claim.image_id}": REPORTED_MIB * 2**20}

    manifests = deps.config.load()
    prepared = pools.prepare(manifests, deps.catalog.get(T0), lambda nc: images.resolve(nc, deps), {},
                             deps.capacity.all(T0), set(), {})
    assert prepared.capacity_sources["default"] == {"m5.large": "learned", "m5.xlarge": "extrapolated"}
    assert prepared.contexts["default"].sizes["m5.large"].capacity["memory"] == REPORTED_MIB * 2**20


def test_a_node_on_an_unexpected_ami_is_not_learned(deps: Any) -> None:
    outcome = provision.provision_pods(pending_pods(1, cpu="1", prefix="q"), deps, reason="test")
    (claim,) = outcome.launched
    _register(deps, _node_for(claim, "ami-0somethingelse"))
    assert deps.capacity.all(T0) == {}
