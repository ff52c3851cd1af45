"""Shared set-up for integration tests that drive the use cases against local AWS: NodePool/EC2NodeClass
YAML, a controllable clock, production adapters (pointed at moto) with the simulation's in-memory cluster,
pending pods, and the `aws`/`make_deps` fixtures (registered for every test by conftest.py)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from carpool.adapters.aws import wiring as aws_wiring
from carpool.api import events
from carpool.api.k8s import Pod
from carpool.app import wiring
from carpool.app.settings import Settings
from carpool.app.sources import StaticCatalogSource
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.sim.localaws.server import LocalAws

CLUSTER = "itest"  # the session LocalAws fixture's cluster
AL2023_X86 = {"name": "al2023-x86", "architecture": "x86_64", "creationDate": "2026-01-01T00:00:00Z",
              "parameter": "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id"}

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
#: what the stack passes as context keys (the simulated cluster has no DescribeCluster to ask)
CLUSTER_FACTS = {"cluster_endpoint": f"https://{CLUSTER}.sim.eks.local", "cluster_ca": "Q0E=",
                 "cluster_version": "1.32", "cluster_cidr": "10.100.0.0/16", "cluster_dns": "10.100.0.10",
                 "cluster_ip_family": "ipv4"}


# -- NodePool / EC2NodeClass YAML ------------------------------------------------------------------------
def nodepool(
    name: str = "default",
    *,
    requirements: Mapping[str, Sequence[str]],
    weight: int | None = None,
    limits: Mapping[str, Any] | None = None,
    disruption: Mapping[str, str] | None = None,
    nodeclass: str = "default",
) -> dict[str, Any]:
    """A karpenter.sh/v1 NodePool; every requirement is `key In values`."""
    template = {"spec": {
        "requirements": [{"key": k, "operator": "In", "values": list(v)} for k, v in requirements.items()],
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": nodeclass},
    }}
    spec: dict[str, Any] = {} if weight is None else {"weight": weight}
    spec["template"] = template
    if disruption is not None:
        spec["disruption"] = dict(disruption)
    if limits is not None:
        spec["limits"] = dict(limits)
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def nodeclass(
    name: str = "default",
    *,
    cluster: str = CLUSTER,
    role: str = "node-role",
    alias: str = "al2023@latest",
    tags: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A karpenter.k8s.aws/v1 EC2NodeClass finding subnets and security groups by the discovery tag."""
    spec: dict[str, Any] = {"role": role}
    if tags is not None:
        spec["tags"] = dict(tags)
    discovery = [{"tags": {"karpenter.sh/discovery": cluster}}]
    spec |= {"amiSelectorTerms": [{"alias": alias}], "subnetSelectorTerms": discovery,
             "securityGroupSelectorTerms": discovery}
    return {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name}, "spec": spec}


def manifests(*docs: Mapping[str, Any]) -> str:
    """The documents as one multi-document YAML text (what `kubectl apply -f` would be given)."""
    return yaml.safe_dump_all(docs, sort_keys=False)


def apply_config(cluster: SimulatedCluster, config: str) -> None:
    """`kubectl apply` of each NodePool/EC2NodeClass document of `config` to `cluster`."""
    for doc in yaml.safe_load_all(config):
        if isinstance(doc, dict):
            cluster.apply_object(doc)


# -- clock and dependencies ------------------------------------------------------------------------------
class Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


def build_deps(aws: LocalAws, clock: Clock, config: str) -> wiring.Dependencies:
    """Production wiring on local AWS; the shipped catalog keeps tests fast (the EC2-built catalog is
    exercised by the simulation)."""
    cluster = SimulatedCluster(clock)
    apply_config(cluster, config)
    # the stack's node role and its profile, as the stack's environment names them
    settings = dataclasses.replace(Settings.from_env(), cluster_name=CLUSTER, instance_profile="node-profile",
                                   node_role="arn:aws:iam::123456789012:role/node-role", **CLUSTER_FACTS)
    deps = aws_wiring.build_from_env(settings, cluster=cluster, karpenter=cluster)
    return dataclasses.replace(deps, clock=clock, catalog=StaticCatalogSource("us-east-1"))


def pending_pods(n: int, cpu: str = "1", prefix: str = "p", memory: str = "1Gi",
                 deps: wiring.Dependencies | None = None) -> list[Pod]:
    """Pending pods; with `deps` they are also created in its (simulated) cluster, as real pending pods
    are (in-flight room is only held for pods that still exist)."""
    pods = [Pod.model_validate({
        "metadata": {"name": f"{prefix}{i}", "namespace": "default", "uid": f"{prefix}{i}"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    }) for i in range(n)]
    for pod in pods if deps is not None else ():
        deps.cluster.add_pod(pod.to_json_dict())  # type: ignore[attr-defined]
    return pods


def sqs_batch(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The Lambda SQS event for PutEvents entries as the bus rule delivers them."""
    records = []
    for i, entry in enumerate(entries):
        body = json.dumps(events.delivered_event(entry, event_id=f"e{i}"), default=str)
        records.append({"messageId": f"m{i}", "receiptHandle": "r", "body": body, "attributes": {},
                        "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs",
                        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q", "awsRegion": "us-east-1"})
    return {"Records": records}


class LambdaContext:
    function_name = "carpool"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:carpool"
    aws_request_id = "req"


# -- local EC2 -------------------------------------------------------------------------------------------
#: The clients these helpers and the fixtures use, one per local AWS (endpoint and account) and service:
#: building a boto3 client costs tens of milliseconds, and the fixtures run for every test. They are never
#: handed to a test, so no test's hooks on a client outlive it (`aws.client` gives a test its own).
_CLIENTS: dict[tuple[str, str, str], Any] = {}


def helper_client(aws: LocalAws, service: str) -> Any:
    """A cached plain boto3 client on `aws`, for this module's and conftest.py's own reads and clean-ups."""
    key = (aws.endpoint, aws.account_id, service)
    if key not in _CLIENTS:
        _CLIENTS[key] = aws.client(service)
    return _CLIENTS[key]


def running_instances(aws: LocalAws) -> list[dict[str, Any]]:
    """The cluster's pending and running instances."""
    out = helper_client(aws, "ec2").describe_instances(Filters=[
        {"Name": "tag:carpool.dev/cluster", "Values": [CLUSTER]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]}])
    return [i for r in out["Reservations"] for i in r["Instances"]]


def clear_ec2(aws: LocalAws) -> None:
    """Terminate the instances and delete the launch templates earlier tests of the session left.

    Tests that count templates or instances need a clean EC2. (moto's DescribeLaunchTemplates used to
    answer only its first 15 templates, which hid newer ones from GC; LocalAws now pages it like EC2.)
    """
    ec2 = helper_client(aws, "ec2")
    ids = [i["InstanceId"] for i in running_instances(aws)]
    if ids:
        ec2.terminate_instances(InstanceIds=ids)
    while found := ec2.describe_launch_templates()["LaunchTemplates"]:
        for template in found:
            ec2.delete_launch_template(LaunchTemplateId=template["LaunchTemplateId"])


# -- fixtures (conftest.py makes them available to every integration test) -------------------------------
#: the `make_deps` fixture's value: `make_deps(config, start=T0)`
MakeDeps = Callable[..., wiring.Dependencies]


@pytest.fixture
def aws(local_aws: LocalAws, state_tables: Any, network: Any) -> LocalAws:
    """Local AWS ready to provision into: empty state tables, the network, AL2023 published, and no
    instances or launch templates left by earlier tests of the session."""
    local_aws.seed_amis([AL2023_X86])
    clear_ec2(local_aws)
    return local_aws


@pytest.fixture
def make_deps(aws: LocalAws) -> Iterator[MakeDeps]:
    """`make_deps(config, start=T0)`: `build_deps` on the prepared local AWS with a `Clock` from `start`
    (`deps.clock`). Whatever a test hands to `wiring.use` is forgotten afterwards."""

    def make(config: str, start: datetime = T0) -> wiring.Dependencies:
        return build_deps(aws, Clock(start), config)

    yield make
    wiring.use(None)
