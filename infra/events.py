"""EventBridge bus, rules, SQS work queues and dead-letter queues: how work reaches the functions.

Why a queue between every rule and its function: EventBridge invokes Lambda asynchronously, one event at
a time. A queue lets the provisioner take up to 1,000 pending pods in one batch after a 10 s window
(``carpool.delivery``; the same batching Karpenter does in memory), keeps events while a function is
failing or throttled, and gives per-message retries (``reportBatchItemFailures``) ending in a dead-letter
queue after 3 receives, so a poison event is parked with its body instead of blocking or vanishing.

Queues use SQS-managed encryption (SSE-SQS): EventBridge can deliver to it without a key policy, which
the AWS managed ``aws/sqs`` KMS key would not allow, and a customer managed key would add cost and a key
policy for data that is only pod and instance names. Every queue denies non-TLS access.

A queue's visibility timeout is six times its consumer's timeout plus the batching window, as AWS
recommends for SQS event sources, so a message is not redelivered while a slow batch is still running.

The interruption queue keeps a message only as long as its redrive needs (``redrive_retention``: three
receives, a visibility timeout apart, about 19 minutes), not SQS's default four days. An interruption
event is worth nothing five minutes on (the function drops older ones by the event's own time, with a
metric); after an outage a backlog of hour-old spot warnings must not be replayed. Karpenter's queue
keeps 300 s and has no DLQ; retention that short here would expire a message that fails before its
second receive (six minutes later) instead of parking it in the dead-letter queue, so a poison event
would vanish without the DLQ alarm ever seeing it. SQS counts retention from the original enqueue,
also in the DLQ, which keeps 14 days.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from carpool import delivery
from infra.settings import Settings

#: Events the watcher puts on the carpool bus (``carpool.api.events`` parses them).
CLUSTER_SOURCE = "carpool.cluster"
POD_UNSCHEDULABLE = "Pod Unschedulable"
NODE_REGISTERED = "Node Registered"
NODE_DELETED = "Node Deleted"
#: AWS events on the default bus that the interruption function handles (reference section 7).
SPOT_INTERRUPTION = "EC2 Spot Instance Interruption Warning"
REBALANCE_RECOMMENDATION = "EC2 Instance Rebalance Recommendation"
INSTANCE_STATE_CHANGE = "EC2 Instance State-change Notification"
HEALTH_EVENT = "AWS Health Event"
#: Only these states mean a node is going away; "pending"/"running" would be noise.
LEAVING_STATES = ["stopping", "stopped", "shutting-down", "terminated"]

MAX_RECEIVE_COUNT = 3
DLQ_RETENTION = Duration.days(14)
#: Time for the last receive to run and SQS to move the message on, after the last visibility timeout.
REDRIVE_MARGIN = Duration.minutes(1)


@dataclass(frozen=True)
class Consumer:
    """How a function reads its queue (the SQS event source mapping), from `carpool.delivery`."""

    batch_size: int
    max_batching_window: Duration
    max_concurrency: int | None = None

    @classmethod
    def of(cls, d: delivery.Delivery) -> Consumer:
        return cls(d.batch_size, Duration.seconds(d.max_batching_window_seconds), d.max_concurrency)


PROVISIONER = Consumer.of(delivery.PROVISIONER)
REGISTRAR = Consumer.of(delivery.REGISTRAR)
INTERRUPTION = Consumer.of(delivery.INTERRUPTION)


def visibility_timeout(function_timeout: Duration, consumer: Consumer) -> Duration:
    """Six times the function timeout plus the batching window (AWS guidance for SQS event sources;
    `carpool.delivery.visibility_timeout_seconds` is the same rule for the simulation)."""
    return Duration.seconds(6 * function_timeout.to_seconds() + consumer.max_batching_window.to_seconds())


def redrive_retention(visibility: Duration) -> Duration:
    """The shortest retention in which a message failing every receive still reaches its DLQ: SQS moves
    it on the receive after the last allowed one, ``MAX_RECEIVE_COUNT`` visibility timeouts after the
    first."""
    return Duration.seconds(MAX_RECEIVE_COUNT * visibility.to_seconds() + REDRIVE_MARGIN.to_seconds())


class WorkQueue(Construct):
    """An encrypted, TLS-only queue with its own dead-letter queue (3 receives, 14-day retention).

    ``short_lived``: keep messages only as long as their redrive needs (``redrive_retention``), for
    events that are worthless once old; otherwise SQS's default (4 days).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        consumer: Consumer,
        function_timeout: Duration,
        short_lived: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        self.consumer = consumer
        self.dlq = dead_letter_queue(self, "Dlq")
        visibility = visibility_timeout(function_timeout, consumer)
        self.queue = sqs.Queue(
            self,
            "Queue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            visibility_timeout=visibility,
            retention_period=redrive_retention(visibility) if short_lived else None,
            dead_letter_queue=sqs.DeadLetterQueue(max_receive_count=MAX_RECEIVE_COUNT, queue=self.dlq),
        )


def dead_letter_queue(scope: Construct, construct_id: str) -> sqs.Queue:
    """A DLQ keeps messages for the SQS maximum (14 days) so a long weekend does not lose evidence."""
    return sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=DLQ_RETENTION,
    )


class EventRouting(Construct):
    """The carpool bus, the work queues and every rule that feeds them.

    ``timeouts`` are the consumer functions' timeouts (provisioner, registrar, interruption), needed for
    the visibility timeouts before the functions exist.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, settings: Settings, timeouts: dict[str, Duration]
    ) -> None:
        super().__init__(scope, construct_id)
        # One bus per cluster: rules need no cluster filter and two clusters can never cross-talk.
        self.bus = events.EventBus(self, "Bus", event_bus_name=settings.bus_name)
        #: Events EventBridge could not deliver to a target, and failed scheduled invocations.
        self.delivery_dlq = dead_letter_queue(self, "DeliveryDlq")
        self.provisioner = WorkQueue(
            self, "Provisioner", consumer=PROVISIONER, function_timeout=timeouts["provisioner"]
        )
        self.registrar = WorkQueue(self, "Registrar", consumer=REGISTRAR, function_timeout=timeouts["registrar"])
        self.interruption = WorkQueue(
            self, "Interruption", consumer=INTERRUPTION, function_timeout=timeouts["interruption"], short_lived=True
        )

        self.pod_unschedulable = self._rule(
            "PodUnschedulable",
            "Pending pods the watcher saw -> provisioner queue",
            events.EventPattern(source=[CLUSTER_SOURCE], detail_type=[POD_UNSCHEDULABLE]),
            self.provisioner.queue,
            bus=self.bus,
        )
        self.node_lifecycle = self._rule(
            "NodeLifecycle",
            "Nodes joining or leaving -> registrar queue",
            events.EventPattern(source=[CLUSTER_SOURCE], detail_type=[NODE_REGISTERED, NODE_DELETED]),
            self.registrar.queue,
            bus=self.bus,
        )
        # AWS service events only arrive on the default bus; the function drops instances it does not own.
        self.spot_interruption = self._rule(
            "SpotInterruption",
            "Spot two-minute warnings and rebalance recommendations -> interruption queue",
            events.EventPattern(source=["aws.ec2"], detail_type=[SPOT_INTERRUPTION, REBALANCE_RECOMMENDATION]),
            self.interruption.queue,
        )
        self.instance_state_change = self._rule(
            "InstanceStateChange",
            "Instances stopping or terminating -> interruption queue",
            events.EventPattern(
                source=["aws.ec2"], detail_type=[INSTANCE_STATE_CHANGE], detail={"state": LEAVING_STATES}
            ),
            self.interruption.queue,
        )
        self.scheduled_change = self._rule(
            "ScheduledChange",
            "AWS Health scheduled EC2 maintenance -> interruption queue",
            events.EventPattern(
                source=["aws.health"],
                detail_type=[HEALTH_EVENT],
                detail={"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]},
            ),
            self.interruption.queue,
        )

    @property
    def work_queues(self) -> dict[str, WorkQueue]:
        return {"provisioner": self.provisioner, "registrar": self.registrar, "interruption": self.interruption}

    @property
    def dead_letter_queues(self) -> dict[str, sqs.IQueue]:
        """Every DLQ by a short name, for the "DLQ not empty" alarms."""
        return {**{name: q.dlq for name, q in self.work_queues.items()}, "delivery": self.delivery_dlq}

    def add_schedule(self, construct_id: str, function: lambda_.IFunction, *, period_seconds: int,
                     description: str) -> events.Rule:
        """Invoke ``function`` every ``period_seconds`` (``carpool.delivery.SCHEDULE_SECONDS``, which the
        simulation reads too) from the default bus (schedules only run there).

        A missed tick is not worth replaying once the next one is due, hence one minute of event age.
        """
        return events.Rule(
            self,
            construct_id,
            description=description,
            schedule=events.Schedule.rate(Duration.seconds(period_seconds)),
            targets=[
                targets.LambdaFunction(
                    function,
                    dead_letter_queue=self.delivery_dlq,
                    retry_attempts=2,
                    max_event_age=Duration.minutes(1),
                )
            ],
        )

    def _rule(
        self,
        construct_id: str,
        description: str,
        pattern: events.EventPattern,
        queue: sqs.IQueue,
        *,
        bus: events.IEventBus | None = None,
    ) -> events.Rule:
        return events.Rule(
            self,
            construct_id,
            description=description,
            event_bus=bus,
            event_pattern=pattern,
            targets=[targets.SqsQueue(queue, dead_letter_queue=self.delivery_dlq)],
        )
