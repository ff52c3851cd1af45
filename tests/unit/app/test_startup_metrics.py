"""Karpenter's startup durations as carpool's functions emit them (`carpool.app.startup`): the provisioner's
`PodPendingToLaunchSeconds` from each pod's Unschedulable condition to its claim's CreateFleet answer, the
registrar's `NodeRegistrationSeconds` from the Node's creation to the write that lifted the unregistered
taint; both per pool, a batch's values in EMF documents of at most 100."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from carpool import labels, observability
from carpool.amis import InMemoryAmiSource
from carpool.api.k8s import Node, Pod
from carpool.app import register, startup
from carpool.app.provisioning import provision
from carpool.app.settings import Settings
from carpool.app.sources import StaticCatalogSource, TextConfigSource
from carpool.app.wiring import Dependencies
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.state.memory import MemoryCapacityCache, MemoryLedger, MemoryOfferings
from carpool.state.models import Claim, ClaimStatus

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
CLUSTER = "demo"
ZONE = "us-east-1a"
AMI = "ami-std"
CONFIG = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: r
  amiFamily: AL2023
  amiSelectorTerms: [{id: ami-std}]
  subnetSelectorTerms: [{tags: {a: b}}]
  securityGroupSelectorTerms: [{tags: {a: b}}]
"""


@pytest.fixture(autouse=True)
def _emf(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "carpool")
    monkeypatch.setenv("CARPOOL_CLUSTER_NAME", CLUSTER)
    yield


def emf(out: str, name: str) -> list[tuple[dict[str, str], list[float]]]:
    """(dimensions, values) of each EMF document of `name` printed; the document's pool (a property, not a
    dimension: `observability.PROPERTIES`) as "@nodepool"."""
    found = []
    for line in out.splitlines():
        doc = json.loads(line) if line.startswith("{") else {}
        for directive in doc.get("_aws", {}).get("CloudWatchMetrics", []):
            if any(m["Name"] == name for m in directive["Metrics"]):
                (dims,) = directive["Dimensions"]
                value = doc[name]
                pool = {"@nodepool": doc["nodepool"]} if "nodepool" in doc and "nodepool" not in dims else {}
                found.append(({**{d: doc[d] for d in dims}, **pool}, value if isinstance(value, list) else [value]))
    return found


class Ec2:
    """CreateFleet launches the first override, one instance per unit of target capacity."""

    def __init__(self) -> None:
        self.launched = 0

    def create_fleet(self, request: dict[str, Any]) -> dict[str, Any]:
        override = request["LaunchTemplateConfigs"][0]["Overrides"][0]
        count = int(request["TargetCapacitySpecification"]["TotalTargetCapacity"])
        ids = [f"i-{self.launched + n:05d}" for n in range(1, count + 1)]
        self.launched += count
        return {"Instances": [{"InstanceIds": ids, "InstanceType": override["InstanceType"], "Lifecycle": "on-demand",
                               "LaunchTemplateAndOverrides": {"Overrides": override}}], "Errors": []}

    def ensure_launch_template(self, request: dict[str, Any]) -> str:
        return str(request["LaunchTemplateName"])

    def describe_subnets(self, filters: Any) -> list[dict[str, Any]]:
        return [{"SubnetId": "subnet-a", "AvailabilityZone": ZONE, "AvailableIpAddressCount": 4000, "State": "available"}]

    def describe_security_groups(self, filters: Any) -> list[dict[str, Any]]:
        return [{"GroupId": "sg-1"}]

    def tag_instance(self, instance_id: str, tags: dict[str, str]) -> None:
        return None


def deps_for(cluster: SimulatedCluster, clock: Any = lambda: NOW) -> Dependencies:
    amis = InMemoryAmiSource(images=[{
        "ImageId": AMI, "Name": "amazon-eks-node-al2023-x86_64-standard-1.32-v20250101", "Architecture": "x86_64",
        "CreationDate": "2025-01-01T00:00:00.000Z", "State": "available", "OwnerId": "111122223333", "Tags": []}])
    return Dependencies(
        settings=Settings(cluster_name=CLUSTER, event_bus="bus", instance_profile="carpool-node",
                          node_role="arn:aws:iam::111122223333:role/r",
                          cluster_endpoint="https://demo.eks", cluster_ca="Q0E=", cluster_version="1.32", cluster_cidr="10.100.0.0/16", cluster_dns="10.100.0.10", cluster_ip_family="ipv4"), cluster=cluster,
        compute=Ec2(),  # type: ignore[arg-type]
        ledger=MemoryLedger(), offerings=MemoryOfferings(), capacity=MemoryCapacityCache(), publisher=None,  # type: ignore[arg-type]
        ami_source=amis, config=TextConfigSource(lambda: CONFIG), catalog=StaticCatalogSource("us-east-1"), clock=clock,
    )


def pending_pod(name: str, waited: float | None, cpu: str = "500m") -> Pod:
    """A pod the kube-scheduler marked Unschedulable `waited` seconds before NOW (None: never marked)."""
    conditions = [] if waited is None else [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "lastTransitionTime": (NOW - timedelta(seconds=waited)).isoformat()}]
    return Pod.model_validate({
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]},
        "status": {"phase": "Pending", "conditions": conditions}})


# -- the provisioner ------------------------------------------------------------------------------------
def test_each_launched_pod_reports_its_wait_from_unschedulable_to_the_create_fleet_answer(
        capsys: pytest.CaptureFixture[str]) -> None:
    deps = deps_for(SimulatedCluster(lambda: NOW))
    pods = [pending_pod("web-1", 30), pending_pod("web-2", 12.5), pending_pod("web-3", None)]

    outcome = provision.provision_pods(pods, deps, reason="provisioning")

    assert outcome.launched and not outcome.failed
    assert outcome.launched_at == dict.fromkeys((c.name for c in outcome.launched), NOW)
    (point,) = emf(capsys.readouterr().out, "PodPendingToLaunchSeconds")
    dims, values = point
    assert dims == {"@nodepool": "default", "cluster": CLUSTER, "service": "carpool"}  # one series, pool in the log
    assert sorted(values) == [12.5, 30.0]  # web-3 was never marked Unschedulable: not a pending pod's wait


def test_a_pod_whose_claim_did_not_launch_reports_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    pods = [pending_pod("web-1", 30)]
    claim = Claim(name="c1", nodepool="default", nodeclass="default", created_at=NOW, pods=["default/web-1"],
                  status=ClaimStatus.LAUNCHED)

    startup.pending_to_launch(pods, [claim], {})

    assert emf(capsys.readouterr().out, "PodPendingToLaunchSeconds") == []


def test_a_burst_goes_out_a_hundred_values_a_document_per_pool(capsys: pytest.CaptureFixture[str]) -> None:
    pods = [pending_pod(f"web-{i}", float(i)) for i in range(250)]
    claims = [Claim(name=f"c{n}", nodepool=pool, nodeclass="default", created_at=NOW, status=ClaimStatus.LAUNCHED,
                    pods=[f"default/web-{i}" for i in range(n * 50, n * 50 + 50)])
              for n, pool in enumerate(["a", "a", "a", "b", "b"])]
    later = NOW + timedelta(seconds=2)

    startup.pending_to_launch(pods, claims, dict.fromkeys((c.name for c in claims), later))

    points = emf(capsys.readouterr().out, "PodPendingToLaunchSeconds")
    assert [(dims["@nodepool"], len(values)) for dims, values in points] == [("a", 100), ("a", 50), ("b", 100)]
    assert sorted(v for _dims, values in points for v in values) == [i + 2.0 for i in range(250)]


# -- the registrar ----------------------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


def joined(cluster: SimulatedCluster, iid: str, taints: list[dict[str, str]]) -> str:
    name = f"ip-{iid}"
    cluster.add_node({
        "metadata": {"name": name, "labels": {labels.HOSTNAME: name, labels.ARCH: "amd64", labels.OS: "linux",
                                              labels.INSTANCE_TYPE: "m5.large", labels.ZONE: ZONE,
                                              labels.NODEPOOL: "default", labels.OWNED_BY: CLUSTER}},
        "spec": {"providerID": f"aws:///{ZONE}/{iid}", "taints": taints},
        "status": {"allocatable": {"cpu": "1930m", "memory": "7000Mi", "pods": "29"},
                   "conditions": [{"type": "Ready", "status": "False"}]}})
    return name


def launched_claim(deps: Dependencies, iid: str) -> None:
    claim = Claim(name=f"c-{iid}", nodepool="default", nodeclass="default", created_at=NOW, instance_types=["m5.large"],
                  pods=["default/web-1"], reserved={"nodes": 1}, requested={"cpu": 500})
    deps.ledger.reserve(claim, None, NOW, 600)
    deps.ledger.mark_launched(claim.model_copy(update={
        "status": ClaimStatus.LAUNCHED, "instance_id": iid, "instance_type": "m5.large", "zone": ZONE,
        "capacity_type": "on-demand", "image_id": AMI}))


def test_registration_reports_the_seconds_from_node_creation_to_the_lifted_taint(
        capsys: pytest.CaptureFixture[str]) -> None:
    clock = Clock()
    deps = deps_for(SimulatedCluster(clock), clock)
    launched_claim(deps, "i-1")
    name = joined(deps.cluster, "i-1", [{"key": labels.UNREGISTERED_TAINT, "effect": "NoExecute"}])  # type: ignore[arg-type]
    clock.now = NOW + timedelta(seconds=21)

    register.reconcile(name, deps, register.RegisterSummary())
    clock.now = NOW + timedelta(seconds=80)
    register.reconcile(name, deps, register.RegisterSummary())  # registered already: no second data point

    assert emf(capsys.readouterr().out, "NodeRegistrationSeconds") == [
        ({"@nodepool": "default", "cluster": CLUSTER, "service": "carpool"}, [21.0])]


def test_a_node_that_joined_without_the_unregistered_taint_reports_no_registration(
        capsys: pytest.CaptureFixture[str]) -> None:
    clock = Clock()
    deps = deps_for(SimulatedCluster(clock), clock)
    launched_claim(deps, "i-2")
    name = joined(deps.cluster, "i-2", [])  # type: ignore[arg-type]
    clock.now = NOW + timedelta(seconds=21)

    summary = register.RegisterSummary()
    register.reconcile(name, deps, summary)

    assert summary.registered == [name]
    assert emf(capsys.readouterr().out, "NodeRegistrationSeconds") == []


def test_node_registered_reads_the_two_versions_of_the_node() -> None:
    taint = {"key": labels.UNREGISTERED_TAINT, "effect": "NoExecute"}
    before = Node.model_validate({"metadata": {"name": "n", "creationTimestamp": "2026-05-01T12:00:00Z"},
                                  "spec": {"taints": [taint]}})
    after = Node.model_validate({"metadata": {"name": "n", "creationTimestamp": "2026-05-01T12:00:00Z"}})
    earlier = observability.total("NodeRegistrationSeconds", nodepool="p")

    startup.node_registered(before, before, "p", NOW + timedelta(seconds=5))  # the taint is still there
    startup.node_registered(before, after, "p", NOW + timedelta(seconds=7.5))

    assert observability.total("NodeRegistrationSeconds", nodepool="p") - earlier == 7.5
