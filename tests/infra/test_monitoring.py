"""Alarms (each one's series, threshold and missing-data rule), the dashboard and the alarm topic.

The point of the per-cluster checks: two clusters deployed in one account and Region must not read each
other's metrics, so every series an alarm reads is compared across two synthesized stacks.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cdk_support import Synth, flatten
from infra.functions import SPECS
from infra.monitoring import BREAKDOWN, SERVICE

from carpool.observability import LOG_ONLY

REPO = Path(__file__).resolve().parents[2]
LIBRARY = REPO / "shared" / "carpool"
FUNCTIONS = REPO / "functions"


@pytest.fixture(scope="module")
def other(synth: Callable[..., Synth]) -> Synth:
    """A second cluster with every default, next to ``default`` (cluster ``demo``) in the same account."""
    return synth({"clusterName": "demo-b"}, nag=False)


def alarm(synth: Synth, name: str) -> dict[str, Any]:
    return flatten(synth.resources("AWS::CloudWatch::Alarm")[synth.logical_id(synth.stack.monitoring.alarms[name])])[
        "Properties"
    ]


def expression(props: dict[str, Any]) -> str:
    (returned,) = [m for m in props["Metrics"] if m.get("ReturnData", True)]
    return str(returned["Expression"])


def stats(props: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The metric-math inputs of an alarm by id: {id: {"namespace", "name", "dims", "stat", "period"}}."""
    found = {}
    for query in props["Metrics"]:
        if "MetricStat" in query:
            stat = query["MetricStat"]
            found[query["Id"]] = {
                "namespace": stat["Metric"]["Namespace"],
                "name": stat["Metric"]["MetricName"],
                "dims": {d["Name"]: d["Value"] for d in stat["Metric"].get("Dimensions", [])},
                "stat": stat["Stat"],
                "period": stat["Period"],
            }
    return found


def the_metric(props: dict[str, Any]) -> dict[str, Any]:
    """The one series a single-metric alarm reads (CloudFormation's flat form, or one labelled query)."""
    if "MetricName" in props:
        return {"namespace": props["Namespace"], "name": props["MetricName"],
                "dims": {d["Name"]: d["Value"] for d in props.get("Dimensions", [])},
                "stat": props["Statistic"], "period": props["Period"]}  # fmt: skip
    (only,) = stats(props).values()
    return only


def cluster_dims(cluster: str, **breakdown: str) -> dict[str, str]:
    return {"service": "carpool", "cluster": cluster, **breakdown}


def test_pods_pending_alarm(default: Synth) -> None:
    props = alarm(default, "PodsPending")
    metric = the_metric(props)
    assert (metric["namespace"], metric["name"], metric["stat"]) == ("Carpool", "PodsUnboundSeconds", "Maximum")
    assert metric["dims"] == cluster_dims("demo")
    assert props["Threshold"] == 900
    assert props["ComparisonOperator"] == "GreaterThanThreshold"
    assert props["TreatMissingData"] == "notBreaching"


def test_launch_failures_alarm_counts_all_but_capacity_errors(default: Synth) -> None:
    props = alarm(default, "LaunchFailures")
    # Insufficient capacity is handled by falling back to other offerings; other errors repeat.
    assert expression(props) == "FILL(failed, 0) - FILL(capacity, 0)"
    inputs = stats(props)
    assert inputs["failed"]["dims"] == cluster_dims("demo")  # the cluster total, whatever the reason
    assert inputs["capacity"]["dims"] == cluster_dims("demo", reason="InsufficientCapacity")
    assert {i["name"] for i in inputs.values()} == {"LaunchFailures"}
    assert {(i["stat"], i["period"]) for i in inputs.values()} == {("Sum", 300)}
    assert props["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert props["Threshold"] >= 1


def test_launch_failure_rate_alarm(default: Synth) -> None:
    props = alarm(default, "LaunchFailureRate")
    assert expression(props) == (
        "IF(FILL(failed, 0) + FILL(created, 0) >= 4, 100 * FILL(failed, 0) / (FILL(failed, 0) + FILL(created, 0)), 0)"
    )
    inputs = stats(props)
    assert {k: (v["name"], v["dims"]) for k, v in inputs.items()} == {
        "failed": ("LaunchFailures", cluster_dims("demo")),
        "created": ("NodeClaimsCreated", cluster_dims("demo")),
    }
    assert {(i["stat"], i["period"]) for i in inputs.values()} == {("Sum", 900)}
    assert props["Threshold"] == 50
    assert props["ComparisonOperator"] == "GreaterThanThreshold"


def test_watcher_not_running_alarm_treats_silence_as_failure(default: Synth) -> None:
    props = alarm(default, "WatcherNotRunning")
    metric = the_metric(props)
    assert (metric["name"], metric["stat"], metric["period"]) == ("WatcherRuns", "Sum", 300)
    assert metric["dims"] == cluster_dims("demo")
    assert props["Threshold"] == 1
    assert props["ComparisonOperator"] == "LessThanThreshold"
    assert props["TreatMissingData"] == "breaching"


def test_registration_timeout_alarm_reads_the_disruption_functions_decisions(default: Synth) -> None:
    props = alarm(default, "RegistrationTimeouts")
    metric = the_metric(props)
    assert (metric["name"], metric["stat"]) == ("Disruptions", "Sum")
    assert metric["dims"] == cluster_dims("demo", reason="registration-timeout")
    assert props["Threshold"] == 1
    assert props["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    # The reason the library records for a claim whose node never joined.
    assert "registration-timeout" in string_constants()


def string_constants() -> set[str]:
    return {
        node.value
        for path in LIBRARY.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def test_config_invalid_alarm(default: Synth) -> None:
    props = alarm(default, "ConfigInvalid")
    metric = the_metric(props)
    assert (metric["name"], metric["stat"], metric["dims"]) == ("ConfigInvalid", "Sum", cluster_dims("demo"))
    assert props["Threshold"] == 1
    assert props["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"


def test_disruption_action_failures_alarm_reads_the_clusters_total(default: Synth) -> None:
    """Issue 30 item 4: a refused TerminateInstances is reported each run it is tried; three failed actions
    in 15 minutes (a denial repeats every minute) notify."""
    props = alarm(default, "DisruptionActionFailures")
    metric = the_metric(props)
    assert (metric["name"], metric["stat"], metric["dims"]) == ("DisruptionActionFailures", "Sum", cluster_dims("demo"))
    assert metric["period"] == 900 and props["Threshold"] == 3
    assert props["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert "DisruptionActionFailures" in string_constants()


def test_stale_interruptions_alarm(default: Synth) -> None:
    props = alarm(default, "StaleInterruptions")
    metric = the_metric(props)
    assert (metric["name"], metric["dims"]) == ("InterruptionsStale", cluster_dims("demo"))
    assert props["Threshold"] == 1


@pytest.mark.parametrize("name", ["provisioner", "registrar", "interruption", "delivery"])
def test_each_dlq_alarms_on_new_messages_not_on_depth(default: Synth, name: str) -> None:
    props = alarm(default, f"{name.title()}DlqNewMessages")
    queue = default.stack.routing.dead_letter_queues[name]
    # NumberOfMessagesSent misses redriven messages; depth would keep the alarm red for 14 days.
    assert expression(props) == "DIFF(FILL(FILL(visible, REPEAT), 0))"
    assert stats(props) == {
        "visible": {
            "namespace": "AWS/SQS",
            "name": "ApproximateNumberOfMessagesVisible",
            "dims": {"QueueName": "${" + default.logical_id(queue) + ".QueueName}"},
            "stat": "Maximum",
            "period": 60,
        }
    }
    assert props["Threshold"] == 0
    assert props["ComparisonOperator"] == "GreaterThanThreshold"
    # ALARM while an arrival is within the last 5 minutes, then OK, so the next arrival notifies again.
    assert (props["EvaluationPeriods"], props["DatapointsToAlarm"]) == (5, 1)
    assert props["TreatMissingData"] == "notBreaching"


@pytest.mark.parametrize("kind", ["Errors", "Throttles"])
@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_function_alarms_on_errors_and_throttles(default: Synth, name: str, kind: str) -> None:
    props = alarm(default, f"{name.title()}{kind}")
    function = default.stack.functions.functions[name]
    metric = the_metric(props)
    assert (metric["namespace"], metric["name"], metric["stat"], metric["period"]) == ("AWS/Lambda", kind, "Sum", 300)
    assert metric["dims"] == {"FunctionName": "${" + default.logical_id(function) + "}"}
    assert (props["EvaluationPeriods"], props["DatapointsToAlarm"]) == (3, 2)
    assert props["Threshold"] == 1


def test_one_alarm_reads_the_highest_share_of_any_pool_limit(full: Synth, default: Synth) -> None:
    """Not one alarm per pool and limit: one series (the watcher's highest share of a limit, percent) and
    one alarm, whatever the number of pools."""
    for synth in (full, default):
        names = [n for n in synth.stack.monitoring.alarms if n.startswith("PoolNearLimit")]
        assert names == ["PoolNearLimit"]
        props = alarm(synth, "PoolNearLimit")
        metric = the_metric(props)
        assert (metric["namespace"], metric["name"], metric["stat"]) == ("Carpool", "NodePoolLimitUsed", "Maximum")
        assert props["Threshold"] == pytest.approx(75.0)
        assert props["ComparisonOperator"] == "GreaterThanThreshold"
    assert "spec.limits" in alarm(full, "PoolNearLimit")["AlarmDescription"]


def test_the_pool_limit_alarm_does_not_depend_on_the_pools_of_a_deploy(rbac: Synth) -> None:
    """The pools live in the cluster and change without a deploy: the alarm is there for every stack, and a
    cluster with no limit publishes no data, which leaves it OK."""
    props = alarm(rbac, "PoolNearLimit")
    assert props["TreatMissingData"] == "notBreaching"


def test_alarms_read_cluster_totals_only_of_metrics_the_library_totals(default: Synth) -> None:
    from carpool.observability import CLUSTER_TOTALS

    for _namespace, name, dims in series_read(default):
        if _namespace == "Carpool" and BREAKDOWN[name] and not set(dict(dims)) - {"service", "cluster"}:
            assert name in CLUSTER_TOTALS, f"an alarm reads the total of {name}, which is not published"


def test_billed_alarm_metrics_are_every_input_of_every_alarm(default: Synth, full: Synth) -> None:
    for synth in (default, full):
        counted = synth.stack.monitoring.alarm_metrics
        assert set(counted) == set(synth.stack.monitoring.alarms)
        for name, props in ((n, alarm(synth, n)) for n in counted):
            assert counted[name] == (1 if "MetricName" in props else len(stats(props))), name
    # 12 carpool alarms reading 14 metrics, 4 DLQs, errors + throttles of 5 functions, one for the pool limits
    assert sum(default.stack.monitoring.alarm_metrics.values()) == 14 + 4 + 10 + 1


def test_alarm_count(default: Synth, full: Synth) -> None:
    # pending, launch failures, failure rate, watcher, registration timeouts, invalid config, cluster facts, node
    # class not ready, replacement above ceiling, failed disruption actions, Karpenter controller active, stale
    # interruptions, 4 DLQs, errors +
    # throttles of 5 functions, then one for the pools' limits (the highest share of a limit used), whatever
    # the pools
    default.template.resource_count_is("AWS::CloudWatch::Alarm", 12 + 4 + 10 + 1)
    full.template.resource_count_is("AWS::CloudWatch::Alarm", 12 + 4 + 10 + 1)


# --- two clusters, one account ---------------------------------------------------------------------


def series_read(synth: Synth) -> Iterator[tuple[str, str, frozenset[tuple[str, str]]]]:
    """Every (namespace, metric, dimensions) any alarm of ``synth`` reads.

    A dimension value referring to a resource (``${Logical.Attr}``) is qualified with the stack's name:
    it names that stack's own function or queue, which the other stack does not share.
    """
    for resource in synth.resources("AWS::CloudWatch::Alarm").values():
        props = flatten(resource["Properties"])
        inputs = [the_metric(props)] if "MetricName" in props else list(stats(props).values())
        assert inputs, f"alarm without a metric: {props}"
        for i in inputs:
            dims = {k: f"{synth.stack.stack_name}/{v}" if v.startswith("${") else v for k, v in i["dims"].items()}
            yield i["namespace"], i["name"], frozenset(dims.items())


def test_alarms_of_two_clusters_share_no_series(default: Synth, other: Synth) -> None:
    ours, theirs = set(series_read(default)), set(series_read(other))
    assert len(ours) == len(theirs) >= 20
    assert not ours & theirs
    for namespace, _name, dims in ours | theirs:
        if namespace == "Carpool":
            assert dict(dims)["cluster"] in ("demo", "demo-b")


def test_no_alarm_queries_metrics_it_does_not_name(default: Synth) -> None:
    # SEARCH and Metrics Insights (SELECT) match series by pattern, across clusters unless filtered.
    for resource in default.resources("AWS::CloudWatch::Alarm").values():
        for query in resource["Properties"].get("Metrics", []):
            text = str(query.get("Expression", "")).upper()
            assert "SEARCH" not in text and "SELECT" not in text


def test_functions_emit_the_series_the_alarms_read(default: Synth, other: Synth) -> None:
    """The functions' environment gives every data point the dimensions the alarms name."""
    for synth, cluster in ((default, "demo"), (other, "demo-b")):
        for function in synth.stack.functions.functions.values():
            props = synth.resources("AWS::Lambda::Function")[synth.logical_id(function)]["Properties"]
            env = props["Environment"]["Variables"]
            assert env["CARPOOL_CLUSTER_NAME"] == cluster
            assert env["POWERTOOLS_SERVICE_NAME"] == SERVICE


# --- alarm topic ------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["default", "full", "rbac"])
def test_alarm_topic_is_encrypted_tls_only_and_wired_to_every_alarm(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    topic = synth.stack.monitoring.topic
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
    alarms = synth.resources("AWS::CloudWatch::Alarm")
    assert alarms
    for alarm_props in alarms.values():
        assert alarm_props["Properties"]["AlarmActions"] == [{"Ref": topic_id}]
        assert alarm_props["Properties"]["OKActions"] == [{"Ref": topic_id}]
    subscriptions = [flatten(s["Properties"]) for s in synth.resources("AWS::SNS::Subscription").values()]
    if variant == "full":
        assert subscriptions == [
            {"Protocol": "email", "Endpoint": "oncall@example.com", "TopicArn": "${" + topic_id + "}"}
        ]
    else:
        assert subscriptions == []  # anyone can subscribe to the output's topic


def test_alarm_topic_is_a_stack_output(default: Synth) -> None:
    outputs = default.template.find_outputs("AlarmTopicArn")
    assert list(outputs) == ["AlarmTopicArn"]
    assert outputs["AlarmTopicArn"]["Value"] == {"Ref": default.logical_id(default.stack.monitoring.topic)}


# --- dashboard ---------------------------------------------------------------------------------------


def dashboard(synth: Synth) -> dict[str, Any]:
    (resource,) = synth.resources("AWS::CloudWatch::Dashboard").values()
    body = str(flatten(resource["Properties"]["DashboardBody"]))
    return json.loads(body.replace("${AWS::Region}", "eu-west-1"))  # type: ignore[no-any-return]


def graphed(body: dict[str, Any]) -> Iterator[list[Any]]:
    for widget in body["widgets"]:
        yield from widget["properties"].get("metrics", [])


def test_dashboard_graphs_every_carpool_metric_of_its_cluster_only(default: Synth) -> None:
    (resource,) = default.resources("AWS::CloudWatch::Dashboard").values()
    assert resource["Properties"]["DashboardName"] == "carpool-demo"
    seen = set()
    for line in graphed(dashboard(default)):
        options = line[-1] if isinstance(line[-1], dict) else {}
        if "expression" in options:
            search = options["expression"]
            if search.startswith("SEARCH("):
                name = search.split('MetricName="')[1].split('"')[0]
                schema = {*BREAKDOWN[name], "cluster", "service"}
                assert f"{{Carpool,{','.join(sorted(schema))}}}" in search  # exact schema: no totals
                assert 'cluster="demo"' in search
                seen.add(name)
        elif line[0] == "Carpool":
            names_values = line[2:-1] if options else line[2:]
            assert dict(zip(names_values[::2], names_values[1::2], strict=True)) == cluster_dims("demo"), line
            seen.add(line[1])
    assert seen == set(BREAKDOWN) - LOG_ONLY
    text = json.dumps(dashboard(default))
    for builtin in ("Invocations", "Errors", "Throttles", "Duration", "ApproximateNumberOfMessagesVisible",
                    "ApproximateAgeOfOldestMessage"):  # fmt: skip
        assert f'"{builtin}"' in text, builtin


def test_dashboard_reads_the_metrics_written_as_logs_from_the_functions_logs(default: Synth) -> None:
    queries = [w["properties"] for w in dashboard(default)["widgets"] if w["type"] == "log"]
    groups = {f"${{{default.logical_id(g)}}}" for g in default.stack.functions.log_groups.values()}
    shown = set()
    for props in queries:
        query = props["query"]
        assert 'cluster = "demo"' in query  # this cluster's lines only
        assert set(re.findall(r"SOURCE '([^']+)'", query)) == groups  # every function's log group
        shown |= {name for name in LOG_ONLY | {"NodeClaimsCreated", "Disruptions"} if f'"{name}"' in query}
    # every metric written as log lines, and the breakdowns that are no series (pool and reason of a claim
    # created, the disruption reasons no alarm reads)
    assert shown == LOG_ONLY | {"NodeClaimsCreated", "Disruptions"}


def test_no_alarm_reads_a_metric_written_as_logs(default: Synth) -> None:
    read = {name for namespace, name, _dims in series_read(default) if namespace == "Carpool"}
    assert read and not read & LOG_ONLY


@pytest.mark.parametrize("name", ["PodPendingToLaunchSeconds", "NodeRegistrationSeconds"])
def test_dashboard_draws_the_startup_durations_p50_p99_and_max_over_five_minutes(default: Synth, name: str) -> None:
    def draws(line: list[Any]) -> bool:
        return line[:2] == ["Carpool", name]

    widgets = [w["properties"] for w in dashboard(default)["widgets"] if any(map(draws, w["properties"].get("metrics", [])))]
    assert len(widgets) == 1, "one graph per duration"
    lines = widgets[0]["metrics"]
    # the cluster's one series (the pool is a property of the log document, not a dimension)
    assert [dict(zip(line[2:-1:2], line[3:-1:2], strict=True)) for line in lines] == [cluster_dims("demo")] * 3
    assert [(line[-1]["stat"], line[-1].get("period", 300), line[-1]["label"]) for line in lines] == [
        ("p50", 300, "p50"), ("p99", 300, "p99"), ("Maximum", 300, "max")]


def test_dashboard_shows_every_alarm(default: Synth) -> None:
    alarm_widgets = [w for w in dashboard(default)["widgets"] if w["type"] == "alarm"]
    assert len(alarm_widgets) == 1
    assert len(alarm_widgets[0]["properties"]["alarms"]) == len(default.stack.monitoring.alarms)


# --- the dashboard's schema is the library's -------------------------------------------------------


def emitted() -> dict[str, set[str]]:
    """Metric name -> breakdown dimension names, from every ``observability.emit/seconds/durations`` call
    in the library and the handlers."""
    found: dict[str, set[str]] = {}
    for path in [*LIBRARY.rglob("*.py"), *FUNCTIONS.glob("*/handler.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            target = node.func
            if not (isinstance(target.value, ast.Name) and target.value.id == "observability"):
                continue
            if target.attr not in ("emit", "seconds", "durations"):
                continue
            name = node.args[0]
            assert isinstance(name, ast.Constant), f"{path}:{node.lineno}: metric names are literals"
            found.setdefault(str(name.value), set()).update(k.arg for k in node.keywords if k.arg not in (None, "unit"))
    return found


def test_every_emitted_metric_and_breakdown_is_known_to_the_dashboard() -> None:
    library = emitted()
    assert library  # the scan found the calls
    from carpool.observability import PROPERTIES

    # the dimensions of each series: what is emitted, less the breakdowns written as document properties
    assert {name: set(dims) for name, dims in BREAKDOWN.items()} == {
        name: dims - PROPERTIES.get(name, frozenset()) for name, dims in library.items()}
    assert all(PROPERTIES[name] <= library[name] for name in PROPERTIES)


def test_node_class_not_ready_alarm(default: Synth) -> None:
    """One series for the cluster (cause, node class and pool are properties): any refused launch raises it,
    and it stays raised while the provisioner meets the cause, once per pool and invocation."""
    props = alarm(default, "NodeClassNotReady")
    metric = the_metric(props)
    assert (metric["name"], metric["stat"], metric["dims"]) == ("NodeClassNotReady", "Sum", cluster_dims("demo"))
    assert props["Threshold"] == 1 and props["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert "NodeClassNotReady" in string_constants()


def test_cluster_facts_unresolved_alarm(default: Synth) -> None:
    props = alarm(default, "ClusterFactsUnresolved")
    metric = the_metric(props)
    assert (metric["name"], metric["stat"], metric["dims"]) == ("ClusterFactsUnresolved", "Sum", cluster_dims("demo"))
    assert props["Threshold"] == 1 and props["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    # the library emits exactly this name where it refuses a launch
    assert "ClusterFactsUnresolved" in string_constants()


def test_karpenter_controller_active_alarm(default: Synth) -> None:
    """carpool stood still because a Karpenter controller holds its Lease (`carpool.app.standstill`)."""
    props = alarm(default, "KarpenterControllerActive")
    metric = the_metric(props)
    assert (metric["name"], metric["stat"], metric["dims"]) == ("KarpenterControllerActive", "Sum", cluster_dims("demo"))
    assert props["Threshold"] == 1 and props["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert "kubectl scale deployment karpenter" in props["AlarmDescription"]
    assert "KarpenterControllerActive" in string_constants()
