"""The five functions: runtime, architecture, handler, environment, tracing, layer, logs, triggers."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match
from cdk_support import CLUSTER_SG, Synth, flatten
from infra.events import INTERRUPTION, PROVISIONER, REGISTRAR
from infra.functions import SPECS

from carpool import delivery

NAMES = ("watcher", "provisioner", "registrar", "interruption", "disruption")


def function_props(synth: Synth, name: str) -> dict:
    function = synth.stack.functions.functions[name]
    return synth.resources("AWS::Lambda::Function")[synth.logical_id(function)]["Properties"]


def test_exactly_the_five_functions(default: Synth) -> None:
    assert set(SPECS) == set(NAMES)
    default.template.resource_count_is("AWS::Lambda::Function", 5)


@pytest.mark.parametrize("name", NAMES)
def test_function_runtime_architecture_handler_tracing(default: Synth, name: str) -> None:
    props = function_props(default, name)
    assert props["Runtime"] == "python3.12"
    assert props["Architectures"] == ["arm64"]
    assert props["Handler"] == "handler.handler"
    assert props["TracingConfig"] == {"Mode": "Active"}
    assert props["Timeout"] == SPECS[name].timeout.to_seconds()
    assert props["MemorySize"] == SPECS[name].memory_mib
    assert props["Layers"] == [{"Ref": default.logical_id(default.stack.functions.layer)}]


@pytest.mark.parametrize("name", NAMES)
def test_function_environment(default: Synth, name: str) -> None:
    variables = flatten(function_props(default, name)["Environment"]["Variables"])
    stack = default.stack
    assert variables == {
        "CARPOOL_CLUSTER_NAME": "demo",
        "CARPOOL_TABLE": "${" + default.logical_id(stack.tables.state) + "}",
        "CARPOOL_IDEMPOTENCY_TABLE": "${" + default.logical_id(stack.tables.idempotency) + "}",
        "CARPOOL_EVENT_BUS": "${" + default.logical_id(stack.routing.bus) + "}",
        "CARPOOL_NODE_ROLE_ARN": "${" + default.logical_id(stack.cluster.node_role) + ".Arn}",
        "CARPOOL_INSTANCE_PROFILE": "${" + default.logical_id(stack.cluster.instance_profile) + "}",
        "CARPOOL_KARPENTER_NAMESPACE": "kube-system",
        "POWERTOOLS_SERVICE_NAME": "carpool",
        "POWERTOOLS_METRICS_NAMESPACE": "Carpool",
        "LOG_LEVEL": "INFO",
    }


def test_karpenters_namespace_is_a_context_key_every_function_and_the_rbac_command_follow(rbac: Synth) -> None:
    """`-c karpenterNamespace`: where each function reads Karpenter's Lease, and where the printed command
    applies and binds `infra/rbac.yaml`'s Lease Role."""
    for name in NAMES:
        variables = flatten(function_props(rbac, name)["Environment"]["Variables"])
        assert variables["CARPOOL_KARPENTER_NAMESPACE"] == "karpenter"
    setup = rbac.template.to_json()["Outputs"]["KubernetesAccessSetup"]["Value"]
    assert setup.startswith("kubectl apply -f infra/rbac.yaml --namespace karpenter && ")
    assert setup.endswith("kubectl create rolebinding carpool-karpenter-lease --namespace karpenter "
                          "--role=carpool-karpenter-lease --group=carpool-controller")


def test_bus_name_resolves_to_what_the_contract_says(default: Synth) -> None:
    default.template.has_resource_properties("AWS::Events::EventBus", {"Name": "carpool-demo"})


def test_optional_endpoint_and_ca_reach_the_environment_only_when_given(full: Synth, default: Synth) -> None:
    variables = flatten(function_props(full, "watcher")["Environment"]["Variables"])
    assert variables["CARPOOL_CLUSTER_ENDPOINT"] == "https://ABCDEF.gr7.eu-west-1.eks.amazonaws.com"
    assert variables["CARPOOL_CLUSTER_CA"] == "LS0tLS1CRUdJTi=="
    assert variables["LOG_LEVEL"] == "DEBUG"
    assert variables["CARPOOL_NODE_ROLE_ARN"] == "arn:aws:iam::123456789012:role/KarpenterNodeRole-prod"
    assert "CARPOOL_CLUSTER_ENDPOINT" not in function_props(default, "watcher")["Environment"]["Variables"]


def test_layer_is_arm64_python312(default: Synth) -> None:
    default.template.has_resource_properties(
        "AWS::Lambda::LayerVersion",
        {"CompatibleRuntimes": ["python3.12"], "CompatibleArchitectures": ["arm64"]},
    )


@pytest.mark.parametrize("name", NAMES)
def test_each_function_logs_to_its_own_group_with_retention(default: Synth, full: Synth, name: str) -> None:
    for synth, days in ((default, 30), (full, 90)):
        log_group = synth.stack.functions.log_groups[name]
        logical = synth.logical_id(log_group)
        assert synth.resources("AWS::Logs::LogGroup")[logical]["Properties"]["RetentionInDays"] == days
        assert function_props(synth, name)["LoggingConfig"] == {"LogGroup": {"Ref": logical}}


def test_each_function_has_its_own_role(default: Synth) -> None:
    roles = {flatten(function_props(default, name)["Role"]) for name in NAMES}
    assert len(roles) == 5


def test_reserved_concurrency_only_for_scheduled_functions_and_can_be_turned_off(default: Synth, rbac: Synth) -> None:
    assert function_props(default, "watcher")["ReservedConcurrentExecutions"] == 2
    assert function_props(default, "disruption")["ReservedConcurrentExecutions"] == 1
    for name in ("provisioner", "registrar", "interruption"):
        assert "ReservedConcurrentExecutions" not in function_props(default, name)
    for name in NAMES:
        assert "ReservedConcurrentExecutions" not in function_props(rbac, name)


def test_scheduled_runs_end_before_the_next_tick(default: Synth) -> None:
    # A watcher run overlaps the next one by a few seconds (its watch covers the next run's resync), never
    # the one after; a disruption pass never overlaps the next run.
    assert 60 < delivery.WATCH_SECONDS < function_props(default, "watcher")["Timeout"] < 120
    assert function_props(default, "disruption")["Timeout"] < 60


@pytest.mark.parametrize(
    ("name", "consumer", "queue_attr"),
    [("provisioner", PROVISIONER, "provisioner"), ("registrar", REGISTRAR, "registrar"),
     ("interruption", INTERRUPTION, "interruption")],
)  # fmt: skip
def test_queue_consumers_read_their_queue_in_batches(default: Synth, name: str, consumer, queue_attr: str) -> None:
    queue = getattr(default.stack.routing, queue_attr).queue
    function = default.stack.functions.functions[name]
    expected = {
        "FunctionName": {"Ref": default.logical_id(function)},
        "EventSourceArn": {"Fn::GetAtt": [default.logical_id(queue), "Arn"]},
        "BatchSize": consumer.batch_size,
        "FunctionResponseTypes": ["ReportBatchItemFailures"],
    }
    if consumer.max_batching_window.to_seconds():
        expected["MaximumBatchingWindowInSeconds"] = consumer.max_batching_window.to_seconds()
    if consumer.max_concurrency:
        expected["ScalingConfig"] = {"MaximumConcurrency": consumer.max_concurrency}
    default.template.has_resource_properties("AWS::Lambda::EventSourceMapping", expected)


def test_provisioner_batches_like_karpenter(default: Synth) -> None:
    default.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        # the watcher batches like Karpenter (1 s idle, 10 s at most); the queue only gathers a micro-batch,
        # and a batch of more than 10 needs a window of at least 1 s
        {"BatchSize": 1000, "MaximumBatchingWindowInSeconds": 1, "FunctionResponseTypes": ["ReportBatchItemFailures"]},
    )
    default.template.resource_count_is("AWS::Lambda::EventSourceMapping", 3)


@pytest.mark.parametrize("name", ["watcher", "disruption"])
def test_scheduled_functions_send_failures_to_the_delivery_dlq(default: Synth, name: str) -> None:
    function = default.stack.functions.functions[name]
    dlq = default.logical_id(default.stack.routing.delivery_dlq)
    default.template.has_resource_properties(
        "AWS::Lambda::EventInvokeConfig",
        {
            "FunctionName": {"Ref": default.logical_id(function)},
            "MaximumRetryAttempts": 0,
            "MaximumEventAgeInSeconds": 60,
            "DestinationConfig": {"OnFailure": {"Destination": {"Fn::GetAtt": [dlq, "Arn"]}}},
        },
    )


def test_functions_run_in_the_vpc_when_asked(full: Synth, default: Synth) -> None:
    for name in NAMES:
        config = function_props(full, name)["VpcConfig"]
        assert config["SubnetIds"] == ["subnet-0123456789abcdef0", "subnet-0223456789abcdef0"]
        assert len(config["SecurityGroupIds"]) == 1
        assert "VpcConfig" not in function_props(default, name)
    full.template.has_resource_properties(
        "AWS::EC2::SecurityGroup",
        {
            "VpcId": "vpc-0123456789abcdef0",
            "SecurityGroupEgress": [Match.object_like({"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443})],
        },
    )
    full.template.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {"GroupId": CLUSTER_SG, "IpProtocol": "tcp", "FromPort": 443, "ToPort": 443},
    )
    default.template.resource_count_is("AWS::EC2::SecurityGroup", 0)
