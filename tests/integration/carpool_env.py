"""Shared set-up for integration tests that drive the use cases against local AWS: a controllable clock,
production adapters (pointed at moto) with the simulation's in-memory cluster, and pending pods."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from typing import Any

from carpool.api import events
from carpool.api.k8s import Pod
from carpool.app import wiring
from carpool.app.settings import Settings
from carpool.app.sources import StaticCatalogSource
from carpool.sim.cluster import SimulatedCluster
from carpool.sim.localaws import LocalAws

CLUSTER = "itest"  # the session LocalAws fixture's cluster (conftest.CLUSTER)
AL2023_X86 = {"name": "al2023-x86", "architecture": "x86_64", "creationDate": "2026-01-01T00:00:00Z",
              "parameter": "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id"}


class Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


def build_deps(aws: LocalAws, clock: Clock, config: str) -> wiring.Dependencies:
    """Production wiring on local AWS; the shipped catalog keeps tests fast (the EC2-built catalog is
    exercised by the simulation)."""
    aws.put_config(config)
    settings = dataclasses.replace(Settings.from_env(), cluster_name=CLUSTER, instance_profile="node-profile")
    deps = wiring.build_from_env(settings, cluster=SimulatedCluster(clock))
    return dataclasses.replace(deps, clock=clock, catalog=StaticCatalogSource("us-east-1"))


def pending_pods(n: int, cpu: str = "1", prefix: str = "p", memory: str = "1Gi",
                 deps: wiring.Dependencies | None = None) -> list[Pod]:
    """Pending pods; with `deps` they are also created in its (simulated) cluster, as real pending pods
    are (in-flight room is only held for pods that still exist)."""
    pods = [Pod.model_validate({
        "metadata": {"name": f"{prefix}{i}", "namespace": "default", "uid": f"{prefix}{i}"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    }) for i in range(n)]
    for pod in pods if deps is not None else ():
        deps.cluster.add_pod(pod.to_json_dict())  # type: ignore[attr-defined]
    return pods


def sqs_batch(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The Lambda SQS event for PutEvents entries as the bus rule delivers them."""
    records = []
    for i, entry in enumerate(entries):
        body = json.dumps(events.delivered_event(entry, event_id=f"e{i}"), default=str)
        records.append({"messageId": f"m{i}", "receiptHandle": "r", "body": body, "attributes": {},
                        "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs",
                        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q", "awsRegion": "us-east-1"})
    return {"Records": records}


class LambdaContext:
    function_name = "carpool"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:carpool"
    aws_request_id = "req"


T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
