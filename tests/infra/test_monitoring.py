"""Alarms (each one's query, threshold and missing-data rule), the dashboard and the alarm topic."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cdk_support import Synth, flatten


def alarm(synth: Synth, name: str) -> dict[str, Any]:
    return flatten(synth.resources("AWS::CloudWatch::Alarm")[synth.logical_id(synth.stack.monitoring.alarms[name])])[
        "Properties"
    ]


def expression(props: dict[str, Any]) -> str:
    (returned,) = [m for m in props["Metrics"] if m.get("ReturnData", True)]
    return str(returned["Expression"])


def test_pods_pending_alarm(default: Synth) -> None:
    props = alarm(default, "PodsPending")
    assert expression(props) == "SELECT MAX(PodsUnboundSeconds) FROM Carpool"
    assert props["Threshold"] == 900
    assert props["ComparisonOperator"] == "GreaterThanThreshold"
    assert props["TreatMissingData"] == "notBreaching"


def test_launch_failures_alarm(default: Synth) -> None:
    props = alarm(default, "LaunchFailures")
    # Insufficient capacity is handled by falling back to other offerings; other errors repeat.
    assert expression(props) == "SELECT SUM(LaunchFailures) FROM Carpool WHERE reason != 'InsufficientCapacity'"
    assert props["Metrics"][0]["Period"] == 300
    assert props["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert props["Threshold"] >= 1


def test_watcher_not_running_alarm_treats_silence_as_failure(default: Synth) -> None:
    props = alarm(default, "WatcherNotRunning")
    assert expression(props) == "SELECT SUM(WatcherRuns) FROM Carpool"
    assert props["Metrics"][0]["Period"] == 300
    assert props["Threshold"] == 1
    assert props["ComparisonOperator"] == "LessThanThreshold"
    assert props["TreatMissingData"] == "breaching"


@pytest.mark.parametrize("name", ["provisioner", "registrar", "interruption", "delivery"])
def test_each_dlq_alarms_when_not_empty(default: Synth, name: str) -> None:
    props = alarm(default, f"{name.title()}DlqNotEmpty")
    queue = default.stack.routing.dead_letter_queues[name]
    assert props["Namespace"] == "AWS/SQS"
    assert props["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert props["Dimensions"] == [{"Name": "QueueName", "Value": "${" + default.logical_id(queue) + ".QueueName}"}]
    assert props["Threshold"] == 0
    assert props["ComparisonOperator"] == "GreaterThanThreshold"


def pool_alarms(synth: Synth) -> dict[tuple[str, str], dict[str, Any]]:
    found = {}
    for name in synth.stack.monitoring.alarms:
        if name.startswith("PoolNearLimit"):
            props = alarm(synth, name)
            usage = next(m for m in props["Metrics"] if m["Id"] == "usage")
            dims = {d["Name"]: d["Value"] for d in usage["MetricStat"]["Metric"]["Dimensions"]}
            found[(dims["nodepool"], dims["resource"])] = props
    return found


def test_pool_near_limit_alarm_per_limited_resource_of_the_config(full: Synth, default: Synth) -> None:
    alarms = pool_alarms(full)
    assert sorted(alarms) == [("general", "cpu"), ("general", "memory"), ("gpu", "nvidia.com/gpu")]
    assert sorted(pool_alarms(default)) == [("default", "cpu"), ("default", "memory")]
    for (pool, resource), props in alarms.items():
        assert expression(props) == "usage / limit"
        assert props["Threshold"] == 0.75
        assert props["ComparisonOperator"] == "GreaterThanThreshold"
        metrics = {m["Id"]: m["MetricStat"] for m in props["Metrics"] if "MetricStat" in m}
        assert metrics["usage"]["Metric"]["MetricName"] == "NodePoolUsage"
        assert metrics["limit"]["Metric"]["MetricName"] == "NodePoolLimit"
        for stat in metrics.values():
            assert stat["Metric"]["Namespace"] == "Carpool"
            dims = {d["Name"]: d["Value"] for d in stat["Metric"]["Dimensions"]}
            assert dims == {"service": "carpool", "nodepool": pool, "resource": resource}


def test_alarm_count(default: Synth, full: Synth) -> None:
    # pending, launch failures, watcher, 4 DLQs + one per pool limit
    default.template.resource_count_is("AWS::CloudWatch::Alarm", 7 + 2)
    full.template.resource_count_is("AWS::CloudWatch::Alarm", 7 + 3)


def dashboard_body(synth: Synth) -> str:
    (resource,) = synth.resources("AWS::CloudWatch::Dashboard").values()
    body = flatten(resource["Properties"]["DashboardBody"])
    return str(body)


def test_dashboard_graphs_every_carpool_metric_and_the_aws_ones(default: Synth) -> None:
    (resource,) = default.resources("AWS::CloudWatch::Dashboard").values()
    assert resource["Properties"]["DashboardName"] == "carpool-demo"
    body = json.loads(dashboard_body(default).replace("${AWS::Region}", "eu-west-1"))
    text = json.dumps(body)
    for metric in (
        "PodsUnboundSeconds", "SchedulingDurationSeconds", "NodeClaimsCreated", "LaunchFailures",
        "InterruptionsReceived", "NodePoolUsage", "NodePoolLimit", "EstimatedHourlyCost", "CapacityCacheHits",
        "CapacityCacheDefaults", "WatcherRuns", "Disruptions", "PodsServedBy",
    ):  # fmt: skip
        assert f'MetricName=\\"{metric}\\"' in text, metric
    for builtin in ("Invocations", "Errors", "Throttles", "Duration", "ApproximateNumberOfMessagesVisible",
                    "ApproximateAgeOfOldestMessage"):  # fmt: skip
        assert f'"{builtin}"' in text, builtin
    alarm_widgets = [w for w in body["widgets"] if w["type"] == "alarm"]
    assert len(alarm_widgets) == 1
    assert len(alarm_widgets[0]["properties"]["alarms"]) == len(default.stack.monitoring.alarms)


def test_no_alarm_topic_unless_asked(default: Synth) -> None:
    default.template.resource_count_is("AWS::SNS::Topic", 0)
    for props in default.resources("AWS::CloudWatch::Alarm").values():
        assert "AlarmActions" not in props["Properties"]


@pytest.mark.parametrize("variant", ["full", "rbac"])
def test_alarm_topic_is_encrypted_tls_only_and_wired_to_every_alarm(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    topic = synth.stack.monitoring.topic
    assert topic is not None
    topic_id = synth.logical_id(topic)
    props = synth.resources("AWS::SNS::Topic")[topic_id]["Properties"]
    key_id = flatten(props["KmsMasterKeyId"]).strip("${}").split(".")[0]
    key = synth.resources("AWS::KMS::Key")[key_id]["Properties"]
    assert key["EnableKeyRotation"] is True
    grants = [s for s in key["KeyPolicy"]["Statement"] if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}]
    assert grants and set(grants[0]["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey*"}
    (policy,) = [flatten(p["Properties"]) for p in synth.resources("AWS::SNS::TopicPolicy").values()]
    assert any(
        s["Effect"] == "Deny" and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
        for s in policy["PolicyDocument"]["Statement"]
    )
    for alarm_props in synth.resources("AWS::CloudWatch::Alarm").values():
        assert alarm_props["Properties"]["AlarmActions"] == [{"Ref": topic_id}]
    subscriptions = [flatten(s["Properties"]) for s in synth.resources("AWS::SNS::Subscription").values()]
    if variant == "full":
        assert subscriptions == [
            {"Protocol": "email", "Endpoint": "oncall@example.com", "TopicArn": "${" + topic_id + "}"}
        ]
    else:
        assert subscriptions == []
