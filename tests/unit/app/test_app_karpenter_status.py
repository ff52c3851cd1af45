"""The status writer (`carpool.app.karpenter_status.write`) against the simulated API server's store of
Karpenter's objects (which admits a status by the CRD's schema, as kube-apiserver does): what it writes,
and that it writes nothing when nothing moved."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from carpool.app import karpenter_status
from carpool.app.disruption_summary import DisruptSummary
from carpool.app.settings import Settings
from carpool.disruption.orphans import Decisions, Termination
from carpool.karpenter_objects import EC2NODECLASS, NODEPOOL
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.state.models import Claim, ClaimStatus
from carpool.state.not_ready import MemoryNotReady, NodeClassNotReady

T0 = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
TERMS = [{"tags": {"karpenter.sh/discovery": "demo"}}]
STACK_ROLE = "arn:aws:iam::123456789012:role/demo-node-role"
GIB = 2**30


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


class Compute:
    """DescribeSubnets / DescribeSecurityGroups answers, counted."""

    def __init__(self, subnets: list[dict[str, Any]], groups: list[dict[str, Any]]) -> None:
        self.subnets, self.groups, self.calls = subnets, groups, 0

    def describe_subnets(self, filters: Any) -> list[dict[str, Any]]:
        self.calls += 1
        return list(self.subnets)

    def describe_security_groups(self, filters: Any) -> list[dict[str, Any]]:
        self.calls += 1
        return list(self.groups)


class Images:
    """An `AmiSource` that knows one image by id."""

    def get_parameter(self, path: str) -> str | None:
        return None

    def describe_images(self, image_ids: list[str] | None = None, filters: Any = None, owners: Any = None,
                        include_deprecated: bool = True) -> list[dict[str, Any]]:
        image = {"ImageId": "ami-0123456789abcdef0", "Name": "custom-al2023", "Architecture": "x86_64",
                 "CreationDate": "2026-11-01T00:00:00.000Z", "State": "available", "OwnerId": "123456789012",
                 "Tags": []}
        return [image] if not image_ids or image["ImageId"] in image_ids else []


class Ledger:
    def __init__(self) -> None:
        self.pools: dict[str, dict[str, int]] = {}

    def usage(self, pools: Any = None) -> dict[str, dict[str, int]]:
        return {k: dict(v) for k, v in self.pools.items()}


def _nodeclass(name: str, role: str = STACK_ROLE) -> dict[str, Any]:
    return {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name},
            "spec": {"amiFamily": "AL2023", "amiSelectorTerms": [{"id": "ami-0123456789abcdef0"}], "role": role,
                     "subnetSelectorTerms": TERMS, "securityGroupSelectorTerms": TERMS}}


def _nodepool(name: str, nodeclass: str) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": nodeclass},
                "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}}}}


@pytest.fixture
def world() -> SimpleNamespace:
    clock = Clock()
    cluster = SimulatedCluster(clock)
    compute = Compute(
        [{"SubnetId": "subnet-1", "AvailabilityZone": "us-east-1a", "AvailabilityZoneId": "use1-az1",
          "AvailableIpAddressCount": 100}],
        [{"GroupId": "sg-1", "GroupName": "demo-nodes"}])
    settings = Settings(cluster_name="demo", region="us-east-1", node_role=STACK_ROLE, instance_profile="demo-profile",
                        cluster_version="1.32", cluster_endpoint="https://k8s", cluster_ca="Y2E=",
                        cluster_cidr="10.100.0.0/16", cluster_dns="10.100.0.10", cluster_ip_family="ipv4")
    deps = SimpleNamespace(settings=settings, cache={}, clock=clock, karpenter=cluster, compute=compute,
                           ami_source=Images(), instance_profiles=None, not_ready=MemoryNotReady(), ledger=Ledger())
    return SimpleNamespace(clock=clock, cluster=cluster, compute=compute, deps=deps)


def _run(world: SimpleNamespace, claims: list[Claim] = (), decisions: Decisions | None = None) -> DisruptSummary:
    summary = DisruptSummary()
    karpenter_status.write(world.deps, world.clock(), summary, list(claims), decisions)
    assert not summary.failures, summary.failures
    return summary


def _conditions(world: SimpleNamespace, kind: Any, name: str) -> dict[str, dict[str, Any]]:
    obj = world.cluster.get_object(kind, name)
    return {c["type"]: c for c in obj["status"]["conditions"]}


def test_a_ready_class_and_its_pool_get_karpenters_status(world: SimpleNamespace) -> None:
    world.cluster.apply_object(_nodeclass("status-default"))
    world.cluster.apply_object(_nodepool("status-general", "status-default"))
    world.deps.ledger.pools["status-general"] = {"cpu": 4000, "memory": 16 * GIB, "pods": 58, "nodes": 2}
    summary = _run(world)
    assert sorted(summary.statuses_written) == ["EC2NodeClass status-default", "NodePool status-general"]
    nc = world.cluster.get_object(EC2NODECLASS, "status-default")["status"]
    assert nc["subnets"] == [{"id": "subnet-1", "zone": "us-east-1a", "zoneID": "use1-az1"}]
    assert nc["securityGroups"] == [{"id": "sg-1", "name": "demo-nodes"}]
    assert [a["id"] for a in nc["amis"]] == ["ami-0123456789abcdef0"]
    assert nc["instanceProfile"] == "demo-profile"
    assert {k: c["status"] for k, c in _conditions(world, EC2NODECLASS, "status-default").items()} == dict.fromkeys(
        ["AMIsReady", "SubnetsReady", "SecurityGroupsReady", "InstanceProfileReady", "ValidationSucceeded",
         "PlacementGroupReady", "Ready"], "True")
    pool = world.cluster.get_object(NODEPOOL, "status-general")["status"]
    assert pool["resources"] == {"cpu": "4", "memory": "16Gi", "pods": "58", "ephemeral-storage": "0", "nodes": "2"}
    assert pool["nodes"] == 2
    cond = _conditions(world, NODEPOOL, "status-general")
    assert cond["NodeClassReady"]["status"] == cond["ValidationSucceeded"]["status"] == cond["Ready"]["status"] == "True"
    assert cond["Ready"]["observedGeneration"] == 1


def test_nothing_is_written_when_nothing_moved(world: SimpleNamespace) -> None:
    world.cluster.apply_object(_nodeclass("status-default"))
    world.cluster.apply_object(_nodepool("status-general", "status-default"))
    _run(world)
    versions = {k.kind: world.cluster.get_object(k, n)["metadata"]["resourceVersion"]
                for k, n in ((EC2NODECLASS, "status-default"), (NODEPOOL, "status-general"))}
    world.clock.now += timedelta(minutes=1)
    assert _run(world).statuses_written == []
    assert versions == {k.kind: world.cluster.get_object(k, n)["metadata"]["resourceVersion"]
                        for k, n in ((EC2NODECLASS, "status-default"), (NODEPOOL, "status-general"))}
    world.deps.ledger.pools["status-general"] = {"cpu": 2000, "nodes": 1}
    world.clock.now += timedelta(minutes=1)
    assert _run(world).statuses_written == ["NodePool status-general"]  # only what moved


def test_a_role_carpool_cannot_make_a_profile_for_fails_the_class_and_its_pool(world: SimpleNamespace) -> None:
    world.cluster.apply_object(_nodeclass("status-other-role", role="NoSuchRole"))
    world.cluster.apply_object(_nodepool("status-team", "status-other-role"))
    _run(world)
    nc = _conditions(world, EC2NODECLASS, "status-other-role")
    assert (nc["InstanceProfileReady"]["status"], nc["InstanceProfileReady"]["reason"]) == ("False", "RoleNotFound")
    assert "spec.role" in nc["InstanceProfileReady"]["message"]
    assert nc["Ready"]["status"] == "False"
    pool = _conditions(world, NODEPOOL, "status-team")
    assert (pool["NodeClassReady"]["status"], pool["NodeClassReady"]["reason"]) == ("False", "UnhealthyDependents")
    assert "InstanceProfileReady=False" in pool["NodeClassReady"]["message"]
    assert pool["Ready"]["status"] == "False"


def test_a_refused_launch_is_said_until_the_class_is_edited(world: SimpleNamespace) -> None:
    world.cluster.apply_object(_nodeclass("status-default"))
    world.cluster.apply_object(_nodepool("status-general", "status-default"))
    message = "spec.role: IAM role 'demo-node-role' does not exist"
    world.deps.not_ready.save([NodeClassNotReady(nodeclass="status-default", cause="RoleNotFound", message=message,
                                                 nodepools=("status-general",), since=T0, confirmed=T0)])
    _run(world)
    nc = _conditions(world, EC2NODECLASS, "status-default")
    assert (nc["InstanceProfileReady"]["reason"], nc["InstanceProfileReady"]["message"]) == ("RoleNotFound", message)
    edited = _nodeclass("status-default")
    edited["spec"]["tags"] = {"team": "a"}
    world.cluster.apply_object(edited)  # generation 2: the refusal is for the spec before
    world.clock.now += timedelta(minutes=1)
    _run(world)
    nc = _conditions(world, EC2NODECLASS, "status-default")
    assert nc["InstanceProfileReady"]["status"] == nc["Ready"]["status"] == "True"
    assert nc["Ready"]["observedGeneration"] == 2
    assert world.deps.not_ready.all(world.clock()) == []


def test_a_pool_naming_no_class_is_not_found(world: SimpleNamespace) -> None:
    world.cluster.apply_object(_nodepool("status-orphan", "status-missing"))
    _run(world)
    orphan = _conditions(world, NODEPOOL, "status-orphan")
    assert (orphan["NodeClassReady"]["reason"], orphan["NodeClassReady"]["message"]) == (
        "NodeClassNotFound", "NodeClass not found on cluster")
    assert orphan["ValidationSucceeded"]["status"] == "True"  # its own spec is fine
    assert "NodeRegistrationHealthy" not in orphan


def test_registrations_and_registration_timeouts_make_the_pools_registration_health(world: SimpleNamespace) -> None:
    world.cluster.apply_object(_nodeclass("status-default"))
    world.cluster.apply_object(_nodepool("status-general", "status-default"))
    _run(world)  # a process's first run counts nothing it did not see happen
    assert _conditions(world, NODEPOOL, "status-general")["NodeRegistrationHealthy"]["status"] == "Unknown"
    world.clock.now += timedelta(minutes=1)
    joined = Claim(name="c1", nodepool="status-general", nodeclass="status-default", status=ClaimStatus.REGISTERED,
                   created_at=T0, registered_at=world.clock.now - timedelta(seconds=10))
    _run(world, [joined])
    assert _conditions(world, NODEPOOL, "status-general")["NodeRegistrationHealthy"]["status"] == "True"
    lost = [Termination(f"i-{n}", "never registered", "registration-timeout",
                        claim=Claim(name=f"c{n}", nodepool="status-general", nodeclass="status-default",
                                    status=ClaimStatus.LAUNCHED, created_at=T0)) for n in (2, 3)]
    world.clock.now += timedelta(minutes=1)
    _run(world, [joined], Decisions(terminations=lost))
    health = _conditions(world, NODEPOOL, "status-general")["NodeRegistrationHealthy"]
    assert (health["status"], health["reason"], health["message"]) == ("False", "RegistrationFailed",
                                                                       "Failed to register node")


def test_a_cluster_without_karpenters_objects_writes_nothing(world: SimpleNamespace) -> None:
    world.deps.karpenter = None
    assert _run(world).statuses_written == []
