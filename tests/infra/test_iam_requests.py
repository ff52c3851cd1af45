"""The functions' IAM policies, proved against the AWS requests carpool really makes.

Local AWS enforces no IAM, so a policy that refuses carpool's own launches passes every other test. Here
scenarios run through the real handlers (each in its own process, both at once) with
`carpool.sim.localaws.requests` recording every request per function and what IAM authorizes for it; each
authorization is evaluated (`iam_eval`) against that function's policy from the synthesized template,
bound to the names the simulation gave the stack's resources. The test fails on any request the policy
would deny, and on any granted action that no request uses (recorded, or derived where code shared between
functions was reached in one of them only: `derived_calls`).

More recordings can be added with ``CARPOOL_REQUESTS_DIR``: every ``*.json`` there (written by
``python -m carpool.sim.run.record``, or by the e2e suite when the variable is set) is evaluated too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from aws_cdk import Environment
from cdk_support import Synth, statements
from iam_eval import as_list, evaluate, granted_actions

from carpool.sim.localaws.requests import AwsCall, Check, Recording, authorizations, tag_specifications
from carpool.sim.localaws.server import queue_name
from carpool.sim.run.scenario import for_cluster

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = (REPO / "tests/infra/scenarios/iam-requests.yaml", REPO / "examples/005-spot-interruption.yaml")
#: The cluster every scenario is recorded for (the first one's): the policies are bound to the cluster's
#: name, so recordings of one cluster are all checked against one synthesized stack.
CLUSTER = "iam"
#: A scenario takes one to three minutes alone; far longer on a machine busy with other suites.
RUN_TIMEOUT_SECONDS = 2400
#: Granted to every role but used by the Lambda service on the function's behalf, not by carpool's code.
LAMBDA_SERVICE_ACTIONS = {
    "logs:CreateLogStream": "the runtime writes the function's log stream",
    "logs:PutLogEvents": "the runtime writes the function's log lines",
    "xray:PutTraceSegments": "active tracing: the runtime's X-Ray daemon sends segments",
    "xray:PutTelemetryRecords": "active tracing: the runtime's X-Ray daemon sends telemetry",
    "sqs:ReceiveMessage": "the SQS event source mapping polls the function's queue",
    "sqs:DeleteMessage": "the event source mapping deletes a batch's successful messages",
    "sqs:ChangeMessageVisibility": "the event source mapping returns failed messages",
    "sqs:GetQueueAttributes": "the event source mapping and the on-failure destination read the queue",
    "sqs:GetQueueUrl": "the event source mapping and the on-failure destination find the queue",
    "sqs:SendMessage": "Lambda sends a failed scheduled invocation to the on-failure destination (DLQ)",
}
#: Code that several functions run, so they send the same requests even when a scenario happens to reach
#: it in one of them only: (function recorded, operations or None for all, functions it stands for, why).
SHARED_CODE: tuple[tuple[str, frozenset[str] | None, tuple[str, ...], str], ...] = (
    ("provisioner", None, ("interruption", "disruption"),
     "replacements for interrupted, drifted or consolidated nodes go through carpool.app.provisioning, the "
     "provisioner's own path (provision_pods): launches, capacity errors, claim bookkeeping"),
    ("disruption", frozenset({"TerminateInstances"}), ("provisioner", "interruption"),
     "a launch whose claim then fails is terminated by carpool.app.provisioning: the same TerminateInstances of "
     "an instance carpool launched"),
)
#: Releasing a claim (carpool.app.register on a deleted node, carpool.app.interrupt on a stopped or
#: terminated instance) is the ledger's release: GetItem, then a transaction deleting the claim.
RELEASERS = ("provisioner", "registrar", "interruption", "disruption")


# -- recordings --------------------------------------------------------------------------------------------
def _for_cluster(path: Path, out_dir: Path) -> Path:
    """The scenario at `path`, played for the cluster `CLUSTER` (written to `out_dir` when renamed)."""
    doc = yaml.safe_load(path.read_text())
    if doc["cluster"]["name"] == CLUSTER:
        return path
    doc = for_cluster(doc, CLUSTER)
    renamed = out_dir / path.name
    renamed.write_text(yaml.safe_dump(doc, sort_keys=False))
    return renamed


def _run_scenarios(out_dir: Path) -> list[Recording]:
    """Every scenario in its own process at once: a simulation is CPU-bound Python, so processes (not
    threads, which share one interpreter lock) let the two use both cores."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "shared"), str(REPO)])}
    runs = []
    for path in SCENARIOS:
        out, log = out_dir / f"{path.stem}.json", out_dir / f"{path.stem}.log"
        scenario = _for_cluster(path, out_dir)
        with log.open("w") as sink:
            runs.append((path, out, log, subprocess.Popen(
                [sys.executable, "-m", "carpool.sim.run.record", str(scenario), "--out", str(out),
                 "--result", str(out.with_suffix(".result.json"))],
                cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT)))  # fmt: skip
    try:
        for path, _out, log, process in runs:
            assert process.wait(timeout=RUN_TIMEOUT_SECONDS) == 0, f"{path.name}:\n{log.read_text()[-4000:]}"
    finally:
        for *_, process in runs:
            if process.poll() is None:
                process.kill()
                process.wait()
    # each simulation's own result stays beside its recording (`*.result.json`): what the functions did
    return [Recording.model_validate_json(out.read_text()) for _, out, _, _ in runs]


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> list[Recording]:
    found = _run_scenarios(tmp_path_factory.mktemp("requests"))
    extra = os.environ.get("CARPOOL_REQUESTS_DIR")
    if extra:
        found += [Recording.model_validate_json(p.read_text()) for p in sorted(Path(extra).glob("*.json"))]
    return found


# -- policies ------------------------------------------------------------------------------------------------
@dataclass
class Policies:
    """Each function's statements from the template, bound to one recording's resource names."""

    by_function: dict[str, list[dict[str, Any]]]


def _bindings(synth: Synth, rec: Recording) -> dict[str, str]:
    """What CloudFormation resolves at deploy time: pseudo parameters and the references to the stack's own
    resources, here to the names the simulation created them under."""
    stack, env = synth.stack, rec.environment
    arn = f"arn:aws:{{}}:{rec.region}:{rec.account}:{{}}"
    table, idempotency = env["CARPOOL_TABLE"], env["CARPOOL_IDEMPOTENCY_TABLE"]
    return {
        "${AWS::Partition}": "aws", "${AWS::Region}": rec.region, "${AWS::AccountId}": rec.account,
        "${AWS::URLSuffix}": "amazonaws.com",
        "${" + synth.logical_id(stack.tables.state) + ".Arn}": arn.format("dynamodb", f"table/{table}"),
        "${" + synth.logical_id(stack.tables.state) + "}": table,
        "${" + synth.logical_id(stack.tables.idempotency) + ".Arn}": arn.format("dynamodb", f"table/{idempotency}"),
        "${" + synth.logical_id(stack.routing.bus) + ".Arn}": arn.format("events", f"event-bus/{env['CARPOOL_EVENT_BUS']}"),
        "${" + synth.logical_id(stack.routing.work_queues["interruption"].queue) + ".Arn}":
            arn.format("sqs", queue_name(rec.cluster, "interruption")),
    }  # fmt: skip


def _bind(value: Any, bindings: dict[str, str]) -> Any:
    if isinstance(value, str):
        for placeholder, real in bindings.items():
            value = value.replace(placeholder, real)
        return value
    if isinstance(value, list):
        return [_bind(v, bindings) for v in value]
    if isinstance(value, dict):
        return {_bind(k, bindings): _bind(v, bindings) for k, v in value.items()}
    return value


@pytest.fixture(scope="module")
def policies_for(synth: Callable[..., Synth]) -> Callable[[Recording], Policies]:
    cache: dict[tuple[str, str, str], Policies] = {}

    def policies(rec: Recording) -> Policies:
        key = (rec.cluster, rec.region, rec.environment["CARPOOL_NODE_ROLE_ARN"])
        if key not in cache:
            made = synth(
                {"clusterName": rec.cluster, "nodeRoleArn": rec.environment["CARPOOL_NODE_ROLE_ARN"]},
                env=Environment(account=rec.account, region=rec.region),
                nag=False,
            )
            template, bindings = made.template.to_json(), _bindings(made, rec)
            cache[key] = Policies({
                name: _bind(statements(template, made.logical_id(role)), bindings)
                for name, role in made.stack.functions.roles.items()
            })  # fmt: skip
        return cache[key]

    return policies


# -- evaluation ------------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    denied: list[str] = field(default_factory=list)
    #: (function, statement index, action pattern) that allowed at least one authorization
    used: set[tuple[str, int, str]] = field(default_factory=set)
    checked: int = 0


def _evaluate(calls: Iterable[AwsCall], policies: Policies, outcome: Outcome) -> Outcome:
    for call in calls:
        found = policies.by_function[call.function]
        for check in authorizations(call):
            outcome.checked += 1
            result = evaluate(found, check.action, check.resource, check.context)
            if not result.allowed:
                outcome.denied.append(_describe(call, check, result.decision.value))
                continue
            for index in result.statements:
                for pattern in as_list(found[index]["Action"]):
                    if _action_matches(pattern, check.action):
                        outcome.used.add((call.function, index, pattern))
    return outcome


def _action_matches(pattern: str, action: str) -> bool:
    from iam_eval import action_matches

    return action_matches(pattern, action)


def _describe(call: AwsCall, check: Check, why: str) -> str:
    context = {k: v for k, v in check.context.items() if k != "aws:RequestedRegion"}
    return f"{call.function}: {call.service}:{call.operation} -> {check.action} on {check.resource} {context}: {why}"


def derived_calls(recordings: list[Recording]) -> list[AwsCall]:
    """Requests of code paths a simulation may not reach in every function, derived from recorded ones.

    - `SHARED_CODE` and `RELEASERS`: the same code in another function sends the same requests.
    - Launch-template collection (`carpool.app.cleanup`) deletes carpool's templates once they are older
      than an hour by their EC2 creation time, which local EC2 stamps with the wall clock, ahead of every
      simulated clock: the disruption function's DeleteLaunchTemplate is never sent. The template it
      deletes is one a launch created, carrying the tags its CreateLaunchTemplate requested.
    """
    calls = [c for rec in recordings for c in rec.calls]
    out = []
    for source, operations, targets, _why in SHARED_CODE:
        for call in calls:
            if call.function == source and (operations is None or call.operation in operations):
                out += [call.model_copy(update={"function": f}) for f in targets]
    releases = [c for c in calls if c.service == "dynamodb" and any(a == "DeleteItem" for a, _ in c.facts.get("items", []))]
    for call in releases[:1]:
        reads = {"items": [("GetItem", arn) for _, arn in call.facts["items"]]}
        for function in RELEASERS:
            out.append(call.model_copy(update={"function": function}))
            out.append(call.model_copy(update={"function": function, "operation": "GetItem", "facts": reads}))
    for call in calls:
        if (call.service, call.operation) == ("ec2", "CreateLaunchTemplate"):
            tags = tag_specifications(call.params.get("TagSpecifications")).get("launch-template", {})
            arn = f"arn:aws:ec2:{call.region}:{call.account}:launch-template/lt-0123456789abcdef0"
            out.append(AwsCall(function="disruption", service="ec2", operation="DeleteLaunchTemplate",
                               region=call.region, account=call.account,
                               params={"LaunchTemplateName": call.params.get("LaunchTemplateName")},
                               facts={"resources": [{"arn": arn, "tags": tags}]}))
            break
    return out


@pytest.fixture(scope="module")
def outcome(recordings: list[Recording], policies_for: Callable[[Recording], Policies]) -> Outcome:
    result = Outcome()
    for rec in recordings:
        _evaluate([*rec.calls, *derived_calls([rec])], policies_for(rec), result)
    return result


# -- the checks --------------------------------------------------------------------------------------------------
def test_the_scenarios_exercise_every_function_and_the_launch(recordings: list[Recording]) -> None:
    functions = set().union(*(r.functions() for r in recordings))
    assert functions == {"watcher", "provisioner", "registrar", "interruption", "disruption"}
    operations = {(c.function, c.operation) for r in recordings for c in r.calls}
    for expected in [("provisioner", "CreateFleet"), ("provisioner", "CreateLaunchTemplate"),
                     ("watcher", "PutEvents"), ("disruption", "TerminateInstances")]:  # fmt: skip
        assert expected in operations, expected
    fleets = [c for r in recordings for c in r.calls if c.operation == "CreateFleet"]
    capacity = {c.params["TargetCapacitySpecification"]["DefaultTargetCapacityType"] for c in fleets}
    assert capacity == {"spot", "on-demand"}, "both spot and on-demand launches must be recorded"


def test_no_request_is_denied(outcome: Outcome) -> None:
    assert outcome.checked > 100
    assert outcome.denied == [], "\n".join(sorted(set(outcome.denied)))


def test_every_granted_action_is_used(
    recordings: list[Recording], policies_for: Callable[[Recording], Policies], outcome: Outcome
) -> None:
    policies = policies_for(recordings[0])
    unused = []
    for function, found in policies.by_function.items():
        for index, pattern in sorted(granted_actions(found)):
            if pattern in LAMBDA_SERVICE_ACTIONS or (function, index, pattern) in outcome.used:
                continue
            unused.append(f"{function}: {pattern} (statement {found[index].get('Sid', index)})")
    assert unused == [], "granted but never used:\n" + "\n".join(unused)


# -- it fails when it should ----------------------------------------------------------------------------------------
def _one(recordings: list[Recording], operation: str, capacity: str | None = None) -> tuple[Recording, AwsCall]:
    for rec in recordings:
        for call in rec.calls:
            if call.operation != operation:
                continue
            if capacity and call.params["TargetCapacitySpecification"]["DefaultTargetCapacityType"] != capacity:
                continue
            return rec, call.model_copy(deep=True)
    raise AssertionError(f"no recorded {operation} {capacity or ''}")


def _denied(call: AwsCall, policies: Policies) -> list[str]:
    return _evaluate([call], policies, Outcome()).denied


@pytest.mark.parametrize(("capacity", "resource_type"), [
    ("spot", "network-interface"), ("on-demand", "network-interface"), ("spot", "spot-instances-request"),
])  # fmt: skip
def test_a_launch_template_without_a_tag_specification_is_refused(
    recordings: list[Recording], policies_for: Callable[[Recording], Policies], capacity: str, resource_type: str
) -> None:
    rec, fleet = _one(recordings, "CreateFleet", capacity)
    policies = policies_for(rec)
    assert _denied(fleet, policies) == []
    for template in fleet.facts["launchTemplates"].values():
        template["tagSpecifications"] = [
            s for s in template["tagSpecifications"] if s["ResourceType"] != resource_type
        ]
    denied = _denied(fleet, policies)
    assert denied and all(f"{resource_type}/*" in d for d in denied), denied
    assert any("ec2:RunInstances" in d for d in denied) and any("ec2:CreateFleet" in d for d in denied)


@pytest.mark.parametrize("resource_type", ["instance", "volume", "fleet"])
def test_a_fleet_request_without_a_tag_specification_is_refused(
    recordings: list[Recording], policies_for: Callable[[Recording], Policies], resource_type: str
) -> None:
    rec, fleet = _one(recordings, "CreateFleet")
    fleet.params["TagSpecifications"] = [
        s for s in fleet.params["TagSpecifications"] if s["ResourceType"] != resource_type
    ]
    denied = _denied(fleet, policies_for(rec))
    assert denied and all(f"{resource_type}/*" in d for d in denied), denied


def test_a_launch_template_created_without_ownership_tags_is_refused(
    recordings: list[Recording], policies_for: Callable[[Recording], Policies]
) -> None:
    rec, create = _one(recordings, "CreateLaunchTemplate")
    create.params["TagSpecifications"] = []
    assert _denied(create, policies_for(rec))


@pytest.mark.parametrize("key", ["ec2:CreateAction", "iam:PassedToService", "aws:RequestTag/carpool.dev/cluster"])
def test_a_request_missing_a_condition_key_is_refused(
    recordings: list[Recording], policies_for: Callable[[Recording], Policies], key: str
) -> None:
    rec, fleet = _one(recordings, "CreateFleet")
    policies = policies_for(rec)
    checks = [c for c in authorizations(fleet) if key in c.context]
    assert checks, f"no authorization of a CreateFleet carries {key}"
    found = policies.by_function[fleet.function]
    for check in checks:
        assert evaluate(found, check.action, check.resource, check.context).allowed
        stripped = {k: v for k, v in check.context.items() if k != key}
        assert not evaluate(found, check.action, check.resource, stripped).allowed, (check.action, check.resource)


def test_terminating_an_instance_without_the_ownership_tags_is_refused(
    recordings: list[Recording], policies_for: Callable[[Recording], Policies]
) -> None:
    rec, terminate = _one(recordings, "TerminateInstances")
    policies = policies_for(rec)
    assert _denied(terminate, policies) == []
    for resource in terminate.facts["resources"]:
        resource["tags"] = {k: v for k, v in resource["tags"].items() if not k.startswith("kubernetes.io/cluster/")}
    assert _denied(terminate, policies)


def test_a_policy_without_a_create_action_refuses_tagging_on_launch(
    recordings: list[Recording], policies_for: Callable[[Recording], Policies]
) -> None:
    rec, fleet = _one(recordings, "CreateFleet")
    policies = policies_for(rec)
    found = policies.by_function["provisioner"]
    (tag_on_create,) = [s for s in found if s.get("Sid") == "TagOnlyOnCreate"]
    allowed = tag_on_create["Condition"]["StringEquals"]["ec2:CreateAction"]
    tag_on_create["Condition"]["StringEquals"]["ec2:CreateAction"] = [a for a in allowed if a != "CreateFleet"]
    try:
        denied = _denied(fleet, policies)
    finally:
        tag_on_create["Condition"]["StringEquals"]["ec2:CreateAction"] = allowed
    assert denied and all("ec2:CreateTags" in d for d in denied), denied
