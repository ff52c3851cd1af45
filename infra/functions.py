"""The five Lambda functions, their layer, roles, log groups and triggers.

Each function has its own role so that a bug (or a compromise) in the watcher cannot launch instances and
the registrar cannot terminate them. Every role may describe the cluster (``eks:DescribeCluster``, on a
cold start without ``-c clusterEndpoint``); the NodePools and EC2NodeClasses are read from the cluster's
API (``infra/rbac.yaml``), not from AWS. Beyond that (the capabilities of each ``FunctionSpec``):

============  ==============================================================================
watcher       read the state table; put events on the carpool bus
provisioner   write the state table; launch (CreateFleet/RunInstances/CreateLaunchTemplate + CreateTags
              on create, PassRole of the node roles, carpool's instance profiles, EBS KMS grants);
              terminate own instances (a launch whose claim failed); AMIs
registrar     write the state table; look instances up (claims found by tag); tag own instances with
              their claim's name once their nodes register; AMIs (learned capacity is kept only for
              the expected AMI)
interruption  write the state table; launch replacements; terminate own instances; look instances up
              (a state change confirmed); AMIs; send to its own queue (a drain's next step, delayed)
disruption    write the state table; launch replacements (consolidation, drift); terminate own instances;
              delete own launch templates and instance profiles; look instances up (orphans); AMIs; the
              instance-type catalog and prices (it refreshes the catalog every function reads from the
              state table)
============  ==============================================================================

What a launch may pass and use follows the deployment's context keys, as Karpenter's controller policy
does (``infra/nodeclasses.py``): ``iam:PassRole`` only on the stack's node role, the roles of
``-c nodeClassRoles`` (names or patterns) and those of ``-c instanceProfileRoleArns``; the instance-profile
actions (get, create and tag with carpool's tags, add/remove a role, and for the disruption function list
and delete) only when ``nodeClassRoles`` names roles, only under carpool's path ``/carpool/<region>/<cluster>/``
and, for changes, only on profiles tagged as carpool's (Karpenter's controller policy, scoped the same
way); and KMS only on the keys named with ``-c ebsKmsKeyArns``: ``kms:CreateGrant`` only for grants EC2
makes for the launch (``kms:GrantIsForAWSResource``), the data-key actions only through EC2
(``kms:ViaService``), as the EBS encryption requirements list them.

Reads are as narrow as writes: the EC2 ``Describe`` actions a capability's code calls (not
``ec2:Describe*``), and per table the DynamoDB actions the state adapter issues (read-only for the
watcher). ``tests/infra/test_iam_requests.py`` evaluates these policies against every AWS request the
functions make in recorded simulations, and fails on a request they would deny or a grant no request
uses.

"Own" is enforced by tags, the same scheme Karpenter's controller policy uses: a launch must *request*
``kubernetes.io/cluster/<cluster>=owned`` and ``carpool.dev/cluster=<cluster>`` on every resource it
creates (instance, volume, network interface, fleet, launch template, spot request), tags may only be
written by those create calls, and terminate/delete require both tags on the *resource*. So no mutating
action is allowed on ``*``: the roles can only touch what carpool itself started. X-Ray's
``PutTraceSegments`` is the one write on ``*``, because X-Ray has no resource-level permissions.

Logs: an explicit log group per function (retention from ``-c logRetentionDays``, default 30) and a role
that may write only to it; the AWSLambdaBasicExecutionRole managed policy would allow every log group.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto
from pathlib import Path

from aws_cdk import Duration, RemovalPolicy, Stack, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from constructs import Construct

from carpool import amifamily, delivery, labels
from carpool.launch import profiles as node_profiles
from infra.cluster import ClusterAccess
from infra.events import EventRouting
from infra.layer import LAYER_DIR, REPO_ROOT
from infra.layer_asset import layer_code
from infra.nodeclasses import role_arn_patterns
from infra.settings import Settings
from infra.state import STATUS_INDEX, StateTables

FUNCTIONS_DIR = REPO_ROOT / "functions"
RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.ARM_64
HANDLER = "handler.handler"
SERVICE_NAME = "carpool"
METRICS_NAMESPACE = "Carpool"

#: Launch-created resource types that must carry the ownership tags.
LAUNCHED_RESOURCE_TYPES = (
    "fleet", "instance", "volume", "network-interface", "launch-template", "spot-instances-request",
)  # fmt: skip
#: Existing resources a launch reads but never changes, so there is no tag to check. Public AMIs and their
#: snapshots have no account in their ARN; subnets, security groups and capacity reservations may be
#: shared from another account (RAM), hence any account.
PUBLIC_LAUNCH_INPUTS = ("image", "snapshot")
SHARED_LAUNCH_INPUTS = ("subnet", "security-group", "capacity-reservation")
LAUNCH_INPUT_RESOURCES = PUBLIC_LAUNCH_INPUTS + SHARED_LAUNCH_INPUTS
#: Tags the registrar may set on a running instance; never the ownership tags.
#: State-table access by what a function does with it (``carpool.adapters.aws.dynamodb``); every
#: function also lists claims, nominations and usage with Query on the status index. DynamoDB authorizes a
#: transaction per item, as PutItem/UpdateItem/DeleteItem.
#: Nominations of given pods, by key.
NOMINATIONS_READ = ("dynamodb:BatchGetItem",)
#: Releasing a claim: read it, delete it and give its usage back in one transaction.
CLAIM_RELEASE = ("dynamodb:GetItem", "dynamodb:DeleteItem", "dynamodb:UpdateItem")
#: Provisioning: capacity and offering partitions (Query), nominations, reservations (Put/Update in
#: transactions), launched claims (PutItem), offerings marked unavailable (BatchWriteItem).
PROVISIONING = (
    *NOMINATIONS_READ, "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:BatchWriteItem",
)  # fmt: skip
#: Registration: the claim by name, marked registered (UpdateItem), learned capacity (GetItem, PutItem).
REGISTRATION = ("dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:PutItem")
#: Public SSM parameters holding EKS-optimized, Bottlerocket and Windows AMI ids (reference section 4): the
#: tree each alias family resolves under.
AMI_PARAMETER_PATHS = tuple(dict.fromkeys(f"{f.ssm_root}*" for f in amifamily.ALIAS_FAMILIES))


class VpcLookupError(ValueError):
    """``-c vpcId`` was given to an environment-agnostic stack (no account/region to look it up in)."""


class Capability(Enum):
    """A group of EC2-side permissions, granted per function (see the table in the module docstring)."""

    LAUNCH = auto()
    DELETE_LAUNCH_TEMPLATES = auto()
    TERMINATE = auto()
    AMI_LOOKUP = auto()
    #: Instance types, their offerings and spot prices from EC2, on-demand prices from the Pricing API: only
    #: the function that refreshes the stored catalog; the others read it from the state table (GetItem).
    CATALOG = auto()
    INSTANCE_LOOKUP = auto()
    #: CreateTags of the claim-name tag on the cluster's own instances, once their nodes register
    TAG_INSTANCES = auto()
    PUT_EVENTS = auto()
    #: list and delete the instance profiles carpool made (garbage collection, ``carpool.app.profiles``);
    #: granted only when ``-c nodeClassRoles`` names roles needing one
    DELETE_INSTANCE_PROFILES = auto()


#: The EC2 reads behind each capability (``carpool.adapters.aws.ec2``, ``.catalog``, ``.images``).
DESCRIBE_ACTIONS: dict[Capability, tuple[str, ...]] = {
    Capability.LAUNCH: ("ec2:DescribeSubnets", "ec2:DescribeSecurityGroups"),
    Capability.DELETE_LAUNCH_TEMPLATES: ("ec2:DescribeLaunchTemplates",),
    Capability.AMI_LOOKUP: ("ec2:DescribeImages",),
    Capability.CATALOG: (
        "ec2:DescribeInstanceTypes", "ec2:DescribeInstanceTypeOfferings", "ec2:DescribeSpotPriceHistory",
    ),
    Capability.INSTANCE_LOOKUP: ("ec2:DescribeInstances",),
}  # fmt: skip


@dataclass(frozen=True)
class FunctionSpec:
    """Sizing and permissions of one function; code lives in ``functions/<name>/handler.py``."""

    name: str
    description: str
    timeout: Duration
    memory_mib: int
    capabilities: frozenset[Capability]
    #: Writes to the Kubernetes API (cordon, evict, untaint, delete) rather than only reading it.
    kubernetes_write: bool
    #: Reserved concurrency (``None``: unreserved); skipped entirely with ``-c reservedConcurrency=false``.
    reserved_concurrency: int | None = None
    #: DynamoDB actions on the state table (see ``PROVISIONING`` and the others above).
    state_actions: tuple[str, ...] = ()


C = Capability
SPECS: dict[str, FunctionSpec] = {
    spec.name: spec
    for spec in (
        FunctionSpec(
            "watcher",
            "Lists/watches the cluster and puts Pod Unschedulable / Node events on the carpool bus",
            # A resync, then the watch until a little after the next run started (delivery.WATCH_SECONDS).
            timeout=Duration.seconds(delivery.TIMEOUT_SECONDS["watcher"]),
            memory_mib=delivery.MEMORY_MIB["watcher"],
            capabilities=frozenset({C.PUT_EVENTS}),
            # no table item reads: pods awaiting their node are found from the claims on the status index
            kubernetes_write=False,
            # Two: each run watches a few seconds past the next run's start, so two overlap (never
            # three: the timeout is shorter than two periods); a slow API must not stack runs up.
            reserved_concurrency=2,
        ),
        FunctionSpec(
            "provisioner",
            "Schedules pending pods onto new capacity and launches it with CreateFleet",
            timeout=Duration.seconds(delivery.TIMEOUT_SECONDS["provisioner"]),
            # The scheduler is CPU-bound; 2 GB buys more than one vCPU.
            memory_mib=delivery.MEMORY_MIB["provisioner"],
            capabilities=frozenset({C.LAUNCH, C.TERMINATE, C.AMI_LOOKUP}),
            state_actions=PROVISIONING + CLAIM_RELEASE,
            kubernetes_write=False,
        ),
        FunctionSpec(
            "registrar",
            "Marks claims registered when their node joins and learns real node capacity",
            timeout=Duration.seconds(delivery.TIMEOUT_SECONDS["registrar"]),
            memory_mib=delivery.MEMORY_MIB["registrar"],
            capabilities=frozenset({C.INSTANCE_LOOKUP, C.TAG_INSTANCES, C.AMI_LOOKUP}),
            state_actions=REGISTRATION + CLAIM_RELEASE,
            kubernetes_write=True,
        ),
        FunctionSpec(
            "interruption",
            "Handles spot interruptions, rebalance, health and state-change events: cordon, drain, replace",
            timeout=Duration.seconds(delivery.TIMEOUT_SECONDS["interruption"]),
            memory_mib=delivery.MEMORY_MIB["interruption"],
            # INSTANCE_LOOKUP: a state-change event is confirmed with DescribeInstances before it is acted on
            capabilities=frozenset({C.LAUNCH, C.TERMINATE, C.AMI_LOOKUP, C.INSTANCE_LOOKUP}),
            state_actions=PROVISIONING + CLAIM_RELEASE,
            kubernetes_write=True,
        ),
        FunctionSpec(
            "disruption",
            "Removes orphaned, expired, drifted, empty and underutilized nodes",
            # Shorter than the one-minute schedule, so runs never overlap (see reserved concurrency).
            timeout=Duration.seconds(delivery.TIMEOUT_SECONDS["disruption"]),
            memory_mib=delivery.MEMORY_MIB["disruption"],
            capabilities=frozenset(
                {C.LAUNCH, C.TERMINATE, C.DELETE_LAUNCH_TEMPLATES, C.DELETE_INSTANCE_PROFILES, C.INSTANCE_LOOKUP,
                 C.AMI_LOOKUP, C.CATALOG}
            ),
            state_actions=PROVISIONING + CLAIM_RELEASE,
            kubernetes_write=True,
            # One: two disruption passes deciding at once could both take the last node of a budget.
            reserved_concurrency=1,
        ),
    )
}
#: Functions fed by an SQS queue (the rest run on a schedule).
QUEUE_CONSUMERS = ("provisioner", "registrar", "interruption")
SCHEDULED = ("watcher", "disruption")

_RETENTION = {
    1: logs.RetentionDays.ONE_DAY, 3: logs.RetentionDays.THREE_DAYS, 5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK, 14: logs.RetentionDays.TWO_WEEKS, 30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS, 90: logs.RetentionDays.THREE_MONTHS, 120: logs.RetentionDays.FOUR_MONTHS,
    150: logs.RetentionDays.FIVE_MONTHS, 180: logs.RetentionDays.SIX_MONTHS, 365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS, 545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS, 1096: logs.RetentionDays.THREE_YEARS, 1827: logs.RetentionDays.FIVE_YEARS,
    2192: logs.RetentionDays.SIX_YEARS, 2557: logs.RetentionDays.SEVEN_YEARS, 2922: logs.RetentionDays.EIGHT_YEARS,
    3288: logs.RetentionDays.NINE_YEARS, 3653: logs.RetentionDays.TEN_YEARS,
}  # fmt: skip


def carpool_layer(scope: Construct, construct_id: str, layer_dir: Path = LAYER_DIR) -> lambda_.LayerVersion:
    """The layer, built from ``shared/carpool`` and the lock during synth (no Docker, no separate step).

    ``layer_dir`` is where built layers are cached (``layer-<digest>``); see ``infra/layer_asset.py``.
    """
    return lambda_.LayerVersion(
        scope,
        construct_id,
        code=layer_code(layer_dir),
        compatible_runtimes=[RUNTIME],
        compatible_architectures=[ARCHITECTURE],
        description="carpool library and its runtime dependencies (boto3 from the runtime)",
    )


class Functions(Construct):
    """All five functions with their roles, log groups, event sources and schedules."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        tables: StateTables,
        routing: EventRouting,
        cluster: ClusterAccess,
        layer_dir: Path = LAYER_DIR,
        functions_dir: Path = FUNCTIONS_DIR,
    ) -> None:
        super().__init__(scope, construct_id)
        self._settings = settings
        #: carpool makes instance profiles only for roles other than the stack's (``-c nodeClassRoles``)
        self.makes_profiles = bool(settings.node_class_roles)
        self._cluster = cluster
        self._routing = routing
        self._tables = tables
        self.layer = carpool_layer(self, "Layer", layer_dir)
        self.vpc, self.security_group = self._network(settings)
        self.environment = self._environment(settings, tables, routing, cluster)
        self.functions: dict[str, lambda_.Function] = {}
        self.roles: dict[str, iam.Role] = {}
        self.log_groups: dict[str, logs.LogGroup] = {}
        for spec in SPECS.values():
            role = self._role(spec)
            log_group = logs.LogGroup(
                self,
                f"{spec.name.title()}Logs",
                retention=_RETENTION[settings.log_retention_days],
                removal_policy=RemovalPolicy.DESTROY,
            )
            log_group.grant_write(role)
            function = lambda_.Function(
                self,
                spec.name.title(),
                description=spec.description,
                runtime=RUNTIME,
                architecture=ARCHITECTURE,
                handler=HANDLER,
                code=lambda_.Code.from_asset(
                    str(functions_dir / spec.name), exclude=["__pycache__", "*.pyc", "tests"]
                ),
                layers=[self.layer],
                role=role,
                timeout=spec.timeout,
                memory_size=spec.memory_mib,
                tracing=lambda_.Tracing.ACTIVE,
                environment=self.environment,
                log_group=log_group,
                reserved_concurrent_executions=spec.reserved_concurrency if settings.reserved_concurrency else None,
                vpc=self.vpc,
                vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS) if self.vpc else None,
                security_groups=[self.security_group] if self.security_group else None,
            )
            cluster.grant_kubernetes_access(spec.name, role, write=spec.kubernetes_write)
            self.functions[spec.name] = function
            self.roles[spec.name] = role
            self.log_groups[spec.name] = log_group

        for name in QUEUE_CONSUMERS:
            work = routing.work_queues[name]
            self.functions[name].add_event_source(
                sources.SqsEventSource(
                    work.queue,
                    batch_size=work.consumer.batch_size,
                    max_batching_window=work.consumer.max_batching_window,
                    report_batch_item_failures=True,
                    max_concurrency=work.consumer.max_concurrency,
                )
            )
        # A drain outlives one invocation: the interruption function sends the event back to its own
        # queue with a delay to take the next step (carpool.app.interrupt). SSE-SQS needs no key grant.
        self.roles["interruption"].add_to_policy(iam.PolicyStatement(
            sid="FollowUpDrain", actions=["sqs:SendMessage"],
            resources=[routing.work_queues["interruption"].queue.queue_arn]))
        self.schedules = {}
        for name in SCHEDULED:
            function = self.functions[name]
            # A failed tick is superseded by the next one: no retries, keep the failure for inspection.
            function.configure_async_invoke(
                retry_attempts=0,
                max_event_age=Duration.minutes(1),
                on_failure=destinations.SqsDestination(routing.delivery_dlq),
            )
            period = delivery.SCHEDULE_SECONDS[name]
            self.schedules[name] = routing.add_schedule(
                f"{name.title()}Schedule", function, period_seconds=period,
                description=f"Runs the carpool {name} every {period} s",
            )

    # --- pieces -----------------------------------------------------------------------------------

    def _network(self, settings: Settings) -> tuple[ec2.IVpc | None, ec2.SecurityGroup | None]:
        """With ``-c vpcId``, run in its private subnets so a private-only API endpoint is reachable."""
        if settings.vpc_id is None:
            return None, None
        stack = Stack.of(self)
        if Token.is_unresolved(stack.account) or Token.is_unresolved(stack.region):
            raise VpcLookupError(
                f"context vpcId={settings.vpc_id} needs the stack's account and region to look the VPC up: "
                "deploy with credentials through the cdk CLI (it sets CDK_DEFAULT_ACCOUNT/CDK_DEFAULT_REGION)"
            )
        vpc = ec2.Vpc.from_lookup(self, "Vpc", vpc_id=settings.vpc_id)
        group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description=f"carpool functions of EKS cluster {settings.cluster_name}",
            allow_all_outbound=False,
        )
        # Everything carpool talks to (Kubernetes API, AWS APIs via NAT or endpoints) is HTTPS.
        group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "Kubernetes API and AWS APIs over HTTPS")
        if settings.cluster_security_group_id:
            ec2.CfnSecurityGroupIngress(
                self,
                "ClusterApiIngress",
                group_id=settings.cluster_security_group_id,
                ip_protocol="tcp",
                from_port=443,
                to_port=443,
                source_security_group_id=group.security_group_id,
                description="carpool functions to the Kubernetes API server",
            )
        return vpc, group

    @staticmethod
    def _environment(
        settings: Settings,
        tables: StateTables,
        routing: EventRouting,
        cluster: ClusterAccess,
    ) -> dict[str, str]:
        """The variables ``carpool.app.settings`` reads; identical for every function on purpose."""
        environment = {
            "CARPOOL_CLUSTER_NAME": settings.cluster_name,
            "CARPOOL_TABLE": tables.state.table_name,
            "CARPOOL_IDEMPOTENCY_TABLE": tables.idempotency.table_name,
            "CARPOOL_EVENT_BUS": routing.bus.event_bus_name,
            "CARPOOL_NODE_ROLE_ARN": cluster.node_role.role_arn,
            "CARPOOL_INSTANCE_PROFILE": cluster.instance_profile.instance_profile_name,
            # where Karpenter's leader-election Lease is read (`carpool.app.standstill`)
            "CARPOOL_KARPENTER_NAMESPACE": settings.karpenter_namespace,
            "POWERTOOLS_SERVICE_NAME": SERVICE_NAME,
            "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
            "LOG_LEVEL": settings.log_level,
        }
        if settings.cluster_endpoint:
            environment["CARPOOL_CLUSTER_ENDPOINT"] = settings.cluster_endpoint
        if settings.cluster_ca:
            environment["CARPOOL_CLUSTER_CA"] = settings.cluster_ca
        # cluster facts given as context keys; the functions ask DescribeCluster for the others
        facts = {
            "CARPOOL_CLUSTER_VERSION": settings.cluster_version,
            "CARPOOL_CLUSTER_CIDR": settings.service_cidr,
            "CARPOOL_CLUSTER_DNS": settings.cluster_dns,
            "CARPOOL_CLUSTER_IP_FAMILY": settings.ip_family,
        }
        environment.update({name: value for name, value in facts.items() if value})
        return environment

    def _role(self, spec: FunctionSpec) -> iam.Role:
        role = iam.Role(
            self,
            f"{spec.name.title()}Role",
            description=f"carpool {spec.name} of EKS cluster {self._settings.cluster_name}",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        )
        if self._settings.vpc_id:
            # Lambda creates the function's ENIs with the execution role; no resource-scoped equivalent.
            role.add_managed_policy(
                iam.ManagedPolicy.from_aws_managed_policy_name("service-role/AWSLambdaVPCAccessExecutionRole")
            )
        for statement in self._common_statements(spec):
            role.add_to_policy(statement)
        for capability in sorted(spec.capabilities, key=lambda c: c.value):
            for statement in self._capability_statements(capability):
                role.add_to_policy(statement)
            if capability is Capability.PUT_EVENTS:
                self._routing.bus.grant_put_events_to(role)
        return role

    def _common_statements(self, spec: FunctionSpec) -> list[iam.PolicyStatement]:
        stack = Stack.of(self)
        table = self._tables.state.table_arn
        statements = [
            iam.PolicyStatement(
                sid="DescribeCluster",
                actions=["eks:DescribeCluster"],
                resources=[self._cluster.cluster_arn],
            ),
            iam.PolicyStatement(
                sid="QueryClaimsByStatus", actions=["dynamodb:Query"], resources=[f"{table}/index/{STATUS_INDEX}"]
            ),
        ]
        if spec.state_actions:
            statements.append(iam.PolicyStatement(sid="State", actions=sorted(set(spec.state_actions)), resources=[table]))
        describe = sorted({a for c in spec.capabilities for a in DESCRIBE_ACTIONS.get(c, ())})
        if describe:
            statements.append(
                iam.PolicyStatement(
                    sid="ReadEc2",
                    # Describe calls support no resource-level permissions; they change nothing.
                    actions=describe,
                    resources=["*"],
                    conditions={"StringEquals": {"aws:RequestedRegion": stack.region}},
                )
            )
        return statements

    def _capability_statements(self, capability: Capability) -> list[iam.PolicyStatement]:
        stack = Stack.of(self)
        cluster = self._settings.cluster_name
        owned_tag = labels.TAG_CLUSTER_OWNED.format(cluster=cluster)
        request_tags = {
            f"aws:RequestTag/{owned_tag}": "owned",
            f"aws:RequestTag/{labels.TAG_MANAGED_BY}": cluster,
        }
        resource_tags = {
            f"aws:ResourceTag/{owned_tag}": "owned",
            f"aws:ResourceTag/{labels.TAG_MANAGED_BY}": cluster,
        }

        def ec2_arns(*types: str, account: str = "*") -> list[str]:
            return [f"arn:{stack.partition}:ec2:{stack.region}:{account}:{t}/*" for t in types]

        if capability is Capability.LAUNCH:
            inputs = [
                *[f"arn:{stack.partition}:ec2:{stack.region}::{t}/*" for t in PUBLIC_LAUNCH_INPUTS],
                *ec2_arns(*SHARED_LAUNCH_INPUTS),
            ]
            return [
                iam.PolicyStatement(
                    sid="LaunchFromExistingInputs",
                    actions=["ec2:RunInstances", "ec2:CreateFleet"],
                    resources=inputs,
                ),
                iam.PolicyStatement(
                    sid="LaunchFromOwnLaunchTemplates",
                    actions=["ec2:RunInstances", "ec2:CreateFleet"],
                    resources=ec2_arns("launch-template", account=stack.account),
                    conditions={"StringEquals": {f"aws:ResourceTag/{labels.TAG_MANAGED_BY}": cluster}},
                ),
                iam.PolicyStatement(
                    sid="LaunchOnlyTaggedResources",
                    actions=["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
                    resources=ec2_arns(*LAUNCHED_RESOURCE_TYPES, account=stack.account),
                    conditions={"StringEquals": request_tags},
                ),
                iam.PolicyStatement(
                    sid="TagOnlyOnCreate",
                    actions=["ec2:CreateTags"],
                    resources=ec2_arns(*LAUNCHED_RESOURCE_TYPES, account=stack.account),
                    conditions={
                        "StringEquals": {
                            **request_tags,
                            "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
                        }
                    },
                ),
                iam.PolicyStatement(
                    sid="PassNodeRoles",
                    actions=["iam:PassRole"],
                    resources=self._passed_roles(),
                    conditions={"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
                ),
                *self._instance_profile_statements(),
                *self._ebs_kms_statements(),
            ]
        if capability is Capability.TAG_INSTANCES:
            return [
                iam.PolicyStatement(
                    # an instance gets its own claim's name once its node registers (at launch a batched
                    # CreateFleet tags every instance with the claims of its request, `carpool.dev/fleet-claims`):
                    # only the cluster's own instances, only the claim-name tag
                    sid="TagOwnInstancesWithTheirClaim",
                    actions=["ec2:CreateTags"],
                    resources=ec2_arns("instance", account=stack.account),
                    conditions={
                        "StringEquals": resource_tags,
                        "ForAllValues:StringEquals": {"aws:TagKeys": [labels.TAG_NODECLAIM]},
                    },
                )
            ]
        if capability is Capability.DELETE_LAUNCH_TEMPLATES:
            return [
                iam.PolicyStatement(
                    sid="DeleteOwnLaunchTemplates",
                    actions=["ec2:DeleteLaunchTemplate"],
                    resources=ec2_arns("launch-template", account=stack.account),
                    conditions={"StringEquals": resource_tags},
                )
            ]
        if capability is Capability.DELETE_INSTANCE_PROFILES:
            if not self.makes_profiles:
                return []
            return [
                iam.PolicyStatement(
                    sid="ListOwnInstanceProfiles",
                    actions=["iam:ListInstanceProfiles"],
                    resources=[self._profile_arns()],
                ),
                iam.PolicyStatement(
                    sid="DeleteOwnInstanceProfiles",
                    actions=["iam:DeleteInstanceProfile"],
                    resources=[self._profile_arns()],
                    conditions=self._profile_conditions("aws:ResourceTag"),
                ),
            ]
        if capability is Capability.TERMINATE:
            return [
                iam.PolicyStatement(
                    sid="TerminateOwnInstances",
                    actions=["ec2:TerminateInstances"],
                    resources=ec2_arns("instance", account=stack.account),
                    conditions={"StringEquals": resource_tags},
                )
            ]
        if capability is Capability.AMI_LOOKUP:
            return [
                iam.PolicyStatement(
                    sid="ReadAmiParameters",
                    # AMI parameters are read with GetParameters (an alias's several in one request)
                    actions=["ssm:GetParameters"],
                    resources=[
                        f"arn:{stack.partition}:ssm:{stack.region}::parameter{path}" for path in AMI_PARAMETER_PATHS
                    ],
                )
            ]
        if capability is Capability.CATALOG:
            return [
                iam.PolicyStatement(
                    sid="ReadPrices",
                    # The Pricing API has no resources to scope to; it is read-only.
                    actions=["pricing:GetProducts"],
                    resources=["*"],
                )
            ]
        return []  # PUT_EVENTS is granted with the bus's own grant method

    # --- what the cluster's node classes may ask for (infra/nodeclasses.py) ----------------------------

    def _passed_roles(self) -> list[str]:
        """The stack's node role, the roles of ``-c nodeClassRoles`` and those of ``-c instanceProfileRoleArns``."""
        stack = Stack.of(self)
        named = role_arn_patterns(self._settings, stack.partition, stack.account)
        return list(dict.fromkeys([self._cluster.node_role.role_arn, *named,
                                   *self._settings.instance_profile_role_arns]))

    def _profile_arns(self) -> str:
        """Every instance profile under carpool's path for this cluster (``carpool.launch.profiles``)."""
        stack = Stack.of(self)
        path = node_profiles.profile_path(self._settings.cluster_name, stack.region)
        return f"arn:{stack.partition}:iam::{stack.account}:instance-profile{path}*"

    def _profile_names(self) -> str:
        """carpool's profile names without their path (how IAM names a profile not made yet)."""
        stack = Stack.of(self)
        return f"arn:{stack.partition}:iam::{stack.account}:instance-profile/{self._settings.cluster_name}_*"

    def _profile_conditions(self, prefix: str) -> dict[str, dict[str, str]]:
        """The tags carpool puts on its profiles, as request or resource tags (Karpenter's, plus carpool's)."""
        cluster, region = self._settings.cluster_name, Stack.of(self).region
        return {
            "StringEquals": {
                f"{prefix}/{labels.TAG_CLUSTER_OWNED.format(cluster=cluster)}": "owned",
                f"{prefix}/{labels.TAG_MANAGED_BY}": cluster,
                f"{prefix}/{labels.REGION}": region,
            },
            "StringLike": {f"{prefix}/{labels.TAG_NODECLASS}": "*"},
        }

    def _instance_profile_statements(self) -> list[iam.PolicyStatement]:
        """Get, create and tag (with carpool's tags), and set the role of carpool's own profiles; nothing
        when the deployment names no role other than the stack's (the stack made that one's profile)."""
        if not self.makes_profiles:
            return []
        created = self._profile_conditions("aws:RequestTag")
        created["StringEquals"]["aws:RequestTag/eks:eks-cluster-name"] = self._settings.cluster_name
        return [
            # A profile not made yet is looked up by name alone, so IAM sees no path in its ARN: both forms
            # of carpool's names (`<cluster>_<hash>`, `carpool.launch.profiles`) may be read.
            iam.PolicyStatement(sid="ReadOwnInstanceProfiles", actions=["iam:GetInstanceProfile"],
                                resources=[self._profile_arns(), self._profile_names()]),
            iam.PolicyStatement(sid="CreateOwnInstanceProfiles",
                                actions=["iam:CreateInstanceProfile", "iam:TagInstanceProfile"],
                                resources=[self._profile_arns()], conditions=created),
            iam.PolicyStatement(sid="SetRoleOfOwnInstanceProfiles",
                                actions=["iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile"],
                                resources=[self._profile_arns()],
                                conditions=self._profile_conditions("aws:ResourceTag")),
        ]

    def _ebs_kms_statements(self) -> list[iam.PolicyStatement]:
        """EBS volumes encrypted with the keys of ``-c ebsKmsKeyArns`` (the EBS encryption requirements):
        EC2 creates a grant for the launch, and uses the key's data keys on carpool's behalf."""
        keys = list(self._settings.ebs_kms_key_arns)
        if not keys:
            return []
        return [
            iam.PolicyStatement(sid="GrantEbsKmsKeysToEc2", actions=["kms:CreateGrant"], resources=keys,
                                conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}}),
            iam.PolicyStatement(
                sid="UseEbsKmsKeysThroughEc2",
                actions=["kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKeyWithoutPlaintext",
                         "kms:ReEncryptFrom", "kms:ReEncryptTo"],
                resources=keys,
                conditions={"StringEquals": {"kms:ViaService": f"ec2.{Stack.of(self).region}.amazonaws.com"}},
            ),
        ]
