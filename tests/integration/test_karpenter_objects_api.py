"""Karpenter's objects through the lightkube adapter (`LightkubeKarpenterObjects`, `LightkubeCluster.watch`),
side by side: against the simulated API server (always) and against the real kube-apiserver v1.24 with
Karpenter v1.14.1's CRDs loaded (`real_api.py`; skipped without KUBE_ENDPOINT).

The same answers from both: a NodePool created gets the CRD's defaults and loses the fields its schema does
not know; one the schema refuses is `ObjectInvalid` naming the field; `generation` moves on a spec change
only, never on a status write; `status` is the status subresource's alone; a NodeClaim with Karpenter's
termination finalizer stays, `deletionTimestamp` set, until the finalizer goes; ownerReferences kept;
get/list/404/409; a kind no CRD serves is `KindNotServed`; the watch of a NodePool; and `kubectl get
nodeclaims`' table (Karpenter's printer columns). On the real server only (the simulated one has no RBAC):
carpool's own user with `infra/rbac.yaml` bound can do what carpool does and no more."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx2
import pytest
from lightkube import ApiError
from real_api import LIMITED_TOKEN, RealApi, bound_cluster_role, ensure_karpenter_crds, real_api, unique

from carpool.adapters.k8s.cluster import LightkubeCluster
from carpool.adapters.k8s.karpenter_objects import LightkubeKarpenterObjects
from carpool.karpenter_objects import (
    EC2NODECLASS,
    NODECLAIM,
    NODEPOOL,
    TERMINATION_FINALIZER,
    KindNotServed,
    ObjectConflict,
    ObjectGone,
    ObjectInvalid,
    ObjectKind,
)
from carpool.sim.cluster.apiserver import SimApiServer
from carpool.sim.cluster.simulated import SimulatedCluster

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
PREFIX = "objects-adapter"
#: `kubectl get nodeclaims` (and `-o wide`): the Table the server builds from the CRD's printer columns
TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io"
NODECLAIM_COLUMNS = ["Name", "Type", "Capacity", "Zone", "Node", "Ready", "Age", "ImageID", "ID", "NodePool",
                     "NodeClass", "Drifted"]
CLASS_REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


@dataclass
class Api:
    """One API server as a test sees it: raw requests as an admin, carpool's adapters, what it made."""

    real: RealApi
    simulated: SimulatedCluster | None = None
    server: SimApiServer | None = None
    made: list[tuple[ObjectKind, str]] = field(default_factory=list)

    @property
    def is_real(self) -> bool:
        return self.simulated is None

    def objects(self, token: str | None = None) -> LightkubeKarpenterObjects:
        return self.real.karpenter_objects(token)

    def cluster(self, token: str | None = None) -> LightkubeCluster:
        return self.real.cluster(token)

    def name(self, what: str) -> str:
        return unique(f"{PREFIX}-{what}")

    def create(self, kind: ObjectKind, obj: dict[str, Any]) -> dict[str, Any]:
        """Create through the adapter; remembered, so the test's teardown deletes it."""
        self.made.append((kind, obj["metadata"]["name"]))
        return self.objects().create_object(kind, obj)

    def clean_up(self) -> None:
        """Every object the test made goes, finalizers first (nothing left on the shared server)."""
        objects = self.objects()
        for kind, name in reversed(self.made):
            try:
                if objects.get_object(kind, name) is not None:
                    objects.patch_object(kind, name, {"metadata": {"finalizers": None}})
                    objects.delete_object(kind, name)
            except (ObjectGone, KindNotServed):
                pass


@pytest.fixture
def simulated() -> Iterator[Api]:
    cluster = SimulatedCluster(lambda: NOW)
    with SimApiServer(cluster) as server, httpx2.Client() as http:
        yield Api(RealApi(server.url, "", "k8s-aws-v1.test", http), simulated=cluster, server=server)


@pytest.fixture
def real() -> Iterator[Api]:
    with real_api() as api:
        ensure_karpenter_crds(api)
        made = Api(api)
        yield made
        made.clean_up()


@pytest.fixture(params=["simulated", "real"])
def api(request: pytest.FixtureRequest) -> Api:
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


def nodepool(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"template": {"spec": {"nodeClassRef": CLASS_REF, "requirements": []}}, **spec}}


def nodeclaim(name: str, labels: dict[str, str] | None = None, **metadata: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}, **metadata},
            "spec": {"nodeClassRef": CLASS_REF, "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}]}}


def condition(kind: str, status: str = "True", reason: str | None = None) -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason or kind, "message": "",
            "lastTransitionTime": "2026-05-01T12:00:00Z", "observedGeneration": 1}


# -- create: defaults, pruning, refusals ---------------------------------------------------------------------
def test_a_nodepool_is_created_with_the_crds_defaults_and_without_unknown_fields(api: Api) -> None:
    name = api.name("defaults")
    body = nodepool(name)
    body["spec"]["surprise"] = "pruned"
    body["status"] = {"nodes": 3}
    created = api.create(NODEPOOL, body)
    assert created["apiVersion"] == "karpenter.sh/v1" and created["kind"] == "NodePool"
    meta = created["metadata"]
    assert meta["generation"] == 1 and meta["uid"] and meta["resourceVersion"] and meta["creationTimestamp"]
    assert created["spec"]["disruption"] == {"consolidateAfter": "0s", "consolidationPolicy": "WhenEmptyOrUnderutilized",
                                             "budgets": [{"nodes": "10%"}]}
    assert created["spec"]["template"]["spec"]["expireAfter"] == "720h"
    assert "surprise" not in created["spec"], "unknown fields are pruned"
    assert "status" not in created or created["status"] == {}, "status belongs to the status subresource"
    assert api.objects().get_object(NODEPOOL, name) == created


def test_a_nodepool_the_schema_refuses_is_invalid_naming_the_field(api: Api) -> None:
    name = api.name("refused")
    with pytest.raises(ObjectInvalid) as refused:
        api.create(NODEPOOL, nodepool(name, weight=200))
    assert refused.value.name == name
    assert "spec.weight" in refused.value.message and "less than or equal to 100" in refused.value.message
    with pytest.raises(ObjectInvalid) as enum:
        api.create(NODEPOOL, nodepool(name, disruption={"consolidationPolicy": "Sometimes"}))
    assert "spec.disruption.consolidationPolicy" in enum.value.message and "Sometimes" in enum.value.message
    assert api.objects().get_object(NODEPOOL, name) is None, "nothing is kept of a refused object"


def test_a_create_of_a_name_that_exists_is_a_conflict(api: Api) -> None:
    name = api.name("twice")
    api.create(NODEPOOL, nodepool(name))
    with pytest.raises(ObjectConflict) as refused:
        api.objects().create_object(NODEPOOL, nodepool(name, weight=3))
    assert "already exists" in str(refused.value)
    assert "weight" not in api.objects().get_object(NODEPOOL, name)["spec"]  # type: ignore[index]


# -- reads ---------------------------------------------------------------------------------------------------
def test_list_and_get_and_what_is_not_there(api: Api) -> None:
    names = sorted(api.name(f"list{i}") for i in range(3))
    for name in names:
        api.create(NODEPOOL, nodepool(name))
    listed = api.objects().list_objects(NODEPOOL)
    mine = [o["metadata"]["name"] for o in listed.items if o["metadata"]["name"] in names]
    assert mine == names, "in name order"
    assert int(listed.resource_version) >= max(int(o["metadata"]["resourceVersion"]) for o in listed.items)
    assert all("managedFields" not in o["metadata"] for o in listed.items)
    objects = api.objects()
    assert objects.get_object(NODEPOOL, api.name("missing")) is None
    with pytest.raises(ObjectGone):
        objects.patch_object(NODEPOOL, api.name("missing"), {"spec": {"weight": 1}})
    with pytest.raises(ObjectGone):
        objects.patch_status(NODEPOOL, api.name("missing"), {"nodes": 1})
    objects.delete_object(NODEPOOL, api.name("missing"))  # already gone: deleted


def not_served(api: Api) -> ObjectKind:
    """A kind the server does not serve: on the real server a group no CRD defines; on the simulated one
    NodeClaim, its CRD marked not installed (`KarpenterStore.installed`)."""
    if api.is_real:
        return ObjectKind("objects-adapter.example.com", "v1", "Widget", "widgets")
    assert api.simulated is not None
    api.simulated.karpenter.installed.discard(NODECLAIM)
    return NODECLAIM


def test_a_kind_no_crd_serves_is_kind_not_served(api: Api) -> None:
    kind = not_served(api)
    objects = api.objects()
    with pytest.raises(KindNotServed) as refused:
        objects.list_objects(kind)
    assert kind.plural in str(refused.value) and "install Karpenter's CRDs" in str(refused.value)
    for call in (lambda: objects.get_object(kind, "x"), lambda: objects.create_object(kind, {"metadata": {"name": "x"}}),
                 lambda: objects.patch_object(kind, "x", {"spec": {}}), lambda: objects.delete_object(kind, "x")):
        with pytest.raises(KindNotServed):
            call()


# -- generation, status, preconditions ------------------------------------------------------------------------
def test_generation_moves_on_a_spec_change_only_and_status_is_its_subresources(api: Api) -> None:
    name = api.name("generation")
    created = api.create(NODEPOOL, nodepool(name))
    objects = api.objects()
    labelled = objects.patch_object(NODEPOOL, name, {"metadata": {"labels": {"team": "a"}}})
    assert labelled["metadata"]["generation"] == 1 and labelled["metadata"]["labels"] == {"team": "a"}
    assert int(labelled["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    weighted = objects.patch_object(NODEPOOL, name, {"spec": {"weight": 7}, "status": {"nodes": 9}})
    assert weighted["metadata"]["generation"] == 2 and weighted["spec"]["weight"] == 7
    assert weighted.get("status", {}).get("nodes") is None, "a status in a main-resource patch is ignored"
    status = {"nodes": 2, "resources": {"cpu": "4", "memory": "16Gi", "nodes": "2", "pods": "58"},
              "conditions": [condition("Ready")]}
    written = objects.patch_status(NODEPOOL, name, status, resource_version=weighted["metadata"]["resourceVersion"])
    assert written["metadata"]["generation"] == 2, "a status write leaves generation"
    assert written["status"]["nodes"] == 2 and written["status"]["conditions"][0]["type"] == "Ready"
    assert written["spec"] == weighted["spec"]
    again = objects.patch_object(NODEPOOL, name, {"spec": {"weight": 8}})
    assert again["status"] == written["status"], "a spec write leaves status"


def test_a_stale_resource_version_is_a_conflict_on_spec_and_status(api: Api) -> None:
    name = api.name("stale")
    created = api.create(NODEPOOL, nodepool(name))
    objects = api.objects()
    objects.patch_object(NODEPOOL, name, {"spec": {"weight": 1}})
    stale = created["metadata"]["resourceVersion"]
    with pytest.raises(ObjectConflict) as refused:
        objects.patch_object(NODEPOOL, name, {"spec": {"weight": 2}}, resource_version=stale)
    assert "the object has been modified" in str(refused.value)
    with pytest.raises(ObjectConflict):
        objects.patch_status(NODEPOOL, name, {"nodes": 1}, resource_version=stale)
    assert objects.get_object(NODEPOOL, name)["spec"]["weight"] == 1  # type: ignore[index]


def test_a_status_the_status_schema_refuses_is_invalid(api: Api) -> None:
    name = api.name("badstatus")
    api.create(NODEPOOL, nodepool(name))
    with pytest.raises(ObjectInvalid) as refused:
        api.objects().patch_status(NODEPOOL, name, {"nodes": "two", "conditions": [{"type": "Ready", "status": "Maybe"}]})
    message = refused.value.message
    assert "status.nodes" in message and "must be of type integer" in message
    assert "status.conditions" in message and "Maybe" in message and "Required value" in message
    assert api.objects().get_object(NODEPOOL, name).get("status") in (None, {}), "nothing of it is kept"  # type: ignore[union-attr]


# -- NodeClaims: finalizer, owner -----------------------------------------------------------------------------
def test_the_termination_finalizer_keeps_a_deleted_nodeclaim_until_it_is_removed(api: Api) -> None:
    name = api.name("finalized")
    created = api.create(NODECLAIM, nodeclaim(name, finalizers=[TERMINATION_FINALIZER]))
    objects = api.objects()
    objects.delete_object(NODECLAIM, name)
    held = objects.get_object(NODECLAIM, name)
    assert held is not None and held["metadata"]["deletionTimestamp"]
    assert held["metadata"]["finalizers"] == [TERMINATION_FINALIZER]
    assert held["metadata"]["deletionGracePeriodSeconds"] == 0
    assert held["metadata"]["generation"] == created["metadata"]["generation"] + 1, "marking it deleting bumps it"
    objects.delete_object(NODECLAIM, name)  # a second delete changes nothing
    assert objects.get_object(NODECLAIM, name)["metadata"]["resourceVersion"] == held["metadata"]["resourceVersion"]  # type: ignore[index]
    with pytest.raises(ObjectInvalid) as refused:
        objects.patch_object(NODECLAIM, name, {"metadata": {"finalizers": [TERMINATION_FINALIZER, "example.com/more"]}})
    assert "finalizers" in refused.value.message
    objects.patch_object(NODECLAIM, name, {"metadata": {"finalizers": None}})
    assert objects.get_object(NODECLAIM, name) is None, "the last finalizer gone, the object goes"


def test_a_nodeclaim_keeps_its_owner_reference(api: Api) -> None:
    pool_name, claim_name = api.name("owner"), api.name("owned")
    pool = api.create(NODEPOOL, nodepool(pool_name))
    owner = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": pool_name, "uid": pool["metadata"]["uid"],
             "controller": True, "blockOwnerDeletion": True}
    claim = api.create(NODECLAIM, nodeclaim(claim_name, {"karpenter.sh/nodepool": pool_name}, ownerReferences=[owner]))
    assert claim["metadata"]["ownerReferences"] == [owner]
    assert claim["metadata"]["labels"] == {"karpenter.sh/nodepool": pool_name}


def test_a_nodeclaims_status_as_karpenter_writes_it(api: Api) -> None:
    name = api.name("status")
    api.create(NODECLAIM, nodeclaim(name))
    status = {"providerID": "aws:///us-east-1a/i-0123456789abcdef0", "nodeName": "ip-10-0-1-2.ec2.internal",
              "imageID": "ami-0123456789abcdef0", "capacity": {"cpu": "2", "memory": "7577Mi", "pods": "29"},
              "allocatable": {"cpu": "1930m", "memory": "6903Mi", "pods": "29"},
              "conditions": [condition("Launched"), condition("Registered"), condition("Initialized"),
                             condition("Ready")]}
    written = api.objects().patch_status(NODECLAIM, name, status)
    assert written["status"] == status
    assert written["metadata"]["generation"] == 1


# -- the watch ------------------------------------------------------------------------------------------------
def _later(do: Callable[[], None], after: float = 0.6) -> threading.Thread:
    def run() -> None:
        time.sleep(after)
        do()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _watched_pool(api: Api, name: str, changes: Callable[[], None]) -> list[Any]:
    """The NodePool events of `name` that `LightkubeCluster.watch` delivers (NodePool named beside the
    watcher's pods and nodes, from their lists' versions) while `changes` runs in another thread."""
    adapter = api.cluster()
    adapter.pending_pods()
    adapter.node_names()
    versions = {**adapter.resource_versions, "NodePool": api.objects().list_objects(NODEPOOL).resource_version}
    thread = _later(changes)
    events = [e for e in adapter.watch(versions, timeout_seconds=3) if e is not None
              and e.kind == "NodePool" and e.obj["metadata"]["name"] == name]  # type: ignore[index]
    thread.join()
    if events:
        assert int(adapter.resource_versions["NodePool"]) >= int(events[-1].resource_version or 0)
    return events


def test_the_watch_of_a_nodepool_sees_it_added_modified_and_deleted(api: Api) -> None:
    name = api.name("watched")
    objects = api.objects()

    def changes() -> None:  # each a moment apart: a watcher sees each state
        api.create(NODEPOOL, nodepool(name))
        time.sleep(0.3)
        objects.patch_object(NODEPOOL, name, {"spec": {"weight": 4}})
        time.sleep(0.3)
        objects.delete_object(NODEPOOL, name)

    events = _watched_pool(api, name, changes)
    assert [(e.type, e.obj["metadata"].get("generation")) for e in events] == [  # type: ignore[union-attr]
        ("ADDED", 1), ("MODIFIED", 2), ("DELETED", 2)]
    assert all(isinstance(e.obj, dict) and e.resource_version == e.obj["metadata"]["resourceVersion"] for e in events)
    assert events[1].obj["spec"]["weight"] == 4  # type: ignore[index]


def test_the_watch_delivers_every_change_even_in_quick_succession(api: Api) -> None:
    """kube-apiserver's watch cache streams each change with the object as it was then; a watcher never
    misses a state because the next came soon after (the NodeClaim that is marked deleting, then goes)."""
    name = api.name("quick")

    def changes() -> None:
        with api.server.lock if api.server is not None else contextlib.nullcontext():  # within one poll
            objects: Any = api.simulated if api.simulated is not None else api.objects()
            api.made.append((NODEPOOL, name))
            objects.create_object(NODEPOOL, nodepool(name))
            objects.patch_object(NODEPOOL, name, {"spec": {"weight": 4}})
            objects.delete_object(NODEPOOL, name)

    events = _watched_pool(api, name, changes)
    assert [(e.type, e.obj["metadata"].get("generation")) for e in events] == [  # type: ignore[union-attr]
        ("ADDED", 1), ("MODIFIED", 2), ("DELETED", 2)]


# -- kubectl get nodeclaims -----------------------------------------------------------------------------------
def test_kubectl_get_nodeclaims_prints_karpenters_columns(api: Api) -> None:
    name = api.name("table")
    api.create(NODECLAIM, nodeclaim(name, {"node.kubernetes.io/instance-type": "m5.large",
                                           "karpenter.sh/capacity-type": "spot",
                                           "topology.kubernetes.io/zone": "us-east-1a",
                                           "karpenter.sh/nodepool": "default"}))
    api.objects().patch_status(NODECLAIM, name, {"nodeName": "ip-10-0-1-2.ec2.internal",
                                                 "providerID": "aws:///us-east-1a/i-0abc",
                                                 "imageID": "ami-0abc",
                                                 "conditions": [condition("Ready"), condition("Drifted", "False")]})
    answer = api.real.request("GET", NODECLAIM.path, headers={"Accept": TABLE_ACCEPT},
                              params={"fieldSelector": f"metadata.name={name}"})
    assert answer.status_code == 200, answer.text
    table = answer.json()
    assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    columns = table["columnDefinitions"]
    assert [c["name"] for c in columns] == NODECLAIM_COLUMNS
    assert [c["name"] for c in columns if c["priority"] == 0] == ["Name", "Type", "Capacity", "Zone", "Node", "Ready",
                                                                  "Age"], "what `kubectl get` shows without -o wide"
    (row,) = table["rows"]
    cells = dict(zip(NODECLAIM_COLUMNS, row["cells"], strict=True))
    assert {k: v for k, v in cells.items() if k != "Age"} == {
        "Name": name, "Type": "m5.large", "Capacity": "spot", "Zone": "us-east-1a", "Node": "ip-10-0-1-2.ec2.internal",
        "Ready": "True", "ImageID": "ami-0abc", "ID": "aws:///us-east-1a/i-0abc", "NodePool": "default",
        "NodeClass": "default", "Drifted": "False"}
    assert row["object"]["metadata"]["name"] == name


# -- carpool's own user, on the real server ------------------------------------------------------------------
def _eventually(call: Callable[[], Any]) -> Any:
    """The authorizer follows a new binding within moments."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return call()
        except ApiError as e:
            if e.status.code != 403 or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _forbidden(call: Callable[[], Any]) -> str:
    with pytest.raises(ApiError) as refused:
        call()
    assert refused.value.status.code == 403, refused.value
    return str(refused.value)


def test_carpools_user_with_the_cluster_role_does_what_carpool_does_and_no_more(real: Api) -> None:
    pool_name, claim_name, class_name = real.name("rbac-pool"), real.name("rbac-claim"), real.name("rbac-class")
    real.create(NODEPOOL, nodepool(pool_name))
    real.made.append((NODECLAIM, claim_name))
    with bound_cluster_role(real.real):
        carpool = real.objects(LIMITED_TOKEN)
        listed = _eventually(lambda: carpool.list_objects(NODEPOOL))
        assert pool_name in [o["metadata"]["name"] for o in listed.items]
        carpool.list_objects(EC2NODECLASS)
        assert carpool.patch_status(NODEPOOL, pool_name, {"nodes": 0})["status"]["nodes"] == 0
        claim = carpool.create_object(NODECLAIM, nodeclaim(claim_name, finalizers=[TERMINATION_FINALIZER]))
        carpool.patch_object(NODECLAIM, claim_name, {"metadata": {"labels": {"karpenter.sh/registered": "true"}}},
                             resource_version=claim["metadata"]["resourceVersion"])
        carpool.patch_status(NODECLAIM, claim_name, {"conditions": [condition("Launched")]})
        carpool.delete_object(NODECLAIM, claim_name)
        carpool.patch_object(NODECLAIM, claim_name, {"metadata": {"finalizers": None}})
        assert carpool.get_object(NODECLAIM, claim_name) is None

        assert "cannot delete resource" in _forbidden(lambda: carpool.delete_object(NODEPOOL, pool_name))
        assert "cannot patch resource" in _forbidden(lambda: carpool.patch_object(NODEPOOL, pool_name,
                                                                                   {"spec": {"weight": 1}}))
        _forbidden(lambda: carpool.create_object(NODEPOOL, nodepool(real.name("rbac-new"))))
        _forbidden(lambda: carpool.create_object(EC2NODECLASS, {"metadata": {"name": class_name}, "spec": {}}))
        assert real.objects().get_object(NODEPOOL, pool_name)["metadata"].get("deletionTimestamp") is None  # type: ignore[index]
