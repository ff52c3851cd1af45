"""The status writer (`carpool.app.karpenter_status`) side by side: against the simulated API server's
store (always) and the real kube-apiserver with Karpenter v1.14.1's CRDs (skipped without KUBE_ENDPOINT;
`real_api.py`), through the lightkube adapter as carpool's own user bound to `infra/rbac.yaml`'s
ClusterRole.

The same from both: the status carpool builds is what the server keeps (its CRD's schema admits every
field, nothing is pruned or refused), `observedGeneration` is the generation read, a second run writes
nothing (the objects' resourceVersions stay), and an edit of the spec (generation 2) is seen in the next
run's conditions. The server is shared: the writer is shown only this test's objects (`Only`), so it
never writes another's status."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from real_api import LIMITED_TOKEN, bound_cluster_role, ensure_karpenter_crds, real_api, unique

from carpool.app import karpenter_status
from carpool.app.disruption_summary import DisruptSummary
from carpool.app.settings import Settings
from carpool.karpenter_objects import EC2NODECLASS, NODEPOOL, KarpenterObjects, ObjectKind, ObjectList
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.state.not_ready import MemoryNotReady

T0 = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
TERMS = [{"tags": {"karpenter.sh/discovery": "demo"}}]
STACK_ROLE = "arn:aws:iam::123456789012:role/demo-node-role"


class Only:
    """The objects whose names start with `prefix`, and nothing else of the shared server."""

    def __init__(self, objects: KarpenterObjects, prefix: str) -> None:
        self._objects, self._prefix = objects, prefix

    def list_objects(self, kind: ObjectKind) -> ObjectList:
        listed = self._objects.list_objects(kind)
        return ObjectList([o for o in listed.items if o["metadata"]["name"].startswith(self._prefix)],
                          listed.resource_version)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._objects, name)


class Compute:
    def describe_subnets(self, filters: Any) -> list[dict[str, Any]]:
        return [{"SubnetId": "subnet-1", "AvailabilityZone": "us-east-1a", "AvailabilityZoneId": "use1-az1",
                 "AvailableIpAddressCount": 100}]

    def describe_security_groups(self, filters: Any) -> list[dict[str, Any]]:
        return [{"GroupId": "sg-1", "GroupName": "demo-nodes"}]


class Images:
    def get_parameter(self, path: str) -> str | None:
        return None

    def describe_images(self, image_ids: Any = None, filters: Any = None, owners: Any = None,
                        include_deprecated: bool = True) -> list[dict[str, Any]]:
        return [{"ImageId": "ami-0123456789abcdef0", "Name": "custom-al2023", "Architecture": "x86_64",
                 "CreationDate": "2026-11-01T00:00:00.000Z", "State": "available", "OwnerId": "123456789012",
                 "Tags": []}]


class Ledger:
    def __init__(self, usage: Mapping[str, Mapping[str, int]]) -> None:
        self._usage = usage

    def usage(self, pools: Any = None) -> dict[str, dict[str, int]]:
        return {k: dict(v) for k, v in self._usage.items()}


def _nodeclass(name: str, role: str = STACK_ROLE) -> dict[str, Any]:
    return {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name},
            "spec": {"amiFamily": "AL2023", "amiSelectorTerms": [{"id": "ami-0123456789abcdef0"}], "role": role,
                     "subnetSelectorTerms": TERMS, "securityGroupSelectorTerms": TERMS}}


def _nodepool(name: str, nodeclass: str) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": nodeclass},
                "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}}}}


@contextmanager
def _simulated() -> Iterator[tuple[KarpenterObjects, Any]]:
    cluster = SimulatedCluster(lambda: T0)
    yield cluster, cluster


@contextmanager
def _real() -> Iterator[tuple[KarpenterObjects, Any]]:
    with real_api() as api:
        ensure_karpenter_crds(api)
        with bound_cluster_role(api):
            yield api.karpenter_objects(LIMITED_TOKEN), api.karpenter_objects()


BACKENDS = {"simulated": _simulated, "real": _real}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_the_status_written_is_what_the_server_keeps_and_a_quiet_run_writes_nothing(backend: str) -> None:
    prefix = unique("status")
    with BACKENDS[backend]() as (objects, admin):
        names = {"class": f"{prefix}-default", "bad": f"{prefix}-norole", "pool": f"{prefix}-general",
                 "team": f"{prefix}-team"}
        created = [(EC2NODECLASS, admin.create_object(EC2NODECLASS, _nodeclass(names["class"]))),
                   (EC2NODECLASS, admin.create_object(EC2NODECLASS, _nodeclass(names["bad"], role="NoSuchRole"))),
                   (NODEPOOL, admin.create_object(NODEPOOL, _nodepool(names["pool"], names["class"]))),
                   (NODEPOOL, admin.create_object(NODEPOOL, _nodepool(names["team"], names["bad"])))]
        try:
            _exercise(Only(objects, prefix), admin, names)
        finally:
            for kind, obj in created:
                admin.delete_object(kind, obj["metadata"]["name"])


def _exercise(objects: Only, admin: KarpenterObjects, names: dict[str, str]) -> None:
    clock = SimpleNamespace(now=T0)
    settings = Settings(cluster_name="demo", region="us-east-1", node_role=STACK_ROLE, instance_profile="demo-profile",
                        cluster_version="1.32", cluster_endpoint="https://k8s", cluster_ca="Y2E=",
                        cluster_cidr="10.100.0.0/16", cluster_dns="10.100.0.10", cluster_ip_family="ipv4")
    deps = SimpleNamespace(settings=settings, cache={}, clock=lambda: clock.now, karpenter=objects, compute=Compute(),
                           ami_source=Images(), instance_profiles=None, not_ready=MemoryNotReady(),
                           ledger=Ledger({names["pool"]: {"cpu": 3860, "memory": 13806 * 2**20, "pods": 58,
                                                          "ephemeral-storage": 40 * 2**30, "nodes": 2}}))

    def run() -> DisruptSummary:
        summary = DisruptSummary()
        karpenter_status.write(deps, clock.now, summary)
        assert not summary.failures, summary.failures
        return summary

    assert len(run().statuses_written) == 4
    pool = admin.get_object(NODEPOOL, names["pool"])
    assert pool["status"]["resources"] == {"cpu": "3860m", "memory": "13806Mi", "pods": "58",
                                           "ephemeral-storage": "40Gi", "nodes": "2"}
    assert pool["status"]["nodes"] == 2
    conditions = {c["type"]: c for c in pool["status"]["conditions"]}
    assert conditions["Ready"]["status"] == "True" and conditions["Ready"]["observedGeneration"] == 1
    klass = admin.get_object(EC2NODECLASS, names["class"])
    assert klass["status"]["subnets"] == [{"id": "subnet-1", "zone": "us-east-1a", "zoneID": "use1-az1"}]
    assert klass["status"]["amis"][0]["requirements"][0] == {"key": "kubernetes.io/arch", "operator": "In",
                                                             "values": ["amd64"]}
    bad = {c["type"]: c for c in admin.get_object(EC2NODECLASS, names["bad"])["status"]["conditions"]}
    assert (bad["InstanceProfileReady"]["status"], bad["InstanceProfileReady"]["reason"]) == ("False", "RoleNotFound")
    team = {c["type"]: c for c in admin.get_object(NODEPOOL, names["team"])["status"]["conditions"]}
    assert (team["NodeClassReady"]["status"], team["Ready"]["status"]) == ("False", "False")

    versions = {n: _version(admin, n, names) for n in names.values()}
    clock.now += timedelta(minutes=1)
    assert run().statuses_written == []
    assert versions == {n: _version(admin, n, names) for n in names.values()}

    admin.patch_object(NODEPOOL, names["pool"], {"spec": {"weight": 10}})  # generation 2
    clock.now += timedelta(minutes=1)
    assert run().statuses_written == [f"NodePool {names['pool']}"]
    conditions = {c["type"]: c for c in admin.get_object(NODEPOOL, names["pool"])["status"]["conditions"]}
    assert conditions["Ready"]["observedGeneration"] == 2
    assert conditions["NodeRegistrationHealthy"]["status"] == "Unknown"  # an edit starts it over


def _version(admin: KarpenterObjects, name: str, names: dict[str, str]) -> str:
    kind = NODEPOOL if name in (names["pool"], names["team"]) else EC2NODECLASS
    return admin.get_object(kind, name)["metadata"]["resourceVersion"]
