"""Bus, rules (patterns and targets), queues (encryption, TLS, DLQ, redrive, visibility) and schedules."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Match
from cdk_support import Synth, flatten
from infra.functions import SPECS


def rule(synth: Synth, construct: Any) -> dict[str, Any]:
    return flatten(synth.resources("AWS::Events::Rule")[synth.logical_id(construct)]["Properties"])


def arn_of(synth: Synth, construct: Any) -> str:
    return "${" + synth.logical_id(construct) + ".Arn}"


def test_one_bus_per_cluster(default: Synth, full: Synth) -> None:
    default.template.resource_count_is("AWS::Events::EventBus", 1)
    default.template.has_resource_properties("AWS::Events::EventBus", {"Name": "carpool-demo"})
    full.template.has_resource_properties("AWS::Events::EventBus", {"Name": "carpool-prod"})


@pytest.mark.parametrize(
    ("attr", "queue", "pattern", "on_carpool_bus"),
    [
        ("pod_unschedulable", "provisioner", {"source": ["carpool.cluster"], "detail-type": ["Pod Unschedulable"]}, True),
        ("node_lifecycle", "registrar",
         {"source": ["carpool.cluster"], "detail-type": ["Node Registered", "Node Deleted"]}, True),
        ("spot_interruption", "interruption",
         {"source": ["aws.ec2"],
          "detail-type": ["EC2 Spot Instance Interruption Warning", "EC2 Instance Rebalance Recommendation"]}, False),
        ("instance_state_change", "interruption",
         {"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"],
          "detail": {"state": ["stopping", "stopped", "shutting-down", "terminated"]}}, False),
        ("scheduled_change", "interruption",
         {"source": ["aws.health"], "detail-type": ["AWS Health Event"],
          "detail": {"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]}}, False),
    ],
)  # fmt: skip
def test_rule_pattern_and_target(
    default: Synth, attr: str, queue: str, pattern: dict[str, Any], on_carpool_bus: bool
) -> None:
    routing = default.stack.routing
    props = rule(default, getattr(routing, attr))
    assert props["EventPattern"] == pattern
    assert props["State"] == "ENABLED"
    if on_carpool_bus:
        assert props["EventBusName"] == "${" + default.logical_id(routing.bus) + "}"
    else:
        assert "EventBusName" not in props  # AWS service events only reach the default bus
    (target,) = props["Targets"]
    assert target["Arn"] == arn_of(default, routing.work_queues[queue].queue)
    assert target["DeadLetterConfig"] == {"Arn": arn_of(default, routing.delivery_dlq)}


@pytest.mark.parametrize("name", ["watcher", "disruption"])
def test_schedules_invoke_every_minute(default: Synth, name: str) -> None:
    props = rule(default, default.stack.functions.schedules[name])
    assert props["ScheduleExpression"] == "rate(1 minute)"
    (target,) = props["Targets"]
    assert target["Arn"] == arn_of(default, default.stack.functions.functions[name])
    assert target["DeadLetterConfig"] == {"Arn": arn_of(default, default.stack.routing.delivery_dlq)}
    assert target["RetryPolicy"]["MaximumEventAgeInSeconds"] == 60


def test_every_rule_has_a_dead_letter_target(default: Synth) -> None:
    rules = default.resources("AWS::Events::Rule")
    assert len(rules) == 7
    for props in rules.values():
        assert all("DeadLetterConfig" in t for t in props["Properties"]["Targets"])


@pytest.mark.parametrize("name", ["provisioner", "registrar", "interruption"])
def test_work_queue_encryption_redrive_and_visibility(default: Synth, name: str) -> None:
    work = default.stack.routing.work_queues[name]
    props = flatten(default.resources("AWS::SQS::Queue")[default.logical_id(work.queue)]["Properties"])
    assert props["SqsManagedSseEnabled"] is True
    assert props["RedrivePolicy"] == {"deadLetterTargetArn": arn_of(default, work.dlq), "maxReceiveCount": 3}
    timeout = SPECS[name].timeout.to_seconds()
    assert props["VisibilityTimeout"] >= 6 * timeout
    assert props["VisibilityTimeout"] == 6 * timeout + work.consumer.max_batching_window.to_seconds()


def test_interruption_queue_keeps_messages_only_as_long_as_their_redrive_needs(default: Synth) -> None:
    queues = default.resources("AWS::SQS::Queue")
    props = queues[default.logical_id(default.stack.routing.interruption.queue)]["Properties"]
    retention, visibility = props["MessageRetentionPeriod"], props["VisibilityTimeout"]
    # Long enough that a message failing all 3 receives (a visibility timeout apart) reaches the DLQ...
    assert retention > 3 * visibility
    # ...and far short of SQS's 4-day default: old interruption events are not worth replaying.
    assert retention <= 20 * 60
    # The other work queues keep SQS's default: a pending pod or a joined node is still news later.
    for name in ("provisioner", "registrar"):
        work = default.stack.routing.work_queues[name]
        assert "MessageRetentionPeriod" not in queues[default.logical_id(work.queue)]["Properties"]


def test_dead_letter_queues_keep_messages_14_days(default: Synth) -> None:
    dlqs = default.stack.routing.dead_letter_queues
    assert sorted(dlqs) == ["delivery", "interruption", "provisioner", "registrar"]
    for queue in dlqs.values():
        props = default.resources("AWS::SQS::Queue")[default.logical_id(queue)]["Properties"]
        assert props["MessageRetentionPeriod"] == 14 * 24 * 3600
        assert props["SqsManagedSseEnabled"] is True
        assert "RedrivePolicy" not in props


def test_every_queue_is_encrypted_and_denies_plain_http(default: Synth) -> None:
    queues = default.resources("AWS::SQS::Queue")
    assert len(queues) == 7
    for props in queues.values():
        assert props["Properties"]["SqsManagedSseEnabled"] is True
    policies = [flatten(p["Properties"]) for p in default.resources("AWS::SQS::QueuePolicy").values()]
    denied = set()
    for policy in policies:
        for statement in policy["PolicyDocument"]["Statement"]:
            if statement["Effect"] == "Deny" and statement.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}:
                denied.update(q.strip("${}") for q in policy["Queues"])
    assert denied == set(queues)


def test_eventbridge_may_send_to_work_queues_only_from_our_rules(default: Synth) -> None:
    routing = default.stack.routing
    queue = default.logical_id(routing.provisioner.queue)
    default.template.has_resource_properties(
        "AWS::SQS::QueuePolicy",
        {
            "Queues": [{"Ref": queue}],
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                # sorted: cdk.json's @aws-cdk/aws-iam:minimizePolicies orders actions
                                "Action": ["sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"],
                                "Principal": {"Service": "events.amazonaws.com"},
                                "Condition": {
                                    "ArnEquals": {
                                        "aws:SourceArn": {
                                            "Fn::GetAtt": [default.logical_id(routing.pod_unschedulable), "Arn"]
                                        }
                                    }
                                },
                            }
                        )
                    ]
                )
            },
        },
    )
