"""The provisioner's reading of an EC2NodeClass's status (`world.unready_classes`): a class `Ready=False`
at its generation keeps its NodePools from launching, with the cause of the condition that failed."""

from __future__ import annotations

from datetime import UTC, datetime

from carpool.amis import ResolvedAmi
from carpool.api.cluster_config import judge
from carpool.app.provisioning.world import unready_classes
from carpool.karpenter_status import nodeclass as nc
from carpool.launch.failures import Cause
from carpool.requirements import Requirements

T0 = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
TERMS = [{"tags": {"karpenter.sh/discovery": "demo"}}]


def _class(name: str, generation: int, status: dict) -> dict:
    return {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": name, "generation": generation, "uid": name, "resourceVersion": "1",
                         "creationTimestamp": "2026-12-01T00:00:00Z"},
            "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "nodes",
                     "subnetSelectorTerms": TERMS, "securityGroupSelectorTerms": TERMS},
            "status": status}


def _status(generation: int, readings: nc.NodeClassReadings) -> dict:
    return nc.nodeclass_status(_class("x", generation, {}), readings, T0)


GOOD = dict(subnets=[{"SubnetId": "subnet-1", "AvailabilityZone": "us-east-1a"}],
            security_groups=[{"GroupId": "sg-1"}], instance_profile="p",
            amis=[ResolvedAmi(id="ami-1", name="a", arch="x86_64", variant="standard", requirements=Requirements())])


def test_a_class_not_ready_at_its_generation_is_unready_with_its_cause() -> None:
    broken = _status(1, nc.NodeClassReadings(**{**GOOD, "instance_profile": nc.Problem(
        "RoleNotFound", "spec.role: IAM role 'nodes' does not exist")}))
    config = judge([], [_class("broken", 1, broken)])
    assert unready_classes(config) == {"broken": (Cause.ROLE, "spec.role: IAM role 'nodes' does not exist")}


def test_karpenters_reason_becomes_the_part_and_its_field() -> None:
    readings = nc.NodeClassReadings(**{**GOOD, "subnets": []})
    config = judge([], [_class("nosubnet", 1, _status(1, readings))])
    assert unready_classes(config) == {
        "nosubnet": (Cause.SUBNET, "spec.subnetSelectorTerms: SubnetSelector did not match any Subnets")}


def test_an_edited_class_or_one_never_written_is_tried() -> None:
    broken = _status(1, nc.NodeClassReadings(**{**GOOD, "subnets": []}))
    config = judge([], [_class("edited", 2, broken), _class("new", 1, {})])
    assert unready_classes(config) == {}
