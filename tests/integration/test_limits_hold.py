"""Limits hold for every resource at every moment, and the ledger is never written from a stale copy:
the real handlers (provisioner, disruption, registrar, interruption) on local AWS (moto on 127.0.0.1),
the simulation's cluster playing the API server and the kube-scheduler (issue 30, items 5 and 7).

- A GPU limit added while GPU nodes run counts them: no GPU past the limit is launched.
- Nodes adopted after their claims were lost are charged their GPUs (from their instance type, before
  the device plugin advertises them): the limit still holds afterwards.
- A claim another function released while the interruption function was marking it is not written back
  (it would run a node its pool's usage no longer counts).
- A `Node Deleted` event for a node that still runs its claim's instance (a stale duplicate, a name
  reused) releases nothing: no second node launches past the pool's limit.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from carpool_env import (
    CLUSTER,
    MakeDeps,
    apply_config,
    helper_client,
    manifests,
    nodeclass,
    nodepool,
    pending_pods,
    running_instances,
    sqs_batch,
)

from carpool.adapters.aws.dynamodb.claims import claim_key
from carpool.adapters.aws.dynamodb.pool_usage import usage_key
from carpool.api import events
from carpool.api.k8s import Pod
from carpool.app import wiring
from carpool.app.wiring import Dependencies
from carpool.karpenter_objects import TERMINATION_FINALIZER
from carpool.ports import NodePatch
from carpool.sim.localaws.lambda_runtime import load_handler
from carpool.sim.localaws.server import LocalAws
from carpool.state.models import Claim, ClaimStatus

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("event_path")

GPU = "nvidia.com/gpu"
#: one NVIDIA GPU per node: a pod asking one GPU gets a node of its own
ONE_GPU = {"node.kubernetes.io/instance-type": ["g4dn.xlarge"], "karpenter.sh/capacity-type": ["on-demand"]}
ON_DEMAND_LARGE = {"karpenter.k8s.aws/instance-family": ["c5", "m5"], "karpenter.sh/capacity-type": ["on-demand"],
                   "karpenter.k8s.aws/instance-size": ["large"]}
AL2023_NVIDIA = {"name": "amazon-eks-node-al2023-x86_64-nvidia-1.32-v20260101", "architecture": "x86_64",
                 "creationDate": "2026-01-01T00:00:00Z",
                 "parameter": "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/nvidia/recommended/image_id"}
#: consolidation stays out of these tests: they are about the books, not about removing nodes
NO_CONSOLIDATION = {"consolidateAfter": "Never"}


class Context:
    """A Lambda context whose remaining time runs down with the wall clock."""

    function_name = "carpool"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:carpool"
    aws_request_id = "req"

    def __init__(self, seconds: float = 60) -> None:
        self._end = time.monotonic() + seconds

    def get_remaining_time_in_millis(self) -> int:
        return int((self._end - time.monotonic()) * 1000)


def config(requirements: dict[str, list[str]], limits: dict[str, str]) -> str:
    return manifests(nodepool(requirements=requirements, limits=limits, disruption=NO_CONSOLIDATION), nodeclass())


def unschedulable(deps: Dependencies, n: int, prefix: str, **requests: str) -> list[Pod]:
    """Pods created in the cluster and marked Unschedulable by its scheduler."""
    pods = pending_pods(n, cpu="1", prefix=prefix)
    for pod in pods:
        raw = pod.to_json_dict()
        if requests:
            raw["spec"]["containers"][0]["resources"]["requests"].update(requests)
            raw["spec"]["containers"][0]["resources"]["limits"] = dict(requests)
        deps.cluster.add_pod(raw)  # type: ignore[attr-defined]
    deps.cluster.bind()  # type: ignore[attr-defined]
    live = {p.key: p for p in deps.cluster.pending_pods()}
    return [live[p.key] for p in pods]


def provision(deps: Dependencies, pods: list[Pod]) -> None:
    entries = [events.pod_unschedulable_entry(CLUSTER, p, deps.clock(), "bus") for p in pods]
    answer = load_handler("provisioner", ROOT / "functions")(sqs_batch(entries), Context())
    assert answer == {"batchItemFailures": []}


def join(deps: Dependencies, claim: Claim, name: str | None = None) -> str:
    """The claim's instance boots and its node joins, Ready, reporting what the kubelet reports before
    any device plugin runs (cpu, memory, pods: no GPUs yet). `name`: its private-IP name."""
    name = name or f"ip-{claim.instance_id}.ec2.internal"
    allocatable = {"cpu": f"{claim.allocatable['cpu']}m", "memory": str(claim.allocatable["memory"]),
                   "pods": str(claim.allocatable.get("pods", 29))}
    deps.cluster.add_node({  # type: ignore[attr-defined]
        "metadata": {"name": name, "labels": {**claim.labels, "karpenter.sh/nodepool": claim.nodepool,
                                              "node.kubernetes.io/instance-type": claim.instance_type or ""}},
        "spec": {"providerID": f"aws:///{claim.zone}/{claim.instance_id}"},
        "status": {"allocatable": allocatable, "capacity": allocatable,
                   "conditions": [{"type": "Ready", "status": "True"}]},
    })
    return name


def register(deps: Dependencies, node: str) -> None:
    entry = events.node_registered_entry(CLUSTER, deps.cluster.get_node(node), deps.clock(), "bus")
    assert load_handler("registrar", ROOT / "functions")(sqs_batch([entry]), Context()) == {"batchItemFailures": []}


def launched_and_registered(deps: Dependencies) -> list[Claim]:
    """Every launched claim's node joins and the registrar registers it; the kube-scheduler binds."""
    deps.clock.now += timedelta(seconds=60)  # type: ignore[attr-defined]
    for claim in deps.ledger.active():
        if claim.status == ClaimStatus.LAUNCHED:
            register(deps, join(deps, claim))
    deps.cluster.bind()  # type: ignore[attr-defined]
    claims = deps.ledger.active()
    assert all(c.status == ClaimStatus.REGISTERED for c in claims)
    return claims


def gpus_running(aws: LocalAws) -> int:
    return sum(1 for i in running_instances(aws) if i["InstanceType"] == "g4dn.xlarge")


def disruption_run(deps: Dependencies) -> None:
    event = {"version": "0", "id": "s", "detail-type": "Scheduled Event", "source": "aws.events",
             "account": "123456789012", "time": deps.clock().strftime("%Y-%m-%dT%H:%M:%SZ"),
             "region": "us-east-1", "resources": [], "detail": {}}
    load_handler("disruption", ROOT / "functions")(event, Context())


def assert_usage_is_what_runs(deps: Dependencies, *resources: str) -> None:
    claims = deps.ledger.active()
    usage = deps.ledger.usage().get("default", {})
    for resource in resources:
        assert usage.get(resource, 0) == sum(c.reserved.get(resource, 0) for c in claims), resource


# -- item 5: limits hold for every resource ----------------------------------------------------------------
def test_a_gpu_limit_added_while_gpu_nodes_run_counts_them(make_deps: MakeDeps, aws: LocalAws) -> None:
    aws.seed_amis([AL2023_NVIDIA])
    deps = make_deps(config(ONE_GPU, {"cpu": "1000"}))
    wiring.use(deps)
    provision(deps, unschedulable(deps, 2, "train", **{GPU: "1"}))
    launched_and_registered(deps)
    assert gpus_running(aws) == 2

    # the operator caps the pool at the 2 GPUs it runs; one more GPU pod turns pending
    apply_config(deps.cluster, config(ONE_GPU, {"cpu": "1000", GPU: "2"}))  # type: ignore[arg-type]
    deps.clock.now += timedelta(minutes=10)  # type: ignore[attr-defined]  # past the config cache
    provision(deps, unschedulable(deps, 1, "late", **{GPU: "1"}))
    assert gpus_running(aws) == 2, "a GPU was launched past the pool's nvidia.com/gpu limit of 2"
    assert deps.ledger.usage()["default"][GPU] == 2
    assert_usage_is_what_runs(deps, "cpu", "nodes", GPU)


def as_the_previous_release_stored_them(deps: Dependencies, aws: LocalAws, resource: str) -> None:
    """The claims and the pool's usage as a release that charged only limited resources wrote them: the
    pool had no limit on `resource`, so neither holds any (a direct edit of the items)."""
    client, table = helper_client(aws, "dynamodb"), os.environ["CARPOOL_TABLE"]
    names = {"#res": "reserved", "#r": resource}
    for claim in deps.ledger.active():
        client.update_item(TableName=table, Key=claim_key(claim.name), UpdateExpression="REMOVE #res.#r",
                           ExpressionAttributeNames=names)
    client.update_item(TableName=table, Key=usage_key("default"), UpdateExpression="REMOVE #r",
                       ExpressionAttributeNames={"#r": resource})


def test_a_gpu_limit_added_later_counts_gpu_nodes_reserved_before_every_resource_was(
        make_deps: MakeDeps, aws: LocalAws) -> None:
    aws.seed_amis([AL2023_NVIDIA])
    deps = make_deps(config(ONE_GPU, {"cpu": "1000"}))
    wiring.use(deps)
    provision(deps, unschedulable(deps, 2, "train", **{GPU: "1"}))
    launched_and_registered(deps)
    as_the_previous_release_stored_them(deps, aws, GPU)
    assert GPU not in deps.ledger.usage()["default"]

    apply_config(deps.cluster, config(ONE_GPU, {"cpu": "1000", GPU: "2"}))  # type: ignore[arg-type]
    deps.clock.now += timedelta(minutes=10)  # type: ignore[attr-defined]
    disruption_run(deps)  # every run charges the claims what their nodes have and they never held
    provision(deps, unschedulable(deps, 1, "late", **{GPU: "1"}))
    assert gpus_running(aws) == 2, "a GPU was launched past the pool's nvidia.com/gpu limit of 2"
    assert deps.ledger.usage()["default"][GPU] == 2
    assert_usage_is_what_runs(deps, "cpu", "nodes", GPU)


def test_adopted_gpu_nodes_are_charged_their_gpus(make_deps: MakeDeps, aws: LocalAws) -> None:
    aws.seed_amis([AL2023_NVIDIA])
    deps = make_deps(config(ONE_GPU, {"cpu": "1000", GPU: "2"}))
    wiring.use(deps)
    provision(deps, unschedulable(deps, 2, "train", **{GPU: "1"}))
    claims = launched_and_registered(deps)
    # the claims are lost while their nodes run (the bookkeeping of a crashed invocation, item 1): the
    # instances carry carpool's tags, their nodes joined
    for claim in claims:
        deps.ledger.release(claim)
    assert deps.ledger.usage()["default"].get(GPU, 0) == 0

    deps.clock.now += timedelta(minutes=10)  # type: ignore[attr-defined]
    disruption_run(deps)
    adopted = deps.ledger.active()
    assert {c.instance_id for c in adopted} == {i["InstanceId"] for i in running_instances(aws)}

    provision(deps, unschedulable(deps, 1, "late", **{GPU: "1"}))
    assert gpus_running(aws) == 2, "a GPU was launched past the pool's nvidia.com/gpu limit of 2"
    assert all(c.reserved.get(GPU) == 1 for c in adopted), [c.reserved for c in adopted]
    assert deps.ledger.usage()["default"][GPU] == 2
    assert_usage_is_what_runs(deps, "cpu", "nodes", GPU)


class ReleasedMeanwhile:
    """The ledger as another function acts on it: the first time the interruption function writes the
    claim `victim` back, the registrar has just released it (its node's deletion was confirmed)."""

    def __init__(self, ledger: Any, victim: str) -> None:
        self._ledger = ledger
        self._victim = victim
        self.released = False

    def _first(self, claim: Claim) -> None:
        if claim.name == self._victim and not self.released:
            self.released = True
            self._ledger.release(self._ledger.get(self._victim))

    def mark_launched(self, claim: Claim) -> None:
        self._first(claim)
        self._ledger.mark_launched(claim)

    def save(self, claim: Claim) -> None:
        self._first(claim)
        self._ledger.save(claim)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ledger, name)


def test_a_claim_released_meanwhile_is_not_written_back(make_deps: MakeDeps, aws: LocalAws) -> None:
    deps = make_deps(config(ON_DEMAND_LARGE, {"cpu": "1000"}))
    wiring.use(deps)
    provision(deps, unschedulable(deps, 1, "web", cpu="1500m"))
    (claim,) = launched_and_registered(deps)
    wrapped = ReleasedMeanwhile(deps.ledger, claim.name)
    racing = dataclasses.replace(deps, ledger=wrapped)
    wiring.use(racing)
    warning = {"version": "0", "id": "w1", "detail-type": events.SPOT_INTERRUPTION, "source": events.EC2_SOURCE,
               "account": "123456789012", "time": deps.clock().strftime("%Y-%m-%dT%H:%M:%SZ"),
               "region": "us-east-1", "resources": [],
               "detail": {"instance-id": claim.instance_id, "instance-action": "terminate"}}
    record = {"messageId": "m0", "receiptHandle": "r", "body": json.dumps(warning), "attributes": {},
              "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs",
              "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q", "awsRegion": "us-east-1"}
    load_handler("interruption", ROOT / "functions")({"Records": [record]}, Context())
    assert wrapped.released, "the interruption function never wrote the claim"
    assert deps.ledger.get(claim.name) is None, "the released claim was written back"
    assert_usage_is_what_runs(deps, "cpu", "memory", "nodes")


# -- item 7: a Node Deleted event is checked with the API server ------------------------------------------
def test_a_node_deleted_event_for_a_node_that_still_runs_releases_nothing(make_deps: MakeDeps, aws: LocalAws) -> None:
    deps = make_deps(config(ON_DEMAND_LARGE, {"cpu": "1000", "nodes": "1"}))
    wiring.use(deps)
    provision(deps, unschedulable(deps, 1, "web", cpu="1500m"))
    (claim,) = launched_and_registered(deps)
    node = deps.cluster.get_node(claim.node_name or "")
    assert node is not None
    registrar = load_handler("registrar", ROOT / "functions")
    # a stale duplicate (no providerID in it), then one whose providerID is the node's own: the node runs
    stale = [events.node_deleted_entry(CLUSTER, node.name, None, deps.clock(), "bus"),
             events.node_deleted_entry(CLUSTER, node.name, node.provider_id, deps.clock(), "bus")]
    assert registrar(sqs_batch(stale), Context()) == {"batchItemFailures": []}
    kept = deps.ledger.get(claim.name)

    # another pod turns pending: the pool's one node runs, so nothing launches
    provision(deps, unschedulable(deps, 1, "more", cpu="1500m"))
    assert len(running_instances(aws)) == 1, "a second node was launched past the pool's nodes limit of 1"
    assert kept is not None, "the claim of a running node was released"
    assert deps.ledger.usage()["default"]["nodes"] == 1

    # the node really goes (deleted, and its termination finalizer removed): now the claim is released
    deps.cluster.remove_node(node.name)  # type: ignore[attr-defined]
    deps.cluster.patch_node(node.name, NodePatch(remove_finalizers=frozenset({TERMINATION_FINALIZER})))
    assert deps.cluster.get_node(node.name) is None
    gone = events.node_deleted_entry(CLUSTER, node.name, node.provider_id, deps.clock(), "bus")
    assert registrar(sqs_batch([gone]), Context()) == {"batchItemFailures": []}
    assert deps.ledger.get(claim.name) is None


def test_a_late_node_deleted_event_for_a_reused_name_releases_only_the_gone_instances_claim(
        make_deps: MakeDeps, aws: LocalAws) -> None:
    deps = make_deps(config(ON_DEMAND_LARGE, {"cpu": "1000", "nodes": "2"}))
    wiring.use(deps)
    provision(deps, unschedulable(deps, 2, "web", cpu="1500m"))
    # the later name goes first: the claim a lookup by node name alone finds first is the live one
    second, first = sorted(deps.ledger.active(), key=lambda c: c.name)
    reused = "ip-10-0-3-7.ec2.internal"
    deps.clock.now += timedelta(seconds=60)  # type: ignore[attr-defined]
    register(deps, join(deps, first, reused))
    gone = deps.cluster.get_node(reused)
    # the first instance goes; its Node Deleted event is delayed, and EC2 gives its private IP, so its
    # name, to the second instance, whose node joins and registers under it
    deps.cluster.remove_node(reused)  # type: ignore[attr-defined]
    register(deps, join(deps, second, reused))
    late = events.node_deleted_entry(CLUSTER, reused, gone.provider_id, deps.clock(), "bus")
    assert load_handler("registrar", ROOT / "functions")(sqs_batch([late]), Context()) == {"batchItemFailures": []}
    assert deps.ledger.get(first.name) is None, "the gone instance's claim was kept"
    kept = deps.ledger.get(second.name)
    assert kept is not None and kept.node_name == reused, "the claim of the node running under the name was released"
    assert deps.ledger.usage()["default"]["nodes"] == 1


def test_usage_that_drifted_below_what_runs_is_reconciled_from_the_claims(make_deps: MakeDeps, aws: LocalAws) -> None:
    deps = make_deps(config(ON_DEMAND_LARGE, {"cpu": "1000", "nodes": "1"}))
    wiring.use(deps)
    provision(deps, unschedulable(deps, 1, "web", cpu="1500m"))
    launched_and_registered(deps)
    # usage as an older release left it: a claim written back after its release gave its usage back
    client, table = helper_client(aws, "dynamodb"), os.environ["CARPOOL_TABLE"]
    client.update_item(TableName=table, Key=usage_key("default"), UpdateExpression="SET #n = :zero, #c = :zero",
                       ExpressionAttributeNames={"#n": "nodes", "#c": "cpu"},
                       ExpressionAttributeValues={":zero": {"N": "0"}})
    for _ in range(2):  # two disruption runs a minute apart: the usage stayed as it was, so it is set
        deps.clock.now += timedelta(minutes=1)  # type: ignore[attr-defined]
        disruption_run(deps)
    provision(deps, unschedulable(deps, 1, "more", cpu="1500m"))
    assert len(running_instances(aws)) == 1, "a second node was launched past the pool's nodes limit of 1"
    assert_usage_is_what_runs(deps, "cpu", "memory", "nodes")
