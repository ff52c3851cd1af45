"""CloudWatch dashboard and alarms for one cluster's carpool, and the encrypted SNS topic they notify.

The functions publish EMF metrics with Powertools in namespace ``Carpool`` (``carpool.observability``).
Every data point carries ``service=carpool`` and ``cluster=<name>``; a point with a breakdown (``reason``,
``nodepool``...) of a metric an alarm totals (``observability.CLUSTER_TOTALS``) is also published under
the cluster's total ``{service, cluster}``. The names mirror Karpenter's (reference section 9) so people
can carry their runbooks over:

========================== ==================== ===============================================
metric                     breakdown             Karpenter equivalent
========================== ==================== ===============================================
PodsUnboundSeconds         -                     karpenter_pods_unbound_time_seconds
SchedulingDurationSeconds  -                     karpenter_scheduler_scheduling_duration_seconds
NodeClaimsCreated          (nodepool, reason)    karpenter_nodeclaims_created_total
LaunchFailures             reason                karpenter_cloudprovider_instance_launch_failures
LaunchOutcomesUnknown      -                     (carpool: a CreateFleet answer lost; its instances repaired from EC2)
InterruptionsReceived      kind                  karpenter_interruption_received_messages_total
InterruptionsStale         kind                  (Karpenter: its queue's 300 s retention)
NodePoolUsage              nodepool, resource    karpenter_nodepools_usage (a log line; limits: the config's)
NodePoolLimitUsed          (nodepool, resource)  (carpool: the highest share of a limit any pool uses, percent)
EstimatedHourlyCost        nodepool              karpenter_nodepools_cost_total
CapacityCacheHits/Defaults -                     (carpool: learned vs estimated capacity)
WatcherRuns                -                     (carpool: the watcher's heartbeat)
Disruptions                reason (some)         karpenter_nodeclaims_disrupted_total
PodsServedBy               server                (carpool: who took a pending pod)
PodEventsDropped           -                     (carpool: pod events no longer pending on arrival)
ConfigInvalid              function              (Karpenter: NodePool/EC2NodeClass status conditions)
ClusterFactsUnresolved     -                     (carpool: version/CIDR/DNS/IP family unknown, no launch)
NodeClassNotReady          (cause, nodeclass,     (Karpenter: EC2NodeClass status conditions, NodeClaim
                           nodepool)             ``NodeClassNotReady``; once per pool and invocation)
KarpenterControllerActive  -                     (carpool: stood still, Karpenter's Lease is held or unreadable)
ReplacementAboveCeiling    -                     (carpool: a consolidation launch priced over its ceiling)
CatalogRefreshFailures     -                     (carpool: the stored instance-type catalog not rebuilt)
CatalogFallbacks           -                     (carpool: a function fell back to the shipped catalog)
PodPendingToLaunchSeconds  (nodepool)            karpenter_pods_startup_duration_seconds (to launch)
NodeRegistrationSeconds    (nodepool)            (Karpenter: nodeclaim registration duration)
DisruptionActionFailures   action                (carpool: one disruption action failed, e.g. a refused terminate)
DisruptionsAbandoned       reason                karpenter_voluntary_disruption_queue_failures_total
UsageReconciled            nodepool              (carpool: a pool's usage corrected from its claims)
NodeClaimSyncFailures      step                  (carpool: a NodeClaim write failed; the next disruption run repairs it)
========================== ==================== ===============================================

A breakdown in parentheses is a property of the EMF document, not a dimension: no alarm reads a series
of it, so the point counts in the cluster's one series and the dashboard groups the logs by it
(``observability.PROPERTIES``). Of ``Disruptions`` only the reason an alarm reads is a series; the
others are log lines (``observability.ALARMED_VALUES``).

Every alarm names its series exactly, with this cluster's ``cluster`` dimension (or, for AWS metrics,
this stack's own function or queue): two clusters in one account and Region never share a series, so
one cluster's watcher cannot keep another's ``WatcherNotRunning`` green. That rules out Metrics Insights
queries (``SELECT ... FROM Carpool`` matches every cluster unless filtered, and cannot be combined in
metric math); cluster-wide counts read the ``{service, cluster}`` totals instead. Graphs use ``SEARCH``
with the exact dimension schema and ``cluster="<name>"``, so every nodepool/reason shows up unasked but
only this cluster's, and the totals are not counted twice.

A NodePool's usage of each limited resource is a log line (``observability.LOG_ONLY``), not a series:
the watcher compares it with the limit of the cluster's NodePools and publishes one series for the
cluster, ``NodePoolLimitUsed``, the highest share of a limit any pool uses (percent, with that pool and
resource as properties). One alarm reads it (``PoolNearLimit``, above 75 %) whatever the number of pools
and limits, made whether or not a pool has limits today (the pools change without a deploy; with no
limit the series has no data and the alarm stays OK), and it follows a ``kubectl apply``; the dashboard's
table names the pool and resource. One series and one alarm metric in place of one of each per limit
and pool, every hour of the month.

What this costs a month (``carpool.sim.run.own_cost``): each alarm $0.10 per metric it reads (a metric-math
alarm pays for every input), the dashboard $3 (an account's first three are free), the topic's key $1.
``Monitoring.alarm_metrics`` counts the billed alarm metrics.

Metrics no alarm reads are log lines, not series (``observability.LOG_ONLY``); the dashboard shows
them with Logs Insights queries over the functions' log groups (``log_groups``), filtered to this
cluster. The two startup durations are the exception: a series each (the pool a property, as
Karpenter's pods startup duration has no pool label), drawn as p50, p99 and max over 5 minutes, where a
time-to-capacity objective would be set.

Every alarm notifies the alarm topic (created always; ``-c alarmEmail`` adds an e-mail subscription,
anything else can subscribe to the ``AlarmTopicArn`` output), on entering ALARM and on returning to OK.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from carpool.observability import REGISTRATION_TIMEOUT
from infra.settings import Settings

NAMESPACE = "Carpool"
#: Powertools' ``service`` dimension: the functions' POWERTOOLS_SERVICE_NAME.
SERVICE = "carpool"
#: The dimension ``carpool.observability`` adds to every data point.
CLUSTER = "cluster"
#: Dimensions of each carpool metric's series (besides service and cluster): what the library emits, less
#: the breakdowns it writes as properties of the document (``observability.PROPERTIES``).
BREAKDOWN: dict[str, tuple[str, ...]] = {
    "PodsUnboundSeconds": (),
    "SchedulingDurationSeconds": (),
    "NodeClaimsCreated": (),
    "LaunchFailures": ("reason",),
    "LaunchOutcomesUnknown": (),
    "InterruptionsReceived": ("kind",),
    "InterruptionsStale": ("kind",),
    "NodePoolUsage": ("nodepool", "resource"),
    "NodePoolLimitUsed": (),
    "EstimatedHourlyCost": ("nodepool",),
    "CapacityCacheHits": (),
    "CapacityCacheDefaults": (),
    "WatcherRuns": (),
    "Disruptions": ("reason",),
    "PodsServedBy": ("server",),
    "UsageReconciled": ("nodepool",),
    "PodEventsDropped": (),
    "ConfigInvalid": ("function",),
    "ClusterFactsUnresolved": (),
    "NodeClassNotReady": (),
    "KarpenterControllerActive": (),
    "ReplacementAboveCeiling": (),
    "CatalogRefreshFailures": (),
    "CatalogFallbacks": (),
    "PodPendingToLaunchSeconds": (),
    "NodeRegistrationSeconds": (),
    "DisruptionActionFailures": ("action",),
    "DisruptionsAbandoned": ("reason",),
    "NodeClaimSyncFailures": ("step",),
}
#: The statistics the dashboard draws of a duration, over 5 minutes: (statistic, label).
DURATION_STATS = (("p50", "p50"), ("p99", "p99"), ("Maximum", "max"))
DURATION_PERIOD_SECONDS = 300

#: A pod pending for 15 minutes is what people page on (reference section 9).
PENDING_SECONDS_THRESHOLD = 900
#: Insufficient capacity is expected (the next offering is tried, and the PodsPending alarm catches the
#: case where none works); any other launch error (IAM, quota, subnet, template) repeats until fixed.
EXPECTED_LAUNCH_FAILURE = "InsufficientCapacity"
#: A burst, not a single throttled call.
LAUNCH_FAILURES_THRESHOLD = 3
#: More launches failing than succeeding over 15 minutes (capacity errors included: a pool whose every
#: offering is out of capacity is as stuck as one with a broken template)...
LAUNCH_FAILURE_RATE_PERCENT = 50
LAUNCH_FAILURE_RATE_WINDOW = Duration.minutes(15)
#: ...but not on one failed launch out of one.
LAUNCH_FAILURE_RATE_MIN_ATTEMPTS = 4
#: A refused TerminateInstances (termination protection, an SCP) is tried again every disruption run, so
#: it repeats every minute; a throttled write that succeeds next run is one or two.
DISRUPTION_ACTION_FAILURES_THRESHOLD = 3
DISRUPTION_ACTION_FAILURES_WINDOW = Duration.minutes(15)
#: ``Disruptions{reason}`` of a claim whose node never joined (``carpool.app.cleanup``): the one reason
#: published as a series (``observability.ALARMED_VALUES``), the others are log lines.
REGISTRATION_TIMEOUT_REASON = REGISTRATION_TIMEOUT
POOL_USAGE_RATIO_THRESHOLD = 0.75
#: A dead-letter queue alarm stays in ALARM this long after the last new message, then returns to OK so
#: the next one notifies again.
DLQ_ALARM_MINUTES = 5
#: Lambda errors/throttles: in two of the last three 5-minute periods (a persistent problem, not a blip).
FUNCTION_PERIODS, FUNCTION_DATAPOINTS = 3, 2
ONE_MINUTE = Duration.minutes(1)


class CarpoolMetrics:
    """This cluster's carpool metrics: exact series for alarms, ``SEARCH`` expressions for graphs."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster

    def series(
        self, name: str, statistic: str, *, period: Duration = ONE_MINUTE, **breakdown: str
    ) -> cloudwatch.Metric:
        """One series; without ``breakdown`` the cluster's total."""
        return cloudwatch.Metric(
            namespace=NAMESPACE,
            metric_name=name,
            dimensions_map={"service": SERVICE, CLUSTER: self.cluster, **breakdown},
            statistic=statistic,
            period=period,
        )

    def lines(self, name: str, statistic: str, *, prefix: str = "", period: int = 60) -> cloudwatch.IMetric:
        """What a graph draws of ``name``: its one series, or a ``SEARCH`` for every breakdown series of this
        cluster (graphs only: alarms refuse SEARCH).

        The search schema lists the exact dimension set, so the cluster total (a subset) is not drawn as
        one more line. The label keeps CloudWatch's per-series label (``${LABEL}``: the dimension values).
        """
        breakdown = BREAKDOWN[name]
        if not breakdown:
            return self.series(name, statistic, period=Duration.seconds(period)).with_(label=prefix or name)
        schema = ",".join([NAMESPACE, *sorted({*breakdown, CLUSTER, "service"})])
        query = f'{{{schema}}} MetricName="{name}" {CLUSTER}="{self.cluster}"'
        return cloudwatch.MathExpression(
            expression=f"SEARCH('{query}', '{statistic}', {period})",
            label=f"{prefix} ${{LABEL}}".strip(),
            period=Duration.seconds(period),
            using_metrics={},
        )


def new_messages(queue: sqs.IQueue) -> cloudwatch.MathExpression:
    """Messages that arrived in ``queue`` this minute, from the change of its visible count.

    Not ``NumberOfMessagesSent``: SQS does not count messages it moves to a dead-letter queue after
    ``maxReceiveCount``. Not the depth either: a DLQ keeps its messages 14 days, so an alarm on depth
    stays in ALARM after the first failure and never notifies about the next. The inner FILL repeats
    the last value over a missing minute (no false "arrival" after a gap); the outer one reads "no data
    yet" as empty, because an idle empty queue publishes nothing and its first message must still count.
    """
    visible = queue.metric_approximate_number_of_messages_visible(statistic="Maximum", period=Duration.minutes(1))
    return cloudwatch.MathExpression(
        expression="DIFF(FILL(FILL(visible, REPEAT), 0))",
        using_metrics={"visible": visible},
        label="new messages",
        period=Duration.minutes(1),
    )


class Monitoring(Construct):
    """The dashboard, the alarms and their topic."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        functions: Mapping[str, lambda_.IFunction],
        work_queues: Mapping[str, sqs.IQueue],
        dead_letter_queues: Mapping[str, sqs.IQueue],
        log_groups: Mapping[str, logs.ILogGroup],
    ) -> None:
        super().__init__(scope, construct_id)
        self.metrics = CarpoolMetrics(settings.cluster_name)
        self.topic = self._topic(settings)
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        #: metrics each alarm reads, as CloudWatch bills alarms (per metric)
        self.alarm_metrics: dict[str, int] = {}
        self._carpool_alarms()
        self._dead_letter_alarms(dead_letter_queues)
        self._function_alarms(functions)
        self._pool_alarm()

        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=f"carpool-{settings.cluster_name}",
            default_interval=Duration.hours(3),
        )
        self._widgets(settings, functions, work_queues, dead_letter_queues, log_groups)

    # --- alarms -----------------------------------------------------------------------------------

    def _carpool_alarms(self) -> None:
        m = self.metrics
        self._alarm(
            "PodsPending",
            m.series("PodsUnboundSeconds", "Maximum").with_(label="oldest pending pod (s)"),
            description=(
                f"A provisionable pod has been pending for more than {PENDING_SECONDS_THRESHOLD // 60} minutes: "
                "check LaunchFailures, the provisioner logs and `carpool plan` for why it does not fit."
            ),
            threshold=PENDING_SECONDS_THRESHOLD,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        )
        five = Duration.minutes(5)
        self._alarm(
            "LaunchFailures",
            cloudwatch.MathExpression(
                expression="FILL(failed, 0) - FILL(capacity, 0)",
                using_metrics={
                    "failed": m.series("LaunchFailures", "Sum", period=five),
                    "capacity": m.series("LaunchFailures", "Sum", period=five, reason=EXPECTED_LAUNCH_FAILURE),
                },
                label="launch failures (not capacity)",
                period=five,
            ),
            description=(
                f"{LAUNCH_FAILURES_THRESHOLD} or more launch failures other than insufficient capacity in 5 "
                "minutes (IAM, quota, subnet, launch template): they repeat until fixed. Check the "
                "provisioner logs for the CreateFleet error."
            ),
            threshold=LAUNCH_FAILURES_THRESHOLD,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        )
        window = LAUNCH_FAILURE_RATE_WINDOW
        self._alarm(
            "LaunchFailureRate",
            cloudwatch.MathExpression(
                expression=(
                    f"IF(FILL(failed, 0) + FILL(created, 0) >= {LAUNCH_FAILURE_RATE_MIN_ATTEMPTS}, "
                    "100 * FILL(failed, 0) / (FILL(failed, 0) + FILL(created, 0)), 0)"
                ),
                using_metrics={
                    "failed": m.series("LaunchFailures", "Sum", period=window),
                    "created": m.series("NodeClaimsCreated", "Sum", period=window),
                },
                label="failed launches (% of attempts)",
                period=window,
            ),
            description=(
                f"More than {LAUNCH_FAILURE_RATE_PERCENT}% of at least {LAUNCH_FAILURE_RATE_MIN_ATTEMPTS} launches "
                f"failed in {window.to_minutes():.0f} minutes (insufficient capacity included): pods wait while "
                "offering after offering fails. Widen the NodePools' instance types or zones, or check the "
                "provisioner logs for the CreateFleet errors."
            ),
            threshold=LAUNCH_FAILURE_RATE_PERCENT,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        )
        self._alarm(
            "WatcherNotRunning",
            m.series("WatcherRuns", "Sum", period=five).with_(label="watcher runs"),
            description=(
                "The watcher has not completed a run in 5 minutes: pending pods are not being seen. Check the "
                "watcher's logs (Kubernetes access entry, VPC reachability of the API endpoint)."
            ),
            threshold=1,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            # No data at all is the failure this alarm exists for.
            missing=cloudwatch.TreatMissingData.BREACHING,
        )
        self._alarm(
            "RegistrationTimeouts",
            m.series("Disruptions", "Sum", period=Duration.minutes(15), reason=REGISTRATION_TIMEOUT_REASON)
            .with_(label="registration timeouts"),
            description=(
                "A launched instance never joined the cluster and was terminated: its pods waited 15 minutes for "
                "nothing. Usually the node cannot reach or authenticate to the API server: check the node role's "
                "access entry, the AMI's bootstrap logs (EC2 console output), subnets and security groups."
            ),
        )
        self._alarm(
            "ConfigInvalid",
            m.series("ConfigInvalid", "Sum", period=five).with_(label="invalid config loads"),
            description=(
                "carpool cannot serve the cluster's config: Karpenter's CRDs are not installed (every function "
                "does nothing; install the karpenter-crd chart 1.14.1, see README's deploy section), the "
                "NodePools and EC2NodeClasses could not be listed on a cold start, or one does not validate "
                "(nothing is launched from it until it is fixed). The functions' error log says which; for an "
                "object, its ValidationSucceeded condition (`kubectl describe nodepool`) names the field: fix it "
                "(`carpool validate`) and `kubectl apply` it."
            ),
        )
        self._alarm(
            "ClusterFactsUnresolved",
            m.series("ClusterFactsUnresolved", "Sum", period=five).with_(label="unresolved cluster facts"),
            description=(
                "The cluster's Kubernetes version, service CIDR, DNS or IP family is unknown (DescribeCluster "
                "failed or was not allowed): no node is launched until it is known, rather than booting one with a "
                "guess. The functions' error log has DescribeCluster's error; allow eks:DescribeCluster or deploy "
                "with -c clusterVersion=... -c serviceCidr=... (and -c ipFamily=ipv6 for IPv6 clusters)."
            ),
        )
        self._alarm(
            "NodeClassNotReady",
            m.series("NodeClassNotReady", "Sum", period=five).with_(label="launches an EC2NodeClass refused"),
            description=(
                "An EC2NodeClass refused a launch (its role or instance profile, subnets, security groups, AMI or "
                "launch template): its NodePools launch nothing until it is fixed, and their pods wait or go to "
                "lower-weight pools. `carpool status` names the node class and the cause, the pods' "
                "FailedScheduling events say it too; fix the field it names and deploy the config again."
            ),
        )
        self._alarm(
            "ReplacementAboveCeiling",
            m.series("ReplacementAboveCeiling", "Sum", period=five).with_(label="replacements above their ceiling"),
            description=(
                "A consolidation replacement was launched at or above the price of the nodes it replaces and was "
                "terminated again. Replacements are priced before launch, so this is a bug: the disruption "
                "function's log has the decision."
            ),
        )
        window = DISRUPTION_ACTION_FAILURES_WINDOW
        self._alarm(
            "DisruptionActionFailures",
            m.series("DisruptionActionFailures", "Sum", period=window).with_(label="failed disruption actions"),
            description=(
                f"{DISRUPTION_ACTION_FAILURES_THRESHOLD} or more disruption actions failed in "
                f"{window.to_minutes():.0f} minutes; the others went on. Most often EC2 refused TerminateInstances "
                "(termination protection on the instance, or IAM / a service control policy denying it): the "
                "instance keeps running and costing, and is tried again every minute. The disruption function's "
                "error log names the instance and EC2's error; turn protection off or allow the call."
            ),
            threshold=DISRUPTION_ACTION_FAILURES_THRESHOLD,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        )
        self._alarm(
            "KarpenterControllerActive",
            m.series("KarpenterControllerActive", "Sum", period=five).with_(label="invocations that stood still"),
            description=(
                "A Karpenter controller holds its leader-election Lease (karpenter-leader-election): carpool "
                "launches, registers, drains and terminates nothing while it runs, since both would act on the "
                "same instances and pods. Scale it to zero to hand over (kubectl scale deployment karpenter "
                "--namespace kube-system --replicas 0). The functions' error log names the holder, or says that "
                "carpool may not read the Lease (apply infra/rbac.yaml again)."
            ),
        )
        self._alarm(
            "StaleInterruptions",
            m.series("InterruptionsStale", "Sum", period=five).with_(label="interruption events dropped as stale"),
            description=(
                "Interruption events for carpool's nodes arrived more than 5 minutes late and were dropped: their "
                "nodes went without a drain or a replacement. Check the interruption function's errors and "
                "throttles and its queue's age of oldest message."
            ),
        )

    def _dead_letter_alarms(self, dead_letter_queues: Mapping[str, sqs.IQueue]) -> None:
        for name, queue in dead_letter_queues.items():
            self._alarm(
                f"{name.title()}DlqNewMessages",
                new_messages(queue),
                description=(
                    f"New messages in the {name} dead-letter queue: events that failed 3 times (or could not be "
                    "delivered). Inspect them, fix the cause, then redrive them from the SQS console. The alarm "
                    f"returns to OK after {DLQ_ALARM_MINUTES} minutes without new ones and fires again on the next."
                ),
                threshold=0,
                comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                periods=DLQ_ALARM_MINUTES,
                datapoints=1,
            )

    def _function_alarms(self, functions: Mapping[str, lambda_.IFunction]) -> None:
        period = Duration.minutes(5)
        for name, function in functions.items():
            self._alarm(
                f"{name.title()}Errors",
                function.metric_errors(statistic="Sum", period=period),
                description=(
                    f"The {name} function failed (uncaught error or timeout) in two of the last three 5-minute "
                    "periods. Its logs name the error."
                ),
                periods=FUNCTION_PERIODS,
                datapoints=FUNCTION_DATAPOINTS,
            )
            self._alarm(
                f"{name.title()}Throttles",
                function.metric_throttles(statistic="Sum", period=period),
                description=(
                    f"The {name} function was throttled in two of the last three 5-minute periods: its reserved "
                    "concurrency or the account's Lambda concurrency is exhausted, and its events wait."
                ),
                periods=FUNCTION_PERIODS,
                datapoints=FUNCTION_DATAPOINTS,
            )

    def _pool_alarm(self) -> None:
        """One alarm for every limit of every pool: the highest share of a limit any pool uses."""
        self._alarm(
            "PoolNearLimit",
            self.metrics.series("NodePoolLimitUsed", "Maximum", period=Duration.minutes(5)).with_(
                label="highest share of a NodePool limit used (%)"),
            description=(
                f"A NodePool uses more than {POOL_USAGE_RATIO_THRESHOLD:.0%} of one of its spec.limits; new pods "
                "will stay pending once it is reached. The dashboard's \"NodePool usage\" table, or the watcher's "
                "NodePoolLimitUsed lines, name the pool and resource. Raise spec.limits or add a pool."
            ),
            threshold=100.0 * POOL_USAGE_RATIO_THRESHOLD,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        )

    def _alarm(
        self,
        construct_id: str,
        metric: cloudwatch.IMetric,
        *,
        description: str,
        threshold: float = 1,
        comparison: cloudwatch.ComparisonOperator = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
        periods: int = 1,
        datapoints: int = 1,
    ) -> cloudwatch.Alarm:
        """An alarm that notifies the topic on ALARM and OK; by default it fires on any occurrence (>= 1)."""
        alarm = cloudwatch.Alarm(
            self,
            construct_id,
            metric=metric,
            alarm_description=description,
            threshold=threshold,
            comparison_operator=comparison,
            evaluation_periods=periods,
            datapoints_to_alarm=datapoints,
            treat_missing_data=missing,
        )
        self.alarm_metrics[construct_id] = (
            len(metric.using_metrics) if isinstance(metric, cloudwatch.MathExpression) else 1
        )
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
        log_groups: Mapping[str, logs.ILogGroup],
    ) -> None:
        def graph(
            title: str,
            metrics: Sequence[cloudwatch.IMetric],
            width: int = 8,
            annotations: Sequence[cloudwatch.HorizontalAnnotation] = (),
        ) -> cloudwatch.GraphWidget:
            return cloudwatch.GraphWidget(
                title=title, left=list(metrics), width=width, height=6, left_annotations=list(annotations) or None
            )

        near = [cloudwatch.HorizontalAnnotation(value=100.0 * POOL_USAGE_RATIO_THRESHOLD, label="alarm")]

        lines = self.metrics.lines
        self.dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown=(
                    f"# carpool: {settings.cluster_name}\n"
                    "Pending pods -> watcher -> bus -> provisioner -> CreateFleet -> node registers. "
                    f"Metrics: namespace `Carpool` (EMF), dimension `cluster={settings.cluster_name}`. "
                    "Runbooks: see each alarm's description."
                ),
                width=24,
                height=2,
            )
        )
        def logged(title: str, names: Sequence[str], stats: str, *, table: bool = False) -> cloudwatch.LogQueryWidget:
            """A metric written as log lines (``observability.LOG_ONLY``, ``ALARMED_VALUES``) or with its breakdown in
            its EMF documents (``PROPERTIES``: they carry ``metric`` and ``value`` too), from the functions' logs."""
            picked = ", ".join(f'"{n}"' for n in names)
            query = (f'fields @timestamp | filter metric in [{picked}] and cluster = "{settings.cluster_name}" '
                     f"| stats {stats}")
            view = cloudwatch.LogQueryVisualizationType.TABLE if table else cloudwatch.LogQueryVisualizationType.LINE
            return cloudwatch.LogQueryWidget(title=title, log_group_names=groups, query_string=query, view=view,
                                             width=8, height=6)

        groups = [group.log_group_name for group in log_groups.values()]
        self.dashboard.add_widgets(
            graph("Oldest pending pod (s)", [lines("PodsUnboundSeconds", "Maximum")]),
            logged("Scheduling duration (s)", ["SchedulingDurationSeconds"],
                   "pct(value, 50) as p50, pct(value, 99) as p99 by bin(5m)"),
            graph("Node claims created", [lines("NodeClaimsCreated", "Sum", prefix="created")]),
        )
        def spread(name: str) -> list[cloudwatch.IMetric]:
            """p50, p99 and max of a duration over 5 minutes."""
            return [lines(name, stat, prefix=label, period=DURATION_PERIOD_SECONDS) for stat, label in DURATION_STATS]

        self.dashboard.add_widgets(
            graph("Pod pending -> CreateFleet (s)", spread("PodPendingToLaunchSeconds"), width=12),
            graph("Node created -> registered (s)", spread("NodeRegistrationSeconds"), width=12),
        )
        self.dashboard.add_widgets(
            graph("Launch failures (by reason) / answers lost", [
                lines("LaunchFailures", "Sum"),
                lines("LaunchOutcomesUnknown", "Sum", prefix="CreateFleet answer lost (repaired from EC2)")]),
            graph("Interruptions dropped as stale (by kind)", [lines("InterruptionsStale", "Sum", prefix="stale")]),
            graph("Highest share of a NodePool limit used (%)", [lines("NodePoolLimitUsed", "Maximum")],
                  annotations=near),
        )
        self.dashboard.add_widgets(
            logged("NodePool usage (by pool, resource; limits: millicores, bytes, counts)", ["NodePoolUsage"],
                   "latest(value) as used by nodepool, resource", table=True),
        )
        self.dashboard.add_widgets(
            logged("Interruptions received (by kind)", ["InterruptionsReceived"], "sum(value) as received by kind",
                   table=True),
            logged("Launched capacity, hourly price (USD, by pool)", ["EstimatedHourlyCost"],
                   "sum(value) as usdPerHour, count(*) as claims by nodepool", table=True),
            graph("Watcher runs", [lines("WatcherRuns", "Sum")]),
        )
        self.dashboard.add_widgets(
            logged("Capacity: learned vs estimated / catalog fallbacks",
                   ["CapacityCacheHits", "CapacityCacheDefaults", "CatalogFallbacks"], "sum(value) as count by metric",
                   table=True),
            graph("Instance-type catalog refresh failures", [lines("CatalogRefreshFailures", "Sum")]),
            logged("Pods served by (carpool vs other autoscalers) / pod events dropped",
                   ["PodsServedBy", "PodEventsDropped"], "sum(value) as pods by metric, server", table=True),
        )
        self.dashboard.add_widgets(
            graph("Registration timeouts", [lines("Disruptions", "Sum", prefix="terminated")]),
            logged("Disruptions and node claims created (by reason, pool)", ["Disruptions", "NodeClaimsCreated"],
                   "sum(value) as count by metric, reason, nodepool", table=True),
            graph(
                "Invalid config loads / unresolved cluster facts / node classes not ready / replacements above ceiling",
                [lines("ConfigInvalid", "Sum", prefix="invalid config"),
                 lines("ClusterFactsUnresolved", "Sum", prefix="unresolved cluster facts"),
                 lines("NodeClassNotReady", "Sum", prefix="node classes not ready"),
                 lines("KarpenterControllerActive", "Sum", prefix="stood still for Karpenter"),
                 lines("ReplacementAboveCeiling", "Sum")],
            ),
        )
        self.dashboard.add_widgets(
            graph("Failed disruption actions (by action)", [lines("DisruptionActionFailures", "Sum")], width=12),
            logged("Disruptions abandoned (by reason)", ["DisruptionsAbandoned"], "sum(value) as abandoned by reason",
                   table=True),
        )
        self.dashboard.add_widgets(
            logged("Pool usage reconciled from the claims (by nodepool)", ["UsageReconciled"],
                   "sum(value) as reconciled by nodepool", table=True),
            logged("NodeClaim writes failed (by step)", ["NodeClaimSyncFailures"], "sum(value) as failed by step",
                   table=True),
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
