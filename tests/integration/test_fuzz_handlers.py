"""Hostile input through the three SQS-fed handlers (provisioner, registrar, interruption), for real, on
local AWS: 3,000 fuzzed records from a seeded generator (not JSON, not an object, nested garbage, missing
and mistyped fields, wrong detail-types and sources, huge and unicode strings, names Kubernetes would
refuse, negative and malformed quantities, unknown instances and nodes, other clusters), mixed into
batches with good records.

What must hold for every invocation and every record:
- the handler answers a dict (`batchItemFailures`), never raises;
- a malformed record is in `batchItemFailures`, and a warning names its message id and the reason;
- a well-formed record carpool documents as dropped (another cluster, an instance or node it does not
  own, a pod the cluster no longer has pending) is not retried, and a log line names what was dropped;
- no good record is lost: none is reported as failed, and each did its work (the provisioner's pods are
  held by launched claims, the registrar's nodes are registered, the interruption's terminated instance
  has its claim released).
"""

from __future__ import annotations

import json
import logging
import random
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from carpool_env import (
    CLUSTER,
    MakeDeps,
    helper_client,
    manifests,
    nodeclass,
    nodepool,
    pending_pods,
    running_instances,
)

from carpool.api import events
from carpool.app import wiring
from carpool.app.wiring import Dependencies
from carpool.sim.localaws.lambda_runtime import load_handler
from carpool.sim.localaws.server import LocalAws
from carpool.state.models import ClaimStatus

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("event_path")

SEED = 20260501
FUZZED_PER_HANDLER = 1000
#: records per batch, as each queue's event source delivers them (`carpool.delivery`), scaled down where
#: the batch would otherwise be mostly the same few good records
BATCH = {"provisioner": 100, "registrar": 50, "interruption": 10}
ON_DEMAND = {"karpenter.k8s.aws/instance-family": ["c5", "m5"], "karpenter.sh/capacity-type": ["on-demand"],
             "karpenter.k8s.aws/instance-size": ["large"]}
GOOD_PODS = 6


class Context:
    """A Lambda context whose remaining time runs down with the wall clock."""

    memory_limit_in_mb = 512
    aws_request_id = "req"

    def __init__(self, name: str, seconds: float = 60) -> None:
        self.function_name = f"carpool-{name}"
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:carpool-{name}"
        self._end = time.monotonic() + seconds

    def get_remaining_time_in_millis(self) -> int:
        return int((self._end - time.monotonic()) * 1000)


# -- records ----------------------------------------------------------------------------------------------
@dataclass
class Record:
    """One SQS record and what it must come to: "fail" (in batchItemFailures), "drop" (not retried; a log
    line names `token`) or "good" (not retried; its work is checked at the end)."""

    body: Any
    expect: str
    what: str
    token: str = ""
    message_id: str = field(default_factory=lambda: f"m-{uuid.uuid4()}")

    def sqs(self) -> dict[str, Any]:
        record = {"messageId": self.message_id, "receiptHandle": "r", "attributes": {}, "messageAttributes": {},
                  "md5OfBody": "", "eventSource": "aws:sqs", "awsRegion": "us-east-1",
                  "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q"}
        if self.body is not _NO_BODY:
            record["body"] = self.body
        return record


_NO_BODY = object()


def envelope(detail_type: str, source: str, detail: Any, deps: Dependencies) -> dict[str, Any]:
    return {"version": "0", "id": str(uuid.uuid4()), "detail-type": detail_type, "source": source,
            "account": "123456789012", "time": deps.clock().strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": "us-east-1", "resources": [], "detail": detail}


def pod_detail(name: str, deps: Dependencies, cluster: str = CLUSTER, **overrides: Any) -> dict[str, Any]:
    pod = pending_pods(1, prefix=name)[0].to_json_dict()
    pod["metadata"]["name"] = pod["metadata"]["uid"] = name
    detail = {"cluster": cluster, "pod": pod, "observedAt": deps.clock().isoformat()}
    detail.update(overrides)
    return detail


WEIRD = ["ü", "\u202e", "\ud800", "\x00", "😀" * 50, "' OR 1=1 --", "${jndi:ldap://x}", "a,b=c --max-pods=999",
         "\n\r\t", "../../etc/passwd"]
WRONG_TYPES: list[Any] = [None, 0, -1, 1.5, True, [], {}, [1, 2], {"a": {"b": {"c": []}}}, "x" * 150_000]


def huge(rng: random.Random) -> str:
    return rng.choice(["x", "é", "\u4e2d"]) * rng.choice([5_000, 70_000])


def nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = {"a": [value]}
    return value


class Fuzzer:
    """Seeded bad records for one handler; `family` builds a valid body to start from."""

    def __init__(self, rng: random.Random, deps: Dependencies, valid: Callable[[], dict[str, Any]],
                 fields: list[str], foreign_types: list[tuple[str, str]]) -> None:
        self.rng, self.deps, self.valid, self.fields, self.foreign_types = rng, deps, valid, fields, foreign_types

    def record(self) -> Record:
        kind = self.rng.choice(_MUTATIONS)
        return kind(self)


def _not_json(f: Fuzzer) -> Record:
    text = json.dumps(f.valid())
    body = f.rng.choice(["", "{", "}", "nul", text[: f.rng.randrange(1, len(text))], "\x00\x01\x02", "ü" * 10,
                         "{'single': 'quotes'}", "NaN-ish {", "[" * 100_000 + "]" * 100_000])
    return Record(body, "fail", "not JSON" if not body.startswith("[[[") else "nested 100,000 deep")


def _not_an_object(f: Fuzzer) -> Record:
    return Record(json.dumps(f.rng.choice([[], None, 1, "event", True, [f.valid()]])), "fail", "not an object")


def _no_body(f: Fuzzer) -> Record:
    return Record(f.rng.choice([_NO_BODY, None, 42]), "fail", "no string body")


def _missing_envelope_key(f: Fuzzer) -> Record:
    body = f.valid()
    key = f.rng.choice(["id", "detail-type", "source", "time", "detail"])
    del body[key]
    return Record(json.dumps(body), "fail", f"envelope without {key}")


def _mistyped_envelope_key(f: Fuzzer) -> Record:
    body = f.valid()
    key = f.rng.choice(["detail-type", "source", "time", "detail", "resources", "region"])
    allowed = [v for v in WRONG_TYPES if not (isinstance(v, dict) and key == "detail")
               and not (isinstance(v, str) and key in ("resources", "region"))
               and not (isinstance(v, list) and key == "resources")]
    body[key] = f.rng.choice(allowed)
    return Record(json.dumps(body), "fail", f"envelope {key} of the wrong type")


def _wrong_detail_type(f: Fuzzer) -> Record:
    body = f.valid()
    detail_type, source = f.rng.choice(f.foreign_types)
    body["detail-type"], body["source"] = detail_type, source
    return Record(json.dumps(body), "fail", f"detail-type {detail_type!r}")


def _wrong_source(f: Fuzzer) -> Record:
    body = f.valid()
    body["source"] = f.rng.choice(["aws.ec2", "aws.health", "carpool.cluster", "evil.corp", ""])
    if body["source"] == f.valid()["source"]:
        body["source"] = "evil.corp"
    return Record(json.dumps(body), "fail", f"source {body['source']!r}")


def _missing_field(f: Fuzzer) -> Record:
    body = f.valid()
    path = f.rng.choice(f.fields)
    parent, key = _walk(body["detail"], path)
    if key in parent:
        del parent[key]
    return Record(json.dumps(body), "fail", f"detail without {path}")


def _mistyped_field(f: Fuzzer) -> Record:
    body = f.valid()
    path = f.rng.choice(f.fields)
    parent, key = _walk(body["detail"], path)
    parent[key] = f.rng.choice([v for v in WRONG_TYPES if not isinstance(v, str)] + [nested(50)])
    return Record(json.dumps(body), "fail", f"detail {path} of the wrong type")


def _garbage_detail(f: Fuzzer) -> Record:
    body = f.valid()
    body["detail"] = f.rng.choice([nested(400), {"\ud800": huge(f.rng)}, {"cluster": CLUSTER}, {}])
    return Record(json.dumps(body), "fail", "garbage detail")


def _walk(detail: dict[str, Any], path: str) -> tuple[dict[str, Any], str]:
    *parents, key = path.split(".")
    node = detail
    for part in parents:
        node = node[part]
    return node, key


_MUTATIONS: list[Callable[[Fuzzer], Record]] = [
    _not_json, _not_an_object, _no_body, _missing_envelope_key, _mistyped_envelope_key, _wrong_detail_type,
    _wrong_source, _missing_field, _mistyped_field, _garbage_detail,
]


# -- per-handler semantics --------------------------------------------------------------------------------
def provisioner_semantic(f: Fuzzer, live_pods: list[str]) -> Record:
    """Well-formed envelopes whose pod Kubernetes would refuse, or that carpool drops by design."""
    rng, deps = f.rng, f.deps
    choice = rng.randrange(9)
    if choice == 0:
        name = huge(rng)
        return Record(json.dumps(envelope(events.POD_UNSCHEDULABLE, events.SOURCE, pod_detail(name, deps), deps)),
                      "fail", "5,000+ character pod name")
    if choice == 1:
        name = rng.choice(WEIRD) + "pod"
        return Record(json.dumps(envelope(events.POD_UNSCHEDULABLE, events.SOURCE, pod_detail(name, deps), deps)),
                      "fail", f"pod name {name!r}")
    if choice == 2:
        detail = pod_detail(f"neg{rng.randrange(10**6)}", deps)
        detail["pod"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = rng.choice(["-1", "-500m", "-0.5"])
        return Record(json.dumps(envelope(events.POD_UNSCHEDULABLE, events.SOURCE, detail, deps)), "fail",
                      "negative cpu request")
    if choice == 3:
        detail = pod_detail(f"bad{rng.randrange(10**6)}", deps)
        detail["pod"]["spec"]["containers"][0]["resources"]["requests"]["memory"] = rng.choice(
            ["lots", "1e999999", "12Zz", "", "1..2Gi", huge(rng)])
        return Record(json.dumps(envelope(events.POD_UNSCHEDULABLE, events.SOURCE, detail, deps)), "fail",
                      "malformed memory request")
    if choice == 4:
        detail = pod_detail(f"ns{rng.randrange(10**6)}", deps)
        detail["pod"]["metadata"]["namespace"] = rng.choice(["Upper", "x" * 64, "a_b", "-x", huge(rng)])
        return Record(json.dumps(envelope(events.POD_UNSCHEDULABLE, events.SOURCE, detail, deps)), "fail",
                      "invalid namespace")
    if choice == 5:
        other = rng.choice(["prod", "", "itest2", huge(rng)[:300], "ü"])
        body = envelope(events.POD_UNSCHEDULABLE, events.SOURCE, pod_detail(rng.choice(live_pods), deps, other), deps)
        return Record(json.dumps(body), "drop", f"another cluster {other[:20]!r}", token=body["id"])
    if choice == 6:
        detail = pod_detail(f"gone{rng.randrange(10**6)}", deps)  # no such pod in the cluster
        body = envelope(events.POD_UNSCHEDULABLE, events.SOURCE, detail, deps)
        return Record(json.dumps(body), "drop", "a pod the cluster does not have", token=f"default/{detail['pod']['metadata']['name']}")
    if choice == 7:
        detail = pod_detail(rng.choice(live_pods), deps, observedAt=rng.choice(["yesterday", "2026-13-45T99:00:00Z", -5]))
        return Record(json.dumps(envelope(events.POD_UNSCHEDULABLE, events.SOURCE, detail, deps)), "fail",
                      "malformed observedAt")
    detail = pod_detail(rng.choice(live_pods), deps)
    detail["pod"]["spec"]["containers"] = rng.choice([[], None, [{"name": "c"}] * 2, [{"image": 5}]])
    return Record(json.dumps(envelope(events.POD_UNSCHEDULABLE, events.SOURCE, detail, deps)), "fail",
                  "malformed containers")


def registrar_semantic(f: Fuzzer) -> Record:
    rng, deps = f.rng, f.deps
    choice = rng.randrange(6)
    if choice == 0:
        name = rng.choice([huge(rng), "UPPER.case", "a_b", "-x-", rng.choice(WEIRD)])
        detail = {"cluster": CLUSTER, "nodeName": name, "providerId": "aws:///us-east-1a/i-0123"}
        return Record(json.dumps(envelope(events.NODE_DELETED, events.SOURCE, detail, deps)), "fail",
                      "node name Kubernetes refuses")
    if choice == 1:
        detail = {"cluster": CLUSTER, "node": {"metadata": {"name": rng.choice([huge(rng), "Bad_Name"])}}}
        return Record(json.dumps(envelope(events.NODE_REGISTERED, events.SOURCE, detail, deps)), "fail",
                      "registered node name Kubernetes refuses")
    if choice == 2:
        name = f"ip-10-9-{rng.randrange(255)}-{rng.randrange(255)}.ec2.internal"
        body = envelope(events.NODE_DELETED, events.SOURCE, {"cluster": CLUSTER, "nodeName": name}, deps)
        return Record(json.dumps(body), "drop", "a node carpool has no claim for", token=name)
    if choice == 3:
        name = f"ip-10-8-{rng.randrange(255)}-{rng.randrange(255)}.ec2.internal"
        body = envelope(events.NODE_REGISTERED, events.SOURCE, {"cluster": CLUSTER, "node": {"metadata": {"name": name}}}, deps)
        return Record(json.dumps(body), "drop", "a node the cluster does not have", token=name)
    other = rng.choice(["prod", "", "ü", huge(rng)[:300]])
    body = envelope(events.NODE_DELETED, events.SOURCE, {"cluster": other, "nodeName": "ip-10-0-0-1.ec2.internal"}, deps)
    return Record(json.dumps(body), "drop", "another cluster", token=body["id"])


def interruption_semantic(f: Fuzzer) -> Record:
    rng, deps = f.rng, f.deps
    choice = rng.randrange(6)
    if choice == 0:
        iid = rng.choice(["i-" + "0" * 5000, "I-ABC", "x", "", "i-ü", "i-0123 --evil", "arn:aws:ec2:i-1"])
        body = envelope(events.SPOT_INTERRUPTION, events.EC2_SOURCE, {"instance-id": iid, "instance-action": "terminate"}, deps)
        return Record(json.dumps(body), "fail", f"instance id {iid[:20]!r}")
    if choice == 1:
        body = envelope(events.INSTANCE_STATE_CHANGE, events.EC2_SOURCE,
                        {"instance-id": "i-0abc", "state": rng.choice([None, 5, [], {"name": "running"}])}, deps)
        return Record(json.dumps(body), "fail", "state of the wrong type")
    if choice == 2:
        body = envelope(events.HEALTH_EVENT, events.HEALTH_SOURCE,
                        {"service": "EC2", "eventTypeCategory": "scheduledChange",
                         "affectedEntities": rng.choice(["i-1", [{"entityValue": 5}], [None], {"x": 1}])}, deps)
        return Record(json.dumps(body), "fail", "malformed affectedEntities")
    iid = f"i-{rng.randrange(16**17):017x}"  # nobody's instance
    detail_type, source, detail = rng.choice([
        (events.SPOT_INTERRUPTION, events.EC2_SOURCE, {"instance-id": iid, "instance-action": "terminate"}),
        (events.REBALANCE_RECOMMENDATION, events.EC2_SOURCE, {"instance-id": iid}),
        (events.INSTANCE_STATE_CHANGE, events.EC2_SOURCE, {"instance-id": iid, "state": "terminated"}),
        (events.HEALTH_EVENT, events.HEALTH_SOURCE, {"service": "EC2", "eventTypeCategory": "scheduledChange",
                                                     "affectedEntities": [{"entityValue": iid}]}),
    ])
    return Record(json.dumps(envelope(detail_type, source, detail, deps)), "drop", "an instance carpool does not own",
                  token=iid)


# -- the run ----------------------------------------------------------------------------------------------
@dataclass
class Run:
    handler: Callable[[Any, Any], Any]
    name: str
    failed: dict[str, Record] = field(default_factory=dict)
    crashes: list[str] = field(default_factory=list)
    seen: list[Record] = field(default_factory=list)

    def deliver(self, records: list[Record]) -> None:
        self.seen.extend(records)
        try:
            answer = self.handler({"Records": [r.sqs() for r in records]}, Context(self.name))
        except BaseException as exc:  # noqa: BLE001 - a crash is what the test looks for
            self.crashes.append(f"{type(exc).__name__}: {exc}"[:500])
            return
        if not isinstance(answer, dict) or not isinstance(answer.get("batchItemFailures"), list):
            self.crashes.append(f"answer {answer!r:.200}")
            return
        by_id = {r.message_id: r for r in records}
        for failure in answer["batchItemFailures"]:
            self.failed[failure["itemIdentifier"]] = by_id[failure["itemIdentifier"]]


def batches(rng: random.Random, bad: list[Record], good: Callable[[], list[Record]], size: int) -> Iterator[list[Record]]:
    """The bad records in batches of `size`, each with fresh good records shuffled in."""
    for start in range(0, len(bad), size):
        mixed = bad[start:start + size] + good()
        rng.shuffle(mixed)
        yield mixed


def check(run: Run, logs: str, problems: list[str]) -> None:
    if run.crashes:
        problems.append(f"{run.name}: {len(run.crashes)} crashed invocations, e.g. {run.crashes[0]}")
    for record in run.seen:
        failed = record.message_id in run.failed
        if record.expect == "fail" and not failed:
            problems.append(f"{run.name}: {record.what} was accepted: {str(record.body)[:200]!r}")
        elif record.expect == "fail" and record.message_id not in logs:
            problems.append(f"{run.name}: {record.what} failed without a logged reason")
        elif record.expect in ("drop", "good") and failed:
            problems.append(f"{run.name}: {record.expect} record ({record.what}) was reported as failed")
        elif record.expect == "drop" and record.token not in logs:
            problems.append(f"{run.name}: {record.what} was dropped without a logged reason ({record.token[:60]})")


def test_three_thousand_fuzzed_records_crash_nothing_and_lose_nothing(
    make_deps: MakeDeps, aws: LocalAws, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    started = time.monotonic()
    deps = make_deps(manifests(nodepool(requirements=ON_DEMAND, limits={"cpu": "1000"}), nodeclass()))
    wiring.use(deps)
    rng = random.Random(SEED)
    cluster: Any = deps.cluster
    pods = pending_pods(GOOD_PODS, cpu="1500m", prefix="good", deps=deps)
    cluster.bind()
    live = [p.name for p in pods]
    problems: list[str] = []

    # provisioner: every batch carries Pod Unschedulable events of the real pending pods
    def good_pods() -> list[Record]:
        return [Record(json.dumps(envelope(events.POD_UNSCHEDULABLE, events.SOURCE, pod_detail(name, deps), deps)),
                       "good", f"pod {name}") for name in rng.sample(live, 2)]

    def valid_pod_event() -> dict[str, Any]:
        return envelope(events.POD_UNSCHEDULABLE, events.SOURCE, pod_detail(rng.choice(live), deps), deps)

    pod_fuzz = Fuzzer(rng, deps, valid_pod_event, ["cluster", "pod", "observedAt", "pod.metadata", "pod.spec",
                                                    "pod.metadata.name", "pod.spec.containers"],
                      [(events.NODE_REGISTERED, events.SOURCE), (events.SPOT_INTERRUPTION, events.EC2_SOURCE),
                       ("Pod Scheduled", events.SOURCE), ("", events.SOURCE)])
    provisioner = Run(load_handler("provisioner", ROOT / "functions"), "provisioner")
    bad = [pod_fuzz.record() if rng.random() < 0.6 else provisioner_semantic(pod_fuzz, live)
           for _ in range(FUZZED_PER_HANDLER)]
    for batch in batches(rng, bad, good_pods, BATCH["provisioner"]):
        provisioner.deliver(batch)
    held = {p for c in deps.ledger.active() for p in c.pods}
    if held != {p.key for p in pods}:
        problems.append(f"provisioner: good pods not held by a claim: {sorted({p.key for p in pods} - held)}")

    # registrar: the launched claims' nodes join; every batch carries their Node Registered events
    deps.clock.now += timedelta(seconds=60)
    claims = [c for c in deps.ledger.active() if c.status == ClaimStatus.LAUNCHED]
    nodes = {}
    for claim in claims:
        name = f"ip-{claim.instance_id}.ec2.internal"
        nodes[name] = claim.name
        allocatable = {"cpu": f"{claim.allocatable['cpu']}m", "memory": str(claim.allocatable["memory"]), "pods": "29"}
        cluster.add_node({"metadata": {"name": name, "labels": {**claim.labels, "karpenter.sh/nodepool": claim.nodepool}},
                          "spec": {"providerID": f"aws:///{claim.zone}/{claim.instance_id}",
                                   "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]},
                          "status": {"allocatable": allocatable, "capacity": allocatable,
                                     "conditions": [{"type": "Ready", "status": "True"}]}})

    def good_nodes() -> list[Record]:
        return [Record(json.dumps(events.delivered_event(events.node_registered_entry(
            CLUSTER, cluster.get_node(name), deps.clock(), "bus"), event_id=str(uuid.uuid4()))), "good", f"node {name}")
            for name in rng.sample(sorted(nodes), min(2, len(nodes)))]

    def valid_node_event() -> dict[str, Any]:
        name = rng.choice(sorted(nodes))
        return envelope(events.NODE_REGISTERED, events.SOURCE, {"cluster": CLUSTER, "node": {"metadata": {"name": name}}}, deps)

    node_fuzz = Fuzzer(rng, deps, valid_node_event, ["cluster", "node", "node.metadata", "node.metadata.name"],
                       [(events.POD_UNSCHEDULABLE, events.SOURCE), (events.HEALTH_EVENT, events.HEALTH_SOURCE),
                        ("Node Ready", events.SOURCE)])
    registrar = Run(load_handler("registrar", ROOT / "functions"), "registrar")
    bad = [node_fuzz.record() if rng.random() < 0.6 else registrar_semantic(node_fuzz) for _ in range(FUZZED_PER_HANDLER)]
    for batch in batches(rng, bad, good_nodes, BATCH["registrar"]):
        registrar.deliver(batch)
    not_registered = [n for n, c in nodes.items() if (deps.ledger.get(c) or claims[0]).status != ClaimStatus.REGISTERED]
    if not nodes or not_registered:
        problems.append(f"registrar: nodes whose claim was not registered: {not_registered or 'no nodes at all'}")

    # interruption: state changes of running instances (nothing to do) in every batch, one termination
    instance_ids = sorted(c.instance_id for c in claims if c.instance_id)

    def good_interruptions() -> list[Record]:
        iid = rng.choice(instance_ids)
        body = envelope(events.INSTANCE_STATE_CHANGE, events.EC2_SOURCE, {"instance-id": iid, "state": "running"}, deps)
        return [Record(json.dumps(body), "good", f"running {iid}")]

    def valid_aws_event() -> dict[str, Any]:
        iid = rng.choice(instance_ids)
        return rng.choice([
            envelope(events.SPOT_INTERRUPTION, events.EC2_SOURCE, {"instance-id": iid, "instance-action": "terminate"}, deps),
            envelope(events.INSTANCE_STATE_CHANGE, events.EC2_SOURCE, {"instance-id": iid, "state": "running"}, deps),
        ])

    aws_fuzz = Fuzzer(rng, deps, valid_aws_event, ["instance-id"],
                      [(events.POD_UNSCHEDULABLE, events.SOURCE), ("EC2 Instance Launch Successful", events.EC2_SOURCE)])
    interruption = Run(load_handler("interruption", ROOT / "functions"), "interruption")
    bad = [aws_fuzz.record() if rng.random() < 0.6 else interruption_semantic(aws_fuzz) for _ in range(FUZZED_PER_HANDLER)]
    for batch in batches(rng, bad, good_interruptions, BATCH["interruption"]):
        interruption.deliver(batch)
    doomed = instance_ids[0]
    # EC2 terminated it (the interruption function confirms a state change with DescribeInstances)
    helper_client(aws, "ec2").terminate_instances(InstanceIds=[doomed])
    terminated = Record(json.dumps(envelope(events.INSTANCE_STATE_CHANGE, events.EC2_SOURCE,
                                            {"instance-id": doomed, "state": "terminated"}, deps)), "good", "terminated")
    interruption.deliver([terminated, aws_fuzz.record(), interruption_semantic(aws_fuzz)])
    if deps.ledger.find_by_instance(doomed) is not None:
        problems.append(f"interruption: the claim of terminated instance {doomed} was not released")

    logs = "\n".join(r.getMessage() for r in caplog.records)
    for run in (provisioner, registrar, interruption):
        check(run, logs, problems)
    fuzzed = sum(1 for run in (provisioner, registrar, interruption) for r in run.seen if r.expect != "good")
    assert fuzzed >= 3000
    kinds = sorted({p.split(" was ")[0] for p in problems})
    assert not problems, f"{len(problems)} problems of {len(kinds)} kinds:\n" + "\n".join(kinds) + "\n" + "\n".join(problems[:10])
    assert len(running_instances(aws)) == len(claims) - 1  # all but the one EC2 terminated
    assert time.monotonic() - started < 60
