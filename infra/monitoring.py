"""CloudWatch dashboard and alarms for carpool, with an optional encrypted SNS topic for the alarms.

The functions publish EMF metrics with Powertools in namespace ``Carpool``; Powertools adds the
``service=carpool`` dimension to every metric. The names mirror Karpenter's (reference section 9) so
people can carry their runbooks over:

========================== =========================== ============================================
metric                     dimensions (besides service) Karpenter equivalent
========================== =========================== ============================================
PodsUnboundSeconds         -                           karpenter_pods_unbound_time_seconds
SchedulingDurationSeconds  -                           karpenter_scheduler_scheduling_duration_seconds
NodeClaimsCreated          nodepool, reason            karpenter_nodeclaims_created_total
LaunchFailures             reason                      karpenter_cloudprovider_instance_launch_failures
InterruptionsReceived      kind                        karpenter_interruption_received_messages_total
NodePoolUsage/Limit        nodepool, resource          karpenter_nodepools_usage / _limit
EstimatedHourlyCost        -                           karpenter_nodepools_cost_total
CapacityCacheHits/Defaults -                           (carpool: learned vs estimated capacity)
WatcherRuns                -                           (carpool: the watcher's heartbeat)
Disruptions                reason                      karpenter_nodeclaims_disrupted_total
PodsServedBy               server                      (carpool: who took a pending pod)
========================== =========================== ============================================

Alarms that only need an aggregate use Metrics Insights queries (``SELECT MAX(x) FROM Carpool``), which
match whatever dimensions the emitter adds; a metric-math ratio cannot use those, so the "pool near its
limit" alarms name exact dimensions ``{service, nodepool, resource}``, one alarm per ``spec.limits``
entry found in the deployed config. Graphs use ``SEARCH`` so every dimension value shows up unasked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import PoolLimit
from infra.settings import Settings

NAMESPACE = "Carpool"
SERVICE = "carpool"
#: A pod pending for 15 minutes is what people page on (reference section 9).
PENDING_SECONDS_THRESHOLD = 900
#: Insufficient capacity is expected (the next offering is tried, and the PodsPending alarm catches the
#: case where none works); any other launch error (IAM, quota, subnet, template) repeats until fixed.
EXPECTED_LAUNCH_FAILURE = "InsufficientCapacity"
#: A burst, not a single throttled call.
LAUNCH_FAILURES_THRESHOLD = 3
POOL_USAGE_RATIO_THRESHOLD = 0.75


def insights(query: str, *, label: str, period_minutes: int = 1) -> cloudwatch.MathExpression:
    """A Metrics Insights query (usable in alarms since it returns one series)."""
    return cloudwatch.MathExpression(
        expression=query, label=label, period=Duration.minutes(period_minutes), using_metrics={}
    )


def search(metric_name: str, statistic: str, *, prefix: str = "", period: int = 60) -> cloudwatch.MathExpression:
    """All series of ``metric_name`` whatever their dimensions (graphs only: alarms refuse SEARCH).

    The label keeps CloudWatch's own per-series label (``${LABEL}``: the dimension values), so a graph
    shows one line per nodepool/reason instead of N lines with the same name.
    """
    return cloudwatch.MathExpression(
        expression=f"SEARCH('Namespace=\"{NAMESPACE}\" MetricName=\"{metric_name}\"', '{statistic}', {period})",
        label=f"{prefix} ${{LABEL}}".strip(),
        period=Duration.seconds(period),
        using_metrics={},
    )


def pool_metric(name: str, limit: PoolLimit) -> cloudwatch.Metric:
    return cloudwatch.Metric(
        namespace=NAMESPACE,
        metric_name=name,
        dimensions_map={"service": SERVICE, "nodepool": limit.nodepool, "resource": limit.resource},
        statistic="Maximum",
        period=Duration.minutes(5),
    )


class Monitoring(Construct):
    """The dashboard, the alarms and (with ``-c alarmEmail`` or ``-c alarmTopic=true``) their topic."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        functions: Mapping[str, lambda_.IFunction],
        work_queues: Mapping[str, sqs.IQueue],
        dead_letter_queues: Mapping[str, sqs.IQueue],
        pool_limits: Sequence[PoolLimit],
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = self._topic(settings) if settings.wants_alarm_topic else None
        self.alarms: dict[str, cloudwatch.Alarm] = {}

        self._alarm(
            "PodsPending",
            insights(f"SELECT MAX(PodsUnboundSeconds) FROM {NAMESPACE}", label="oldest pending pod (s)"),
            description=(
                f"A provisionable pod has been pending for more than {PENDING_SECONDS_THRESHOLD // 60} minutes: "
                "check LaunchFailures, the provisioner logs and `carpool plan` for why it does not fit."
            ),
            threshold=PENDING_SECONDS_THRESHOLD,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        )
        self._alarm(
            "LaunchFailures",
            insights(
                f"SELECT SUM(LaunchFailures) FROM {NAMESPACE} WHERE reason != '{EXPECTED_LAUNCH_FAILURE}'",
                label="launch failures (not capacity)",
                period_minutes=5,
            ),
            description=(
                f"{LAUNCH_FAILURES_THRESHOLD} or more launch failures other than insufficient capacity in 5 "
                "minutes (IAM, quota, subnet, launch template): they repeat until fixed. Check the "
                "provisioner logs for the CreateFleet error."
            ),
            threshold=LAUNCH_FAILURES_THRESHOLD,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        )
        self._alarm(
            "WatcherNotRunning",
            insights(f"SELECT SUM(WatcherRuns) FROM {NAMESPACE}", label="watcher runs", period_minutes=5),
            description=(
                "The watcher has not completed a run in 5 minutes: pending pods are not being seen. Check the "
                "watcher's logs (Kubernetes access entry, VPC reachability of the API endpoint)."
            ),
            threshold=1,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            # No data at all is the failure this alarm exists for.
            missing=cloudwatch.TreatMissingData.BREACHING,
        )
        for name, queue in dead_letter_queues.items():
            self._alarm(
                f"{name.title()}DlqNotEmpty",
                queue.metric_approximate_number_of_messages_visible(statistic="Maximum", period=Duration.minutes(1)),
                description=(
                    f"Messages in the {name} dead-letter queue: events that failed 3 times (or could not be "
                    "delivered). Inspect them, fix the cause, then redrive them from the SQS console."
                ),
                threshold=0,
                comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            )
        used_ids: set[str] = set()
        for limit in pool_limits:
            alarm_id = f"PoolNearLimit{_identifier(limit.nodepool)}On{_identifier(limit.resource)}"
            alarm_id = alarm_id if alarm_id not in used_ids else f"{alarm_id}{len(used_ids)}"
            used_ids.add(alarm_id)
            ratio = cloudwatch.MathExpression(
                expression="usage / limit",
                using_metrics={"usage": pool_metric("NodePoolUsage", limit), "limit": pool_metric("NodePoolLimit", limit)},
                label=f"{limit.nodepool} {limit.resource} usage / limit",
                period=Duration.minutes(5),
            )
            self._alarm(
                alarm_id,
                ratio,
                description=(
                    f"NodePool {limit.nodepool} uses more than {POOL_USAGE_RATIO_THRESHOLD:.0%} of its "
                    f"{limit.resource} limit; new pods will stay pending once it is reached. Raise spec.limits "
                    "or add a pool."
                ),
                threshold=POOL_USAGE_RATIO_THRESHOLD,
                comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            )

        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=f"carpool-{settings.cluster_name}",
            default_interval=Duration.hours(3),
        )
        self._widgets(settings, functions, work_queues, dead_letter_queues)

    # --- alarms -----------------------------------------------------------------------------------

    def _alarm(
        self,
        construct_id: str,
        metric: cloudwatch.IMetric,
        *,
        description: str,
        threshold: float,
        comparison: cloudwatch.ComparisonOperator,
        missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
    ) -> cloudwatch.Alarm:
        alarm = cloudwatch.Alarm(
            self,
            construct_id,
            metric=metric,
            alarm_description=description,
            threshold=threshold,
            comparison_operator=comparison,
            evaluation_periods=1,
            datapoints_to_alarm=1,
            treat_missing_data=missing,
        )
        if self.topic is not None:
            alarm.add_alarm_action(actions.SnsAction(self.topic))
            alarm.add_ok_action(actions.SnsAction(self.topic))
        self.alarms[construct_id] = alarm
        return alarm

    def _topic(self, settings: Settings) -> sns.Topic:
        """An SNS topic encrypted with its own key: CloudWatch cannot publish with the AWS managed one."""
        key = kms.Key(
            self,
            "AlarmTopicKey",
            description=f"carpool alarm topic of {settings.cluster_name}",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.DESTROY,
        )
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],  # in a key policy, "*" means this key
                conditions={"StringEquals": {"aws:SourceAccount": Stack.of(self).account}},
            )
        )
        topic = sns.Topic(
            self,
            "AlarmTopic",
            display_name=f"carpool alarms ({settings.cluster_name})",
            master_key=key,
            enforce_ssl=True,
        )
        if settings.alarm_email:
            topic.add_subscription(subscriptions.EmailSubscription(settings.alarm_email))
        return topic

    # --- dashboard --------------------------------------------------------------------------------

    def _widgets(
        self,
        settings: Settings,
        functions: Mapping[str, lambda_.IFunction],
        work_queues: Mapping[str, sqs.IQueue],
        dead_letter_queues: Mapping[str, sqs.IQueue],
    ) -> None:
        def graph(title: str, metrics: Sequence[cloudwatch.IMetric], width: int = 8) -> cloudwatch.GraphWidget:
            return cloudwatch.GraphWidget(title=title, left=list(metrics), width=width, height=6)

        self.dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown=(
                    f"# carpool: {settings.cluster_name}\n"
                    "Pending pods -> watcher -> bus -> provisioner -> CreateFleet -> node registers. "
                    "Metrics: namespace `Carpool` (EMF). Runbooks: see each alarm's description."
                ),
                width=24,
                height=2,
            )
        )
        self.dashboard.add_widgets(
            graph("Oldest pending pod (s)", [search("PodsUnboundSeconds", "Maximum")]),
            graph(
                "Scheduling duration (s)",
                [
                    search("SchedulingDurationSeconds", "p50", prefix="p50"),
                    search("SchedulingDurationSeconds", "p99", prefix="p99"),
                ],
            ),
            graph("Node claims created (by pool, reason)", [search("NodeClaimsCreated", "Sum")]),
        )
        self.dashboard.add_widgets(
            graph("Launch failures (by reason)", [search("LaunchFailures", "Sum")]),
            graph("Interruptions received (by kind)", [search("InterruptionsReceived", "Sum")]),
            graph(
                "NodePool usage and limits",
                [search("NodePoolUsage", "Maximum", prefix="usage"), search("NodePoolLimit", "Maximum", prefix="limit")],
            ),
        )
        self.dashboard.add_widgets(
            graph("Estimated hourly cost (USD)", [search("EstimatedHourlyCost", "Maximum")]),
            graph(
                "Capacity cache (learned vs estimated)",
                [
                    search("CapacityCacheHits", "Sum", prefix="learned"),
                    search("CapacityCacheDefaults", "Sum", prefix="estimated"),
                ],
            ),
            graph("Watcher runs", [search("WatcherRuns", "Sum")]),
        )
        self.dashboard.add_widgets(
            graph("Disruptions (by reason)", [search("Disruptions", "Sum")], width=12),
            graph("Pods served by (carpool vs other autoscalers)", [search("PodsServedBy", "Sum")], width=12),
        )
        names = list(functions)
        self.dashboard.add_widgets(
            graph("Invocations", [functions[n].metric_invocations(label=n) for n in names], width=6),
            graph("Errors", [functions[n].metric_errors(label=n) for n in names], width=6),
            graph("Throttles", [functions[n].metric_throttles(label=n) for n in names], width=6),
            graph("Duration p99 (ms)", [functions[n].metric_duration(statistic="p99", label=n) for n in names], width=6),
        )
        self.dashboard.add_widgets(
            graph(
                "Work queues: visible messages",
                [q.metric_approximate_number_of_messages_visible(label=n) for n, q in work_queues.items()],
            ),
            graph(
                "Work queues: age of oldest message (s)",
                [q.metric_approximate_age_of_oldest_message(label=n) for n, q in work_queues.items()],
            ),
            graph(
                "Dead-letter queues: visible messages",
                [q.metric_approximate_number_of_messages_visible(label=n) for n, q in dead_letter_queues.items()],
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(alarms=list(self.alarms.values()), title="carpool alarms", width=24)
        )


def _identifier(text: str) -> str:
    """A construct-id-safe CamelCase piece of a pool or resource name (``nvidia.com/gpu`` -> NvidiaComGpu)."""
    pieces = [p for p in "".join(c if c.isalnum() else " " for c in text).split() if p]
    return "".join(p[:1].upper() + p[1:] for p in pieces) or "X"
