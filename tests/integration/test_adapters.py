"""boto3 adapters against moto on 127.0.0.1: EC2 compute, AMI source, events, config, catalog, pricing, CLI."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import typer
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from carpool_env import CLUSTER, clear_ec2
from typer.testing import CliRunner

from carpool import labels
from carpool.adapters.aws.catalog import Ec2Catalog, fetch_catalog_inputs, latest_spot_prices
from carpool.adapters.aws.dynamodb.learned_capacity import DynamoCapacityCache
from carpool.adapters.aws.ec2 import Ec2Compute
from carpool.adapters.aws.events import EventBridgePublisher
from carpool.adapters.aws.images import AwsAmiSource
from carpool.adapters.aws.pricing import OnDemandPrices
from carpool.adapters.aws.ssm import SsmParameters
from carpool.capacity import TTL
from carpool.ports import LaunchTemplateMissing
from carpool.sim.localaws.server import EventPath, LocalAws, Network, StateTables
from carpool.state.models import CapacityRecord

AL2023_X86 = "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id"
AL2023_ARM = "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/arm64/standard/recommended/image_id"


# -- helpers ---------------------------------------------------------------------------------------------
def fail_with(code: str, times: int) -> tuple[Callable[..., Any], list[int]]:
    """A `before-call` hook answering in EC2's place with error `code` the first `times` calls."""
    calls = [0]

    def hook(**_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        calls[0] += 1
        if calls[0] > times:
            return None
        parsed = {
            "Error": {"Code": code, "Message": f"{code} (injected)"},
            "ResponseMetadata": {"HTTPStatusCode": 400, "HTTPHeaders": {}},
        }
        return AWSResponse("https://ec2.local", 400, {}, None), parsed

    return hook, calls


def count_calls(client: Any, event: str) -> list[int]:
    calls = [0]

    def hook(**_: Any) -> None:
        calls[0] += 1

    client.meta.events.register(event, hook)
    return calls


def launch_template_request(name: str, cluster: str, image_id: str, network: Network) -> dict[str, Any]:
    return {
        "LaunchTemplateName": name,
        "LaunchTemplateData": {
            "ImageId": image_id,
            "SecurityGroupIds": [network.security_group_id],
            "MetadataOptions": {"HttpTokens": "required", "HttpPutResponseHopLimit": 2},
        },
        "TagSpecifications": [
            {"ResourceType": "launch-template", "Tags": [{"Key": labels.TAG_MANAGED_BY, "Value": cluster}]}
        ],
    }


def fleet_request(template: str, network: Network, claim: str) -> dict[str, Any]:
    return {
        "Type": "instant",
        "TargetCapacitySpecification": {"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "on-demand"},
        "OnDemandOptions": {"AllocationStrategy": "lowest-price"},
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": template, "Version": "$Latest"},
                "Overrides": [
                    {"InstanceType": t, "SubnetId": s}
                    for t in ("m5.large", "c5.large")
                    for s in network.subnet_ids
                ],
            }
        ],
        "TagSpecifications": [
            {
                "ResourceType": "instance",
                "Tags": [
                    {"Key": labels.TAG_MANAGED_BY, "Value": CLUSTER},
                    {"Key": labels.TAG_NODECLAIM, "Value": claim},
                ],
            }
        ],
    }


@pytest.fixture(scope="module")
def images(local_aws: LocalAws) -> list[str]:
    return local_aws.seed_amis(
        [
            {
                "name": "amazon-eks-node-al2023-x86_64-standard-1.32-v20250501",
                "architecture": "x86_64",
                "creationDate": "2025-05-01T00:00:00Z",
                "parameter": AL2023_X86,
            },
            {
                "name": "amazon-eks-node-al2023-x86_64-standard-1.32-v20250101",
                "architecture": "x86_64",
                "creationDate": "2025-01-01T00:00:00Z",
                "deprecated": True,
            },
            {
                "id": "ami-0a1b2c3d4e5f60718",
                "name": "amazon-eks-node-al2023-arm64-standard-1.32-v20250501",
                "architecture": "arm64",
                "parameter": AL2023_ARM,
            },
        ]
    )


@pytest.fixture
def compute(local_aws: LocalAws) -> tuple[Ec2Compute, list[float]]:
    """A compute adapter on its own client (hooks must not leak into other tests) with recorded sleeps, on
    an EC2 without the instances and launch templates earlier tests left."""
    clear_ec2(local_aws)
    sleeps: list[float] = []
    return Ec2Compute(local_aws.client("ec2"), sleep=sleeps.append, rand=lambda: 1.0), sleeps


# -- local AWS itself ------------------------------------------------------------------------------------
def test_local_aws_listens_on_loopback_and_restores_the_environment(local_aws: LocalAws) -> None:
    assert local_aws.endpoint.startswith("http://127.0.0.1:")
    assert os.environ["AWS_ENDPOINT_URL"] == local_aws.endpoint
    before = dict(os.environ)
    with LocalAws(cluster="other") as second:
        second.create_state()
        assert os.environ["AWS_ENDPOINT_URL"] == second.endpoint != local_aws.endpoint
        assert os.environ["CARPOOL_TABLE"] == "carpool-other-state"
    assert dict(os.environ) == before


def test_state_tables_mirror_the_stack(local_aws: LocalAws, state_tables: StateTables) -> None:
    ddb = local_aws.client("dynamodb")
    table = ddb.describe_table(TableName=state_tables.table)["Table"]
    assert {k["AttributeName"]: k["KeyType"] for k in table["KeySchema"]} == {"pk": "HASH", "sk": "RANGE"}
    (gsi,) = table["GlobalSecondaryIndexes"]
    assert gsi["IndexName"] == "gsi1" and gsi["Projection"]["ProjectionType"] == "ALL"
    ttl = ddb.describe_time_to_live(TableName=state_tables.table)["TimeToLiveDescription"]
    assert ttl["AttributeName"] == "expiresAt"
    idem = ddb.describe_table(TableName=state_tables.idempotency_table)["Table"]
    assert idem["KeySchema"] == [{"AttributeName": "id", "KeyType": "HASH"}]
    assert os.environ["CARPOOL_TABLE"] == f"carpool-{CLUSTER}-state"
    assert os.environ["CARPOOL_IDEMPOTENCY_TABLE"] == f"carpool-{CLUSTER}-idempotency"


def test_queues_have_dead_letter_queues(local_aws: LocalAws, event_path: EventPath) -> None:
    sqs = local_aws.client("sqs")
    for role in ("provisioner", "registrar", "interruption"):
        attrs = sqs.get_queue_attributes(QueueUrl=event_path.queues[role], AttributeNames=["All"])[
            "Attributes"
        ]
        redrive = json.loads(attrs["RedrivePolicy"])
        assert int(redrive["maxReceiveCount"]) == 3
        assert redrive["deadLetterTargetArn"].endswith(f"carpool-{CLUSTER}-{role}-dlq")
    assert os.environ["CARPOOL_EVENT_BUS"] == f"carpool-{CLUSTER}"


# -- EC2 -------------------------------------------------------------------------------------------------
def test_launch_templates_are_idempotent_and_listed_by_cluster_tag(
    compute: tuple[Ec2Compute, list[float]], network: Network, images: list[str]
) -> None:
    ec2, _ = compute
    request = launch_template_request("carpool-itest-lt-a", CLUSTER, images[0], network)
    assert ec2.ensure_launch_template(request) == "carpool-itest-lt-a"
    assert ec2.ensure_launch_template(request) == "carpool-itest-lt-a"  # exists: fine
    ec2.ensure_launch_template(launch_template_request("carpool-other-lt", "other", images[0], network))

    names = [t["LaunchTemplateName"] for t in ec2.list_launch_templates(CLUSTER)]
    assert names.count("carpool-itest-lt-a") == 1
    assert "carpool-other-lt" not in names

    ec2.delete_launch_template("carpool-itest-lt-a")
    ec2.delete_launch_template("carpool-itest-lt-a")  # already gone: fine
    assert "carpool-itest-lt-a" not in [t["LaunchTemplateName"] for t in ec2.list_launch_templates(CLUSTER)]


def test_every_launch_template_is_listed_past_one_page(
    compute: tuple[Ec2Compute, list[float]], network: Network, images: list[str]
) -> None:
    """EC2 pages DescribeLaunchTemplates; GC must see all of carpool's templates, not the first page."""
    ec2, _ = compute
    wanted = {f"carpool-itest-page-{i:02}" for i in range(23)}
    for name in sorted(wanted):
        ec2.ensure_launch_template(launch_template_request(name, CLUSTER, images[0], network))
    listed = [t["LaunchTemplateName"] for t in ec2.list_launch_templates(CLUSTER)]
    assert wanted <= set(listed) and len(listed) == len(set(listed))
    for name in wanted:
        ec2.delete_launch_template(name)


def test_fleet_launch_describe_and_terminate(
    compute: tuple[Ec2Compute, list[float]], network: Network, images: list[str]
) -> None:
    ec2, sleeps = compute
    ec2.ensure_launch_template(launch_template_request("carpool-itest-lt-fleet", CLUSTER, images[0], network))
    response = ec2.create_fleet(fleet_request("carpool-itest-lt-fleet", network, "claim-fleet"))
    (instance_id,) = [i for group in response["Instances"] for i in group["InstanceIds"]]
    assert sleeps == []

    found = ec2.describe_instances([{"Name": f"tag:{labels.TAG_NODECLAIM}", "Values": ["claim-fleet"]}])
    assert [i["InstanceId"] for i in found] == [instance_id]

    ec2.terminate_instances([instance_id, "i-0000000000000000f"])  # an unknown id does not block the rest
    state = ec2.describe_instances([{"Name": "instance-id", "Values": [instance_id]}])[0]["State"]["Name"]
    assert state in {"shutting-down", "terminated"}


def test_create_fleet_retries_throttling_with_backoff(
    compute: tuple[Ec2Compute, list[float]], network: Network, images: list[str]
) -> None:
    ec2, sleeps = compute
    ec2.ensure_launch_template(launch_template_request("carpool-itest-lt-thr", CLUSTER, images[0], network))
    hook, calls = fail_with("RequestLimitExceeded", times=2)
    ec2.client.meta.events.register("before-call.ec2.CreateFleet", hook)

    response = ec2.create_fleet(fleet_request("carpool-itest-lt-thr", network, "claim-thr"))

    assert response["Instances"]
    assert calls[0] == 3
    assert sleeps == [0.5, 1.0]  # base 0.5 s doubling; jitter pinned to its maximum


def test_create_fleet_gives_up_after_the_last_attempt(
    compute: tuple[Ec2Compute, list[float]], network: Network
) -> None:
    ec2, sleeps = compute
    hook, calls = fail_with("Throttling", times=100)
    ec2.client.meta.events.register("before-call.ec2.CreateFleet", hook)
    with pytest.raises(ClientError) as error:
        ec2.create_fleet(fleet_request("whatever", network, "claim-x"))
    assert error.value.response["Error"]["Code"] == "Throttling"
    assert calls[0] == 5 and len(sleeps) == 4
    assert sleeps == sorted(sleeps) and max(sleeps) <= 8.0


def test_create_fleet_does_not_retry_other_errors(
    compute: tuple[Ec2Compute, list[float]], network: Network
) -> None:
    ec2, sleeps = compute
    hook, calls = fail_with("InvalidParameterValue", times=100)
    ec2.client.meta.events.register("before-call.ec2.CreateFleet", hook)
    with pytest.raises(ClientError):
        ec2.create_fleet(fleet_request("missing", network, "claim-y"))
    assert calls[0] == 1 and sleeps == []


def test_create_fleet_names_a_missing_launch_template_by_type_not_by_its_text(
    compute: tuple[Ec2Compute, list[float]], network: Network
) -> None:
    """The launch path recreates a template EC2 lost on this typed error (issue 30: no decision on text)."""
    ec2, sleeps = compute
    hook, calls = fail_with("InvalidLaunchTemplateName.NotFoundException", times=100)
    ec2.client.meta.events.register("before-call.ec2.CreateFleet", hook)
    with pytest.raises(LaunchTemplateMissing):
        ec2.create_fleet(fleet_request("missing", network, "claim-y"))
    assert calls[0] == 1 and sleeps == []


def test_subnets_and_security_groups_by_discovery_tag(
    compute: tuple[Ec2Compute, list[float]], network: Network
) -> None:
    ec2, _ = compute
    discovery = [{"Name": "tag:karpenter.sh/discovery", "Values": [CLUSTER]}]
    subnets = ec2.describe_subnets(discovery)
    assert sorted(s["SubnetId"] for s in subnets) == sorted(network.subnet_ids)
    assert {s["AvailabilityZone"] for s in subnets} == {"us-east-1a", "us-east-1b"}
    assert [g["GroupId"] for g in ec2.describe_security_groups(discovery)] == [network.security_group_id]


# -- AMIs and SSM ----------------------------------------------------------------------------------------
def test_ami_source_reads_seeded_parameters_and_images(local_aws: LocalAws, images: list[str]) -> None:
    source = AwsAmiSource(SsmParameters(local_aws.client("ssm")), local_aws.client("ec2"))
    assert source.get_parameter(AL2023_X86) == images[0]
    assert source.get_parameter(AL2023_ARM) == "ami-0a1b2c3d4e5f60718" == images[2]
    assert (
        source.get_parameter("/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/arm64/neuron/x") is None
    )

    by_name = source.describe_images(
        filters=[{"Name": "name", "Values": ["amazon-eks-node-al2023-x86_64-standard-1.32-*"]}],
        owners=["amazon"],
    )
    assert sorted(i["ImageId"] for i in by_name) == sorted(images[:2])
    deprecated = {i["ImageId"]: i.get("DeprecationTime") for i in by_name}
    assert deprecated[images[1]] and not deprecated[images[0]]
    (arm,) = source.describe_images(image_ids=[images[2]])
    assert arm["Architecture"] == "arm64" and arm["CreationDate"]



def test_an_ami_id_that_does_not_exist_is_no_image_not_an_error(local_aws: LocalAws, images: list[str]) -> None:
    """EC2 refuses DescribeImages(ImageIds=[missing]) with InvalidAMIID.NotFound for the whole request; asked
    by the `image-id` filter, as Karpenter asks, it answers the images that exist (issue 38: AmiInvalid)."""
    source = AwsAmiSource(SsmParameters(local_aws.client("ssm")), local_aws.client("ec2"))
    assert source.describe_images(image_ids=["ami-0123456789abcdef0"]) == []
    (found,) = source.describe_images(image_ids=["ami-0123456789abcdef0", images[2]])
    assert found["ImageId"] == images[2]

def test_ssm_parameters_are_cached_for_max_age(local_aws: LocalAws, images: list[str]) -> None:
    client = local_aws.client("ssm")
    calls = count_calls(client, "before-call.ssm.GetParameter")
    clock = [1000.0]
    params = SsmParameters(client, max_age=300, clock=lambda: clock[0])

    for _ in range(3):
        params.get_parameter(AL2023_X86)
        params.get_parameter("/aws/service/missing")
    assert calls[0] == 2  # one per path, the missing one included
    clock[0] += 301
    params.get_parameter(AL2023_X86)
    assert calls[0] == 3


def test_alias_parameters_are_read_together(local_aws: LocalAws, images: list[str]) -> None:
    client = local_aws.client("ssm")
    single, many = count_calls(client, "before-call.ssm.GetParameter"), count_calls(client, "before-call.ssm.GetParameters")
    source = AwsAmiSource(SsmParameters(client), local_aws.client("ec2"))
    missing = "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/arm64/neuron/recommended/image_id"
    found = source.get_parameters([AL2023_X86, AL2023_ARM, missing])
    assert found == {AL2023_X86: images[0], AL2023_ARM: images[2], missing: None}
    assert (single[0], many[0]) == (0, 1)
    assert source.get_parameter(missing) is None and source.get_parameters([AL2023_ARM]) == {AL2023_ARM: images[2]}
    assert (single[0], many[0]) == (0, 1)  # both cached, the missing one included


# -- events ----------------------------------------------------------------------------------------------
def event(detail_type: str, detail: dict[str, Any], source: str = "carpool.cluster") -> dict[str, Any]:
    return {"Source": source, "DetailType": detail_type, "Detail": json.dumps(detail)}


def test_published_events_reach_the_right_queues(local_aws: LocalAws, event_path: EventPath) -> None:
    publisher = EventBridgePublisher(event_path.bus_name, local_aws.client("events"))
    failed = publisher.put_events(
        [
            event(
                "Pod Unschedulable",
                {"cluster": CLUSTER, "pod": "default/web-1", "observedAt": "2025-06-01T12:00:00Z"},
            ),
            event("Node Registered", {"cluster": CLUSTER, "node": "ip-10-0-0-1.ec2.internal"}),
            event("Something Else", {"cluster": CLUSTER}),
        ]
    )
    assert failed == 0

    (pending,) = local_aws.receive(event_path.queues["provisioner"])
    body = json.loads(pending["Body"])
    assert body["detail-type"] == "Pod Unschedulable" and body["detail"]["pod"] == "default/web-1"
    (registered,) = local_aws.receive(event_path.queues["registrar"])
    assert json.loads(registered["Body"])["detail"]["node"] == "ip-10-0-0-1.ec2.internal"
    assert local_aws.receive(event_path.queues["interruption"], wait_seconds=0) == []


def test_ec2_events_on_the_default_bus_reach_the_interruption_queue(
    local_aws: LocalAws, event_path: EventPath
) -> None:
    publisher = EventBridgePublisher("default", local_aws.client("events"))
    warning = {"instance-id": "i-0123456789abcdef0", "instance-action": "terminate"}
    assert (
        publisher.put_events([event("EC2 Spot Instance Interruption Warning", warning, source="aws.ec2")])
        == 0
    )
    (message,) = local_aws.receive(event_path.queues["interruption"])
    assert json.loads(message["Body"])["detail"] == warning

    # as in the stack, only instances leaving and scheduled EC2 maintenance are routed
    state = "EC2 Instance State-change Notification"
    health = {"service": "EC2", "eventTypeCategory": "scheduledChange", "affectedEntities": []}
    publisher.put_events(
        [
            event(state, {"instance-id": "i-1", "state": "running"}, source="aws.ec2"),
            event(state, {"instance-id": "i-2", "state": "shutting-down"}, source="aws.ec2"),
            event(
                "AWS Health Event",
                {**health, "eventTypeCategory": "accountNotification"},
                source="aws.health",
            ),
            event("AWS Health Event", health, source="aws.health"),
        ]
    )
    routed = [
        json.loads(m["Body"]) for _ in range(3) for m in local_aws.receive(event_path.queues["interruption"])
    ]
    assert sorted(b["detail-type"] for b in routed) == ["AWS Health Event", state]
    assert next(b for b in routed if b["detail-type"] == state)["detail"]["instance-id"] == "i-2"


def test_publisher_sends_batches_of_ten(local_aws: LocalAws, event_path: EventPath) -> None:
    client = local_aws.client("events")
    calls = count_calls(client, "before-call.events.PutEvents")
    publisher = EventBridgePublisher(event_path.bus_name, client)
    entries = [event("Pod Unschedulable", {"cluster": CLUSTER, "pod": f"default/p{i}"}) for i in range(23)]
    assert publisher.put_events(entries) == 0
    assert calls[0] == 3
    received = [
        m for _ in range(5) for m in local_aws.receive(event_path.queues["provisioner"], wait_seconds=0)
    ]
    assert len(received) == 23


class _FlakyEvents:
    """PutEvents that fails chosen entries: `fail_rounds[i]` = DetailTypes failing on call round i."""

    def __init__(self, fail_rounds: list[set[str]]) -> None:
        self.fail_rounds = fail_rounds
        self.sent: list[list[str]] = []

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:  # noqa: N803 - boto3's name
        self.sent.append([e["DetailType"] for e in Entries])
        failing = self.fail_rounds[min(len(self.sent) - 1, len(self.fail_rounds) - 1)]
        results = [
            {"ErrorCode": "InternalFailure", "ErrorMessage": "x"}
            if e["DetailType"] in failing
            else {"EventId": "1"}
            for e in Entries
        ]
        return {"FailedEntryCount": sum("ErrorCode" in r for r in results), "Entries": results}


def test_publisher_retries_failed_entries_once() -> None:
    client = _FlakyEvents([{"b", "c"}, {"c"}])
    publisher = EventBridgePublisher("bus", client, sleep=lambda _s: None)
    assert publisher.put_events([{"Source": "s", "DetailType": t, "Detail": "{}"} for t in "abc"]) == 1
    assert client.sent == [["a", "b", "c"], ["b", "c"]]


# -- catalog, pricing ------------------------------------------------------------------------------
def test_pricing_falls_back_to_the_static_table(local_aws: LocalAws) -> None:
    prices = OnDemandPrices(region="us-east-1")  # moto has no Pricing API
    table = prices.prices()
    assert prices.source == "static"
    assert table["m5.large"] > 0


def test_pricing_errors_fall_back_to_the_static_table() -> None:
    import boto3

    client = boto3.client(
        "pricing", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y"
    )
    with Stubber(client) as stub:
        stub.add_client_error("get_products", "AccessDeniedException", http_status_code=403)
        prices = OnDemandPrices(region="eu-west-1", client=client)
        table = prices.prices()
    assert prices.source == "static" and table["m5.large"] > 0


def test_pricing_lays_live_prices_over_the_table() -> None:
    import boto3

    client = boto3.client(
        "pricing", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y"
    )
    item = {
        "product": {"attributes": {"instanceType": "m5.large", "regionCode": "us-east-1"}},
        "terms": {
            "OnDemand": {"A": {"priceDimensions": {"B": {"unit": "Hrs", "pricePerUnit": {"USD": "0.0999"}}}}}
        },
    }
    with Stubber(client) as stub:
        stub.add_response("get_products", {"PriceList": [json.dumps(item)], "FormatVersion": "aws_v1"})
        prices = OnDemandPrices(region="us-east-1", client=client)
        table = prices.prices()
    assert prices.source == "pricing-api"
    assert table["m5.large"] == pytest.approx(0.0999)
    assert table["c5.large"] > 0  # still priced from the static table


def test_catalog_inputs_build_a_catalog(local_aws: LocalAws) -> None:
    now = datetime(2025, 6, 1, tzinfo=UTC)
    ec2 = Ec2Catalog(local_aws.client("ec2"), region="us-east-1")
    names = ["m5.large", "c6g.large", "r6i.xlarge"]  # the whole list takes moto several seconds
    inputs = fetch_catalog_inputs(now, ec2, OnDemandPrices("us-east-1"), names=names)
    assert set(inputs) == {"instance_types", "type_offerings", "spot_prices", "ondemand_prices", "region"}
    assert sorted(t["InstanceType"] for t in inputs["instance_types"]) == sorted(names)
    assert {o["InstanceType"] for o in inputs["type_offerings"]} == set(names)
    assert any(o["Location"] == "us-east-1a" for o in inputs["type_offerings"])
    assert {t for t, _zone in inputs["spot_prices"]} == set(names)

    from carpool.catalog import builder

    catalog = builder.from_ec2(**inputs)
    assert set(catalog.types) == set(names)
    assert catalog.types["c6g.large"].arch == "arm64"


def test_latest_spot_price_wins() -> None:
    history = [
        {"InstanceType": "m5.large", "AvailabilityZone": "us-east-1a", "SpotPrice": "0.040", "Timestamp": datetime(2025, 1, 1, tzinfo=UTC)},
        {"InstanceType": "m5.large", "AvailabilityZone": "us-east-1a", "SpotPrice": "0.035", "Timestamp": datetime(2025, 1, 2, tzinfo=UTC)},
        {"InstanceType": "m5.large", "AvailabilityZone": "us-east-1b", "SpotPrice": "0.050", "Timestamp": datetime(2025, 1, 1, tzinfo=UTC)},
    ]  # fmt: skip
    assert latest_spot_prices(history) == {
        ("m5.large", "us-east-1a"): 0.035,
        ("m5.large", "us-east-1b"): 0.05,
    }


# -- CLI -------------------------------------------------------------------------------------------------
def test_capacity_cli_lists_the_cache(state_tables: StateTables, now: datetime) -> None:
    from carpool.cli import capacity as capacity_cli

    seen = datetime.now(UTC)
    DynamoCapacityCache().observe(
        CapacityRecord(
            instance_type="m5.large",
            image_id="ami-1",
            ami_family="al2023",
            capacity={"cpu": 2000, "memory": 7935 * 1024 * 1024, "pods": 29},
            allocatable={"cpu": 1930, "memory": 7261 * 1024 * 1024, "pods": 29},
            first_seen=seen,
            last_seen=seen,
            expires_at=seen + TTL,
        ),
        seen,
    )
    app = typer.Typer()
    capacity_cli.register(app)
    app.command("noop")(lambda: None)  # two commands, so typer keeps the command name
    runner = CliRunner()

    out = runner.invoke(app, ["capacity", "--json"])
    assert out.exit_code == 0, out.output
    (row,) = json.loads(out.stdout)
    assert (
        row["instanceType"] == "m5.large" and row["memoryMiB"] == 7935 and row["allocatableMemoryMiB"] == 7261
    )
    assert row["samples"] == 1 and row["source"] == "learned"

    table = runner.invoke(app, ["capacity"])
    assert table.exit_code == 0 and "m5.large" in table.stdout and "7935" in table.stdout
