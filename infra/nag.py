"""cdk-nag: both packs (AwsSolutions, ServerlessChecks) and every suppression with its reason.

Suppressions are attached to the exact resources they concern, and wildcard findings (IAM5) name the
exact wildcard through ``applies_to``, so a *new* wildcard or a new resource breaking a rule still
fails ``tests/infra/test_nag.py``. Nothing is suppressed stack-wide.

One gap is inherent to IAM5: its finding id is the wildcard, not the action, so the reviewed
``Resource::*`` (Describe, X-Ray, Pricing) would also hide a new write on ``*``.
``tests/infra/test_iam.py::test_no_mutating_action_on_star`` closes it by checking every action on ``*``.
"""

from __future__ import annotations

import re
from typing import Protocol

from aws_cdk import Aspects
from cdk_nag import AwsSolutionsChecks, NagPackSuppression, NagSuppressions, RegexAppliesTo, ServerlessChecks
from constructs import IConstruct

from infra.cluster import NODE_MANAGED_POLICIES, ClusterAccess
from infra.events import EventRouting
from infra.functions import (
    AMI_PARAMETER_PATHS,
    LAUNCH_INPUT_RESOURCES,
    LAUNCHED_RESOURCE_TYPES,
    PUBLIC_LAUNCH_INPUTS,
    QUEUE_CONSUMERS,
    SHARED_LAUNCH_INPUTS,
    SPECS,
    Capability,
    Functions,
)
from infra.monitoring import Monitoring
from infra.settings import Settings


class NaggedStack(Protocol):
    """What the suppressions need to know about the stack: its parts, not the stack class (which applies
    the suppressions, so naming it here would make the two modules import each other)."""

    @property
    def cluster(self) -> ClusterAccess: ...
    @property
    def routing(self) -> EventRouting: ...
    @property
    def functions(self) -> Functions: ...
    @property
    def monitoring(self) -> Monitoring: ...
    @property
    def settings(self) -> Settings: ...


def apply_nag(scope: IConstruct, *, verbose: bool = True) -> None:
    """Run both packs over ``scope`` at synth time (errors fail ``cdk synth``/``deploy``)."""
    Aspects.of(scope).add(AwsSolutionsChecks(verbose=verbose))
    Aspects.of(scope).add(ServerlessChecks(verbose=verbose))


def _s(rule: str, reason: str, applies_to: list[str | RegexAppliesTo] | None = None) -> NagPackSuppression:
    return NagPackSuppression(id=rule, reason=reason, applies_to=applies_to)


def _arn(service: str, account: str, resource: str) -> RegexAppliesTo:
    """A finding id for ``arn:<partition>:<service>:<region>:<account>:<resource>`` whatever the stack env.

    Region and partition are tokens in an environment-agnostic stack and literals otherwise; the
    resource part stays exact, so only the wildcard that was reviewed is suppressed.
    """
    account_pattern = {"": "", "*": r"\*", "own": r"(<AWS::AccountId>|\d{12})"}[account]
    escaped = resource.replace("/", r"\/").replace("*", r"\*").replace(".", r"\.")
    partition, region = r"(<AWS::Partition>|aws[a-z-]*)", r"(<AWS::Region>|[a-z0-9-]+)"
    return RegexAppliesTo(regex=f"/^Resource::arn:{partition}:{service}:{region}:{account_pattern}:{escaped}$/")


def _ec2(resource_type: str, account: str = "own") -> RegexAppliesTo:
    return _arn("ec2", account, f"{resource_type}/*")


#: The only unscoped EC2 ARNs allowed, per capability; anything else reaching IAM5 is a finding.
_WILDCARDS: dict[Capability, tuple[list[str | RegexAppliesTo], str]] = {
    Capability.LAUNCH: (
        [
            *[_ec2(t, "") for t in PUBLIC_LAUNCH_INPUTS],
            *[_ec2(t, "*") for t in SHARED_LAUNCH_INPUTS],
            *[_ec2(t) for t in LAUNCHED_RESOURCE_TYPES],
        ],
        "Launch ids are not known before the call. Inputs (" + ", ".join(LAUNCH_INPUT_RESOURCES) + ") "
        "are read, not changed; every created resource (" + ", ".join(LAUNCHED_RESOURCE_TYPES) + ") must "
        "carry the request tags kubernetes.io/cluster/<cluster>=owned and carpool.dev/cluster=<cluster>, "
        "own launch templates are selected by resource tag, and CreateTags is limited to those create calls "
        "(ec2:CreateAction). This is the pattern of Karpenter's controller policy.",
    ),
    Capability.DELETE_LAUNCH_TEMPLATES: (
        [_ec2("launch-template")],
        "Deletes only launch templates whose resource tags say carpool created them for this cluster "
        "(aws:ResourceTag conditions); their ids are generated at runtime.",
    ),
    Capability.TERMINATE: (
        [_ec2("instance")],
        "Terminates only instances whose resource tags say carpool launched them for this cluster "
        "(aws:ResourceTag conditions); instance ids are only known at runtime.",
    ),
    Capability.TAG_INSTANCES: (
        [_ec2("instance")],
        "Writes only the claim-name tag (aws:TagKeys), only on instances whose resource tags say carpool "
        "launched them for this cluster (aws:ResourceTag conditions); instance ids are only known at runtime.",
    ),
    Capability.AMI_LOOKUP: (
        [_arn("ssm", "", f"parameter{path}") for path in AMI_PARAMETER_PATHS],
        "Read-only access to AWS's public AMI parameters; the path depends on the Kubernetes version, "
        "architecture and variant chosen at runtime (reference section 4).",
    ),
}


_PROFILES_REASON = (
    "Instance profiles carpool makes for the node classes' roles (as Karpenter does) are named at runtime, "
    "under carpool's own path /carpool/<region>/<cluster>/ (read-only GetInstanceProfile also by the name "
    "<cluster>_*, how IAM names a profile not made yet); every change requires carpool's tags on the "
    "request (create, tag) or on the profile (add/remove role, delete), as Karpenter's controller policy does."
)


def _instance_profiles(cluster: str) -> list[str | RegexAppliesTo]:
    """The finding ids of carpool's instance profiles for ``cluster`` (``infra/functions.py``): its path,
    and its names without a path (how a profile not made yet is read)."""
    partition, region = r"(<AWS::Partition>|aws[a-z-]*)", r"(<AWS::Region>|[a-z0-9-]+)"
    account, name = r"(<AWS::AccountId>|\d{12})", re.escape(cluster)
    prefix = f"/^Resource::arn:{partition}:iam::{account}:instance-profile\\/"
    return [
        RegexAppliesTo(regex=f"{prefix}carpool\\/{region}\\/{name}\\/\\*$/"),
        RegexAppliesTo(regex=f"{prefix}{name}_\\*$/"),
    ]


_ROLE_PATTERNS_REASON = (
    "iam:PassRole (to EC2 only, iam:PassedToService) on the node roles the deployment names by pattern in "
    "-c nodeClassRoles, for the cluster's EC2NodeClasses' spec.role: the stack cannot read the node classes, "
    "which change without a deploy; Karpenter's controller policy is widened the same way."
)


def _role_patterns(settings: Settings) -> list[str | RegexAppliesTo]:
    """The finding ids of the ``-c nodeClassRoles`` entries holding a wildcard (``infra/nodeclasses.py``)."""
    partition, account = r"(<AWS::Partition>|aws[a-z-]*)", r"(<AWS::AccountId>|\d{12})"
    found: list[str | RegexAppliesTo] = []
    for role in settings.node_class_roles:
        if "*" not in role:
            continue
        if role.startswith("arn:"):
            found.append(f"Resource::{role}")
        else:
            name = re.escape(role).replace("/", "\\/")
            found.append(RegexAppliesTo(regex=f"/^Resource::arn:{partition}:iam::{account}:role\\/{name}$/"))
    return found


def add_suppressions(stack: NaggedStack) -> None:
    """Attach every justified suppression to the construct it concerns."""
    _node_role(stack)
    _queues(stack)
    _functions(stack)
    _alarm_topic(stack)


def _node_role(stack: NaggedStack) -> None:
    if not stack.cluster.node_role_created:
        return
    NagSuppressions.add_resource_suppressions(
        stack.cluster.node_role,
        [
            _s(
                "AwsSolutions-IAM4",
                "Nodes need exactly what an EKS managed node group's role has; AWS maintains these policies as "
                "the kubelet, VPC CNI, ECR pulls and SSM agent change.",
                [f"Policy::arn:<AWS::Partition>:iam::aws:policy/{name}" for name in NODE_MANAGED_POLICIES],
            )
        ],
        apply_to_children=True,
    )


def _queues(stack: NaggedStack) -> None:
    end_of_line = (
        "This is a dead-letter queue: the last stop for failed messages, alarmed on when not empty. "
        "Redriving it to yet another queue would only hide failures."
    )
    for work in stack.routing.work_queues.values():
        NagSuppressions.add_resource_suppressions(work.dlq, [_s("Serverless-SQSRedrivePolicy", end_of_line)])
    NagSuppressions.add_resource_suppressions(
        stack.routing.delivery_dlq,
        [
            _s(
                "AwsSolutions-SQS3",
                "This queue is itself a dead-letter queue, for EventBridge targets and failed asynchronous "
                "invocations (not an SQS redrive source, which is why the rule does not recognise it).",
            ),
            _s("Serverless-SQSRedrivePolicy", end_of_line),
        ],
    )


def _functions(stack: NaggedStack) -> None:
    functions = stack.functions
    runtime_reason = (
        "Pinned to python3.12 on purpose: the layer is built for cp312/aarch64 and the library is tested on "
        "3.11 and 3.12. Move runtime and layer target together, deliberately."
    )
    for name, function in functions.functions.items():
        dlq_reason = (
            "Invoked synchronously by an SQS event source mapping: a function DLQ only applies to asynchronous "
            "invocations. Failed messages go to the source queue's DLQ after 3 receives."
            if name in QUEUE_CONSUMERS
            else "Invoked asynchronously by a schedule; failures go to an on-failure destination (the delivery "
            "DLQ), which records the error as well as the event, unlike a function DLQ."
        )
        NagSuppressions.add_resource_suppressions(
            function,
            [
                _s("AwsSolutions-L1", runtime_reason),
                _s("Serverless-LambdaLatestVersion", runtime_reason),
                _s("Serverless-LambdaDLQ", dlq_reason),
            ],
        )
        if name in QUEUE_CONSUMERS:
            NagSuppressions.add_resource_suppressions(
                function,
                [
                    _s(
                        "Serverless-LambdaEventSourceMappingDestination",
                        "SQS event source mappings do not support on-failure destinations (streams and Kafka "
                        "only); the queue's redrive policy (maxReceiveCount 3) to its DLQ does that job.",
                    )
                ],
                apply_to_children=True,
            )
        _role(stack, name)


def _role(stack: NaggedStack, name: str) -> None:
    role = stack.functions.roles[name]
    suppressions = [
        _s(
            "AwsSolutions-IAM5",
            "The EC2 Describe actions carpool calls (each named, no wildcard) support no resource-level "
            "permissions and change nothing (limited to this region); X-Ray PutTraceSegments/"
            "PutTelemetryRecords and pricing:GetProducts have no resources to scope to.",
            ["Resource::*"],
        ),
        _s(
            "AwsSolutions-IAM5",
            "DynamoDB grant for the state table's gsi1 index (claims by status), generated by grantReadWriteData.",
            [RegexAppliesTo(regex=r"/^Resource::<State[0-9A-F]{8}\.Arn>\/index\/\*$/")],
        ),
    ]
    for capability in SPECS[name].capabilities:
        if capability in _WILDCARDS:
            applies_to, reason = _WILDCARDS[capability]
            suppressions.append(_s("AwsSolutions-IAM5", reason, list(applies_to)))
    profiles = {Capability.LAUNCH, Capability.DELETE_INSTANCE_PROFILES} & SPECS[name].capabilities
    if stack.functions.makes_profiles and profiles:
        suppressions.append(_s("AwsSolutions-IAM5", _PROFILES_REASON, _instance_profiles(stack.settings.cluster_name)))
    patterns = _role_patterns(stack.settings)
    if patterns and Capability.LAUNCH in SPECS[name].capabilities:
        suppressions.append(_s("AwsSolutions-IAM5", _ROLE_PATTERNS_REASON, patterns))
    if stack.settings.vpc_id:
        suppressions.append(
            _s(
                "AwsSolutions-IAM4",
                "Lambda manages the function's network interfaces with the execution role; AWS's "
                "AWSLambdaVPCAccessExecutionRole is the documented minimum and has no resource-scoped variant.",
                ["Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole"],
            )
        )
    NagSuppressions.add_resource_suppressions(role, suppressions, apply_to_children=True)


def _alarm_topic(stack: NaggedStack) -> None:
    topic = stack.monitoring.topic
    if topic is None or not stack.settings.alarm_email:
        return
    NagSuppressions.add_resource_suppressions(
        topic,
        [
            _s(
                "Serverless-SNSRedrivePolicy",
                "E-mail subscription for alarm notifications: an undeliverable e-mail has nothing to replay, and "
                "the alarm history stays in CloudWatch. SNS delivery to an SSE-SQS DLQ would also need a CMK.",
            )
        ],
        apply_to_children=True,
    )
