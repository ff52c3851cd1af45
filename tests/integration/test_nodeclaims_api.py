"""carpool's NodeClaims (`carpool.nodeclaims`, written by `carpool.app.nodeclaims`) against the real
kube-apiserver v1.24 with Karpenter v1.14.1's CRDs, side by side with the simulated API server: the object
carpool builds is accepted as sent (spec, labels, owner, finalizer, status and conditions pass the CRD's
schema and CEL rules), both servers store the same, a second pass finds nothing to patch (no write loop on
the real server's representation), `kubectl get nodeclaims` prints the claim's instance in Karpenter's
columns, and `release_nodeclaim` lets it go. Skips without KUBE_ENDPOINT."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from tests.integration.real_api import RealApi, ensure_karpenter_crds, real_api, unique

from carpool import labels, nodeclaims
from carpool.api.k8s import Node
from carpool.api.nodepool import NodePool
from carpool.app import nodeclaims as sync
from carpool.app.settings import Settings
from carpool.app.sources import StaticCatalogSource
from carpool.karpenter_objects import NODECLAIM, NODEPOOL, KarpenterObjects
from carpool.nodeclaims import ClaimFacts
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.sizing import size_node
from carpool.state.models import Claim, ClaimStatus

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io"
COLUMNS = ["Name", "Type", "Capacity", "Zone", "Node", "Ready", "Age", "ImageID", "ID", "NodePool", "NodeClass",
           "Drifted"]
#: what the server writes and carpool does not (compared apart)
SERVER_FIELDS = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields")


def pool_json(name: str) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": {
        "disruption": {"consolidateAfter": "10m"},
        "template": {"metadata": {"labels": {"team": "web"}}, "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5", "m6i"]},
                {"key": "node.kubernetes.io/instance-type", "operator": "Exists", "minValues": 2},
                {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["1"]}],
            "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
            "startupTaints": [{"key": "example.com/agent", "effect": "NoExecute"}],
            "expireAfter": "336h", "terminationGracePeriod": "30m"}}}}


CATALOG = StaticCatalogSource("us-east-1")


def facts(pool: NodePool, name: str, *, node: Node | None = None) -> ClaimFacts:
    claim = Claim(name=name, nodepool=pool.name, nodeclass="default", created_at=NOW - timedelta(minutes=5),
                  status=ClaimStatus.REGISTERED if node else ClaimStatus.LAUNCHED, instance_id="i-0abc",
                  instance_type="m5.large", zone="us-east-1a", capacity_type="spot", image_id="ami-0abc",
                  launched_at=NOW - timedelta(minutes=4), instance_types=["m5.large", "m6i.large", "m5.xlarge"],
                  requested={"cpu": 1500, "memory": 3 * 2**30, "pods": 4},
                  allocatable={"cpu": 1930, "memory": 6903 * 2**20, "pods": 29},
                  registered_at=NOW - timedelta(minutes=3) if node else None, node_name=node.name if node else None)
    # the instance type's labels and capacity as the registrar finds them (the catalog, `size_node`)
    it = CATALOG.get(NOW).types["m5.large"]
    return ClaimFacts(claim=claim, cluster="itest", pool=pool, now=NOW, type_labels=dict(it.labels),
                      capacity=size_node(it).capacity, node=node)


def joined(name: str) -> Node:
    return Node.model_validate({
        "metadata": {"name": name, "creationTimestamp": "2026-05-01T11:57:00Z",
                     "labels": {labels.REGISTERED: "true", labels.NODE_INITIALIZED: "true"}},
        "spec": {"providerID": "aws:///us-east-1a/i-0abc"},
        "status": {"capacity": {"cpu": "2", "memory": "7910Mi", "pods": "29"},
                   "allocatable": {"cpu": "1930m", "memory": "7200Mi", "pods": "29"},
                   "conditions": [{"type": "Ready", "status": "True"}]}})


class Side:
    """One server: carpool's adapter to it, and what the test made there (deleted afterwards)."""

    def __init__(self, objects: KarpenterObjects) -> None:
        self.objects = objects
        self.deps: Any = SimpleNamespace(karpenter=objects, settings=Settings(cluster_name="itest"), clock=lambda: NOW,
                                         catalog=CATALOG)
        self.made: list[tuple[Any, str]] = []

    def clean_up(self) -> None:
        for kind, name in reversed(self.made):
            try:
                if self.objects.get_object(kind, name) is not None:
                    self.objects.patch_object(kind, name, {"metadata": {"finalizers": None}})
                    self.objects.delete_object(kind, name)
            except Exception:  # noqa: BLE001 - best effort on the shared server
                pass


@pytest.fixture
def sides() -> Iterator[tuple[Side, Side, RealApi]]:
    with real_api() as api:
        ensure_karpenter_crds(api)
        real, simulated = Side(api.karpenter_objects()), Side(SimulatedCluster(lambda: NOW))
        yield real, simulated, api
        real.clean_up()


def without_server_fields(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in obj["metadata"].items() if k not in SERVER_FIELDS}
    meta["ownerReferences"] = [{k: v for k, v in o.items() if k != "uid"} for o in meta.get("ownerReferences") or []]
    return {**obj, "metadata": meta}


def test_a_launched_then_registered_nodeclaim_is_stored_as_built_on_both_servers(
        sides: tuple[Side, Side, RealApi]) -> None:
    real, simulated, api = sides
    pool_name, claim_name = unique("nodeclaims-pool"), unique("nodeclaims-claim")
    stored: dict[str, dict[str, Any]] = {}
    for label, side in (("real", real), ("simulated", simulated)):
        side.made.append((NODEPOOL, pool_name))
        side.objects.create_object(NODEPOOL, pool_json(pool_name))
        pool = NodePool.model_validate(pool_json(pool_name))
        launch = facts(pool, claim_name)
        side.made.append((NODECLAIM, claim_name))
        assert sync.launched(side.deps, [sync.Launched(launch.claim, pool, launch.type_labels, launch.capacity)],
                             NOW) == [], f"{label}: the NodeClaim was not written"
        after_launch = side.objects.get_object(NODECLAIM, claim_name)
        assert after_launch is not None
        assert not nodeclaims.changes(after_launch, launch), f"{label}: a second pass would patch again"
        registered = facts(pool, claim_name, node=joined("ip-10-0-1-2.ec2.internal"))
        assert sync.node_changed(side.deps, registered.claim, pool, registered.node, after_launch) is not None
        obj = side.objects.get_object(NODECLAIM, claim_name)
        assert obj is not None
        assert not nodeclaims.changes(obj, registered), f"{label}: a second pass would patch again"
        built = nodeclaims.build(registered)
        assert obj["spec"] == {**built["spec"], "resources": built["spec"]["resources"]}, label
        assert obj["metadata"]["ownerReferences"][0]["uid"] == side.objects.get_object(
            NODEPOOL, pool_name)["metadata"]["uid"]
        stored[label] = without_server_fields(obj)
    assert stored["real"]["spec"] == stored["simulated"]["spec"]
    assert stored["real"]["metadata"] == stored["simulated"]["metadata"]
    # conditions: the real server's transition times are the ones carpool wrote, as the simulated server's
    assert stored["real"]["status"] == stored["simulated"]["status"]

    answer = api.request("GET", NODECLAIM.path, headers={"Accept": TABLE_ACCEPT},
                         params={"fieldSelector": f"metadata.name={claim_name}"})
    assert answer.status_code == 200, answer.text
    (row,) = answer.json()["rows"]
    cells = dict(zip(COLUMNS, row["cells"], strict=True))
    assert {k: v for k, v in cells.items() if k != "Age"} == {
        "Name": claim_name, "Type": "m5.large", "Capacity": "spot", "Zone": "us-east-1a",
        "Node": "ip-10-0-1-2.ec2.internal", "Ready": "True", "ImageID": "ami-0abc", "ID": "aws:///us-east-1a/i-0abc",
        "NodePool": pool_name, "NodeClass": "default", "Drifted": None}


def test_release_lets_the_nodeclaim_go_on_the_real_server(sides: tuple[Side, Side, RealApi]) -> None:
    real, _, _ = sides
    pool = NodePool.model_validate(pool_json(unique("nodeclaims-pool")))
    launch = facts(pool, unique("nodeclaims-claim"))
    real.made.append((NODECLAIM, launch.claim.name))
    assert sync.launched(real.deps, [sync.Launched(launch.claim, pool)], NOW) == []
    real.objects.delete_object(NODECLAIM, launch.claim.name)
    held = real.objects.get_object(NODECLAIM, launch.claim.name)
    assert held is not None and held["metadata"].get("deletionTimestamp"), "the finalizer holds a deleted NodeClaim"

    assert sync.release_nodeclaim(real.deps, launch.claim.name)

    assert real.objects.get_object(NODECLAIM, launch.claim.name) is None
