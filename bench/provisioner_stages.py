"""Wall time per stage of one provisioner invocation: 1,000 pending pods of Karpenter's benchmark mix in
one SQS batch, through the real handler (`functions/provisioner/handler.py`) and production adapters on
local AWS (moto), with the simulated cluster holding the pods.

Stages: parse (records to events), confirm (the cluster's pending pods read and matched), schedule (the
world read: config, catalog, AMIs, offerings, in-flight claims; and the scheduling rounds), reserve (the
claims' conditional writes), launch (launch templates, one CreateFleet per group of identical requests,
the instances tagged and the launched claims recorded). "other" is the rest
of the invocation (batch bookkeeping, coexistence filter, nominations). Each stage is timed by wrapping
the function that does it, for this measurement only; the handler itself runs unchanged.
"""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import workloads
from bench.stages import pod_manifest

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = "bench"
#: What the stack's environment tells every function (`carpool.app.settings`): the cluster's facts, which
#: no node launches without, and the node role with its instance profile, which the config's `role` names.
DEPLOYED_ENV: dict[str, str] = {
    "CARPOOL_CLUSTER_NAME": CLUSTER, "CARPOOL_CLUSTER_VERSION": "1.32",
    "CARPOOL_CLUSTER_ENDPOINT": f"https://{CLUSTER}.sim.eks.local", "CARPOOL_CLUSTER_CA": "Q0E=",
    "CARPOOL_CLUSTER_CIDR": "10.100.0.0/16", "CARPOOL_CLUSTER_DNS": "10.100.0.10", "CARPOOL_CLUSTER_IP_FAMILY": "ipv4",
    "CARPOOL_NODE_ROLE_ARN": "arn:aws:iam::123456789012:role/node-role", "CARPOOL_INSTANCE_PROFILE": "node-profile",
}


def apply_config(cluster: Any, text: str | None = None) -> Any:
    """`kubectl apply` of the bench's NodePool and EC2NodeClass (`CONFIG`) to a simulated cluster, where the
    functions list their config as in a deployment; answers the cluster."""
    import yaml

    for doc in yaml.safe_load_all(text or CONFIG):
        if isinstance(doc, dict):
            cluster.apply_object(doc)
    return cluster


def deployed_settings() -> Any:
    """The functions' settings in the bench's local AWS: its environment as the stack sets it."""
    from carpool import environment
    from carpool.app.settings import Settings

    return Settings.from_env({**environment.current(), **DEPLOYED_ENV})
TARGET_SECONDS = 5.0
STAGES = ("parse", "confirm", "schedule", "reserve", "launch")
AL2023_X86 = {"name": "al2023-x86", "architecture": "x86_64", "creationDate": "2026-01-01T00:00:00Z",
              "parameter": "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id"}
CONFIG = f"""\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: default}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
        - {{key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}}
        - {{key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["5"]}}
  limits: {{cpu: "100000"}}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  role: node-role
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: {CLUSTER}}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: {CLUSTER}}}}}]
"""


class _Context:
    """The Lambda context: the provisioner's deployed timeout, running down with the wall clock."""

    function_name = "carpool-provisioner"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:carpool-provisioner"
    aws_request_id = "bench"

    def __init__(self, seconds: float) -> None:
        self._end = time.monotonic() + seconds

    def get_remaining_time_in_millis(self) -> int:
        return int((self._end - time.monotonic()) * 1000)


class _Timer:
    def __init__(self) -> None:
        self.seconds = dict.fromkeys(STAGES, 0.0)

    def wrap(self, stage: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[stage] += time.perf_counter() - start
        return timed


@contextmanager
def _patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    saved = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, saved)


def _batch(pods: list[Any], now: datetime) -> dict[str, Any]:
    from carpool.api import events

    return sqs_records([events.pod_unschedulable_entry(CLUSTER, pod, now, "bus") for pod in pods])


def sqs_records(entries: list[dict[str, Any]], arn: str = "arn:aws:sqs:us-east-1:123456789012:q") -> dict[str, Any]:
    """The Lambda SQS event of the events a rule delivers to the queue `arn` for PutEvents `entries`."""
    from carpool.api import events

    records = []
    for i, entry in enumerate(entries):
        body = json.dumps(events.delivered_event(entry, event_id=f"e{i}"), default=str)
        records.append({"messageId": f"m{i}", "receiptHandle": "r", "body": body, "attributes": {},
                        "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs",
                        "eventSourceARN": arn, "awsRegion": "us-east-1"})
    return {"Records": records}


def measure(count: int = 1000, snapshot_catalog: bool = False) -> dict[str, Any]:
    """One invocation of `count` pods; seconds per stage, the total, and what it launched.
    `snapshot_catalog`: the shipped catalog instead of the one read from (local) EC2, to time the
    provisioner's own work without the catalog's first read."""
    from carpool import delivery
    from carpool.app import launching, parsing, wiring
    from carpool.app.provisioning import confirm, record, schedule, world
    from carpool.sim.cluster.simulated import SimulatedCluster
    from carpool.sim.localaws import motofast
    from carpool.sim.localaws.lambda_runtime import load_handler
    from carpool.sim.localaws.server import LocalAws

    # the simulation's local AWS, with its speed-ups of moto's own bookkeeping (carpool.sim.localaws.motofast)
    with LocalAws(cluster=CLUSTER) as aws, motofast.faster_moto():
        aws.create_state()
        aws.create_event_path()
        aws.seed_network(zones=["us-east-1a", "us-east-1b", "us-east-1c"])
        aws.seed_amis([AL2023_X86])
        now = datetime.now(UTC)
        cluster = apply_config(SimulatedCluster(lambda: datetime.now(UTC)))
        for spec in workloads.diverse_pods(count):
            cluster.add_pod(pod_manifest(spec))
        cluster.bind()
        pods = cluster.pending_pods()
        settings = deployed_settings()
        from carpool.adapters.aws.wiring import build_from_env

        deps = build_from_env(settings, cluster=cluster, karpenter=cluster)
        if snapshot_catalog:
            from carpool.app.sources import StaticCatalogSource

            deps.catalog = StaticCatalogSource(aws.region)
        wiring.use(deps)
        try:
            handler = load_handler("provisioner", ROOT / "functions")
            event = _batch(pods, now)
            timer = _Timer()
            ledger = deps.ledger
            with (_patched(parsing, "pod_unschedulable", timer.wrap("parse", parsing.pod_unschedulable)),
                  _patched(confirm, "confirm", timer.wrap("confirm", confirm.confirm)),
                  _patched(cluster, "pending_pods", timer.wrap("confirm", cluster.pending_pods)),
                  _patched(world.World, "read", timer.wrap("schedule", world.World.read)),
                  _patched(schedule, "plan_round", timer.wrap("schedule", schedule.plan_round)),
                  _patched(ledger, "reserve_many", timer.wrap("reserve", ledger.reserve_many)),
                  _patched(launching, "plan_fleet", timer.wrap("launch", launching.plan_fleet)),
                  _patched(launching, "launch_group", timer.wrap("launch", launching.launch_group)),
                  _patched(record, "record_launches", timer.wrap("launch", record.record_launches))):
                start = time.perf_counter()
                response = handler(event, _Context(delivery.TIMEOUT_SECONDS["provisioner"]))
                total = time.perf_counter() - start
            launched = [c for c in deps.ledger.active() if c.instance_id]
            fleets = len({i["Tags"].get("aws:ec2:fleet-id") for i in _instances(aws)})
        finally:
            wiring.use(None)
    return {"seconds": timer.seconds, "total": total, "failedRecords": len(response["batchItemFailures"]),
            "claims": len(launched), "fleets": fleets, "pods": count}


def _instances(aws: Any) -> list[dict[str, Any]]:
    pages = aws.client("ec2").get_paginator("describe_instances").paginate()
    return [{**i, "Tags": {t["Key"]: t["Value"] for t in i.get("Tags", [])}}
            for page in pages for r in page["Reservations"] for i in r["Instances"]]


def rows(count: int = 1000, snapshot_catalog: bool = False) -> list[dict[str, Any]]:
    # the handler writes its metric and log lines to stdout, as in Lambda; they are not the bench's output
    with contextlib.redirect_stdout(io.StringIO()):
        found = measure(count, snapshot_catalog)
    stages = dict(found["seconds"])
    stages["other"] = max(0.0, found["total"] - sum(stages.values()))
    return [{"benchmark": f"provisioner {count} pods (one invocation)", "pods": count,
             "wallSeconds": round(found["total"], 3), "targetSeconds": TARGET_SECONDS,
             "claims": found["claims"], "createFleetCalls": found["fleets"], "failedRecords": found["failedRecords"],
             "stages": {k: round(v, 3) for k, v in stages.items()}}]


def print_rows(items: list[dict[str, Any]]) -> None:
    from bench.stages import share_line

    for r in items:
        ok = "ok" if r["wallSeconds"] <= r["targetSeconds"] and not r["failedRecords"] else "MISSED"
        print(f"{r['benchmark']:34} {r['wallSeconds']:>8.2f} s  {r['claims']} claims ({r['createFleetCalls']} CreateFleet), "
              f"{r['failedRecords']} records "
              f"retried  target <= {r['targetSeconds']:.0f} s {ok}")
        print(f"{'':34}   {share_line(r['stages'], r['wallSeconds'])}")
