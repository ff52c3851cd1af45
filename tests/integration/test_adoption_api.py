"""A Karpenter-created NodeClaim, as the API server holds it, adopted without a replacement: side by side on
the simulated API server (always) and the real kube-apiserver with Karpenter's CRDs loaded (skipped without
KUBE_ENDPOINT: `../shared/kube-apiserver`, then `source <RUN>/env`).

The NodePool, EC2NodeClass and NodeClaim are written as Karpenter v1.14.1 writes them
(`carpool.sim.cluster.karpenter_built`: its hash annotations, the NodeClaim's status through the status
subresource) and a Node as its registration leaves it; the server applies the CRDs' defaults and refuses what
their schema refuses, so the shapes the simulation seeds are held to the real CRDs. What the server then
answers is what `carpool.adoption` reads: a REGISTERED claim from the NodeClaim's fields, in step with its
pool (Karpenter's hash of it, computed from the object as the server holds it, defaults applied) and class
(its annotation, the generation observed); and a pool edited afterwards judged by its hash anew. Every object is named `migration-...`
and deleted after."""

from __future__ import annotations

import base64
import os
import ssl
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2
import pytest
from real_api import ensure_karpenter_crds, real_api

from carpool import adoption, karpenter_hash
from carpool import labels as L
from carpool.api.k8s import Node
from carpool.karpenter_objects import EC2NODECLASS, NODECLAIM, NODEPOOL, ObjectKind
from carpool.sim.cluster import karpenter_built as kb
from carpool.sim.cluster.apiserver import SimApiServer
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.state.models import ClaimStatus

ENDPOINT = os.environ.get("KUBE_ENDPOINT", "")
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
IID = "i-0abc1234567890def"
MERGE = {"Content-Type": "application/merge-patch+json"}
NODECLASS_HASH = "1234567890123456"


class Api:
    """One API server as the test sees it; `cluster` is the simulated one behind it (None for the real)."""

    def __init__(self, endpoint: str, http: httpx2.Client, token: str, cluster: SimulatedCluster | None = None) -> None:
        self.endpoint, self.http, self.token, self.cluster = endpoint, http, token, cluster

    def request(self, method: str, path: str, body: dict[str, Any] | None = None,
                headers: dict[str, str] | None = None) -> httpx2.Response:
        return self.http.request(method, f"{self.endpoint}{path}", json=body,
                                 headers={"Authorization": f"Bearer {self.token}", **(headers or {})})

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = self.request("POST", path, body)
        assert answer.status_code == 201, answer.text
        return dict(answer.json())

    def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = self.request("PATCH", path, body, MERGE)
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def add_node(self, node: dict[str, Any]) -> None:
        """The Node as its kubelet registers it (POST, then its status); the simulated server takes no
        Node POST, its kubelets add theirs to the cluster."""
        if self.cluster is not None:
            self.cluster.add_node(node)
            return
        status = node.pop("status")
        self.create("/api/v1/nodes", node)
        self.patch(f"/api/v1/nodes/{node['metadata']['name']}/status", {"status": status})


@pytest.fixture(params=["simulated", "real"])
def api(request: pytest.FixtureRequest) -> Iterator[Api]:
    if request.param == "simulated":
        cluster = SimulatedCluster(lambda: NOW)
        with SimApiServer(cluster) as server, httpx2.Client() as http:
            yield Api(server.url, http, "k8s-aws-v1.test", cluster)
        return
    if not ENDPOINT:
        pytest.skip("needs a real kube-apiserver with Karpenter's CRDs (KUBE_ENDPOINT)")
    with real_api() as server:  # a fresh server has no CRDs until a test installs them
        ensure_karpenter_crds(server)
    ca_file = os.environ["KUBE_CA_FILE"]
    with httpx2.Client(verify=ssl.create_default_context(cafile=ca_file)) as http:
        assert base64.b64encode(Path(ca_file).read_bytes())
        yield Api(ENDPOINT, http, os.environ["KUBE_TOKEN"])


def _as_karpenter_left_it(api: Api, kind: ObjectKind, doc: dict[str, Any]) -> dict[str, Any]:
    """Create the object, then its hash annotations (a NodePool's: Karpenter's hash of its template as the
    server holds it, defaults applied) and a Ready condition observed at its generation."""
    stored = api.create(kind.path, doc)
    figure = karpenter_hash.nodepool_hash(stored) if kind is NODEPOOL else ""
    prefix = "karpenter.sh/" if kind is NODEPOOL else "karpenter.k8s.aws/"
    hashes = {k: v for k, v in kb.hash_annotations(figure or "", NODECLASS_HASH).items() if k.startswith(prefix)}
    name = doc["metadata"]["name"]
    api.patch(f"{kind.path}/{name}", {"metadata": {"annotations": hashes}})
    condition = {"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                 "lastTransitionTime": "2026-05-01T11:00:00Z", "observedGeneration": stored["metadata"]["generation"]}
    return api.patch(f"{kind.path}/{name}/status", {"status": {"conditions": [condition]}})


@pytest.fixture
def karpenters(api: Api) -> Iterator[tuple[Api, str]]:
    """A NodePool, its EC2NodeClass, one NodeClaim and its Node, as Karpenter leaves them; their names'
    suffix."""
    suffix = uuid.uuid4().hex[:6]
    pool_name, class_name, claim_name, node_name = (f"migration-{suffix}", f"migration-{suffix}",
                                                    f"migration-{suffix}-x7k2p", f"migration-{suffix}.ec2.internal")
    created: list[str] = []
    try:
        klass = {"apiVersion": EC2NODECLASS.api_version, "kind": EC2NODECLASS.kind, "metadata": {"name": class_name},
                 "spec": {"role": "KarpenterNodeRole-migration", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                          "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "migration"}}],
                          "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "migration"}}]}}
        _as_karpenter_left_it(api, EC2NODECLASS, klass)
        created.append(f"{EC2NODECLASS.path}/{class_name}")
        pool = {"apiVersion": NODEPOOL.api_version, "kind": NODEPOOL.kind, "metadata": {"name": pool_name},
                "spec": {"template": {"spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class_name},
                    "requirements": [{"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}]}}}}
        stored_pool = _as_karpenter_left_it(api, NODEPOOL, pool)
        # the NodeClaim stamped with its pool's and class's hashes of the moment, as Karpenter creates it
        hashes = kb.hash_annotations(stored_pool["metadata"]["annotations"][adoption.HASH_ANNOTATION], NODECLASS_HASH)
        created.append(f"{NODEPOOL.path}/{pool_name}")
        claim = api.create(NODECLAIM.path, kb.nodeclaim(claim_name, stored_pool, "m5.xlarge", "us-east-1b",
                                                        "on-demand", hashes))
        created.append(f"{NODECLAIM.path}/{claim_name}")
        capacity = {"cpu": "4", "memory": "15896Mi", "pods": "58", "ephemeral-storage": "20Gi"}
        allocatable = {"cpu": "3920m", "memory": "14962Mi", "pods": "58", "ephemeral-storage": "17Gi"}
        api.patch(f"{NODECLAIM.path}/{claim_name}/status", {"status": kb.nodeclaim_status(
            IID, "us-east-1b", "ami-0123456789abcdef0", node_name, capacity, allocatable, NOW)})
        node = kb.karpenter_node({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": node_name, "labels": {}},
            "spec": {"providerID": f"aws:///us-east-1b/{IID}"},
            "status": {"capacity": capacity, "allocatable": allocatable, "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready",
                 "lastHeartbeatTime": "2026-05-01T11:59:00Z", "lastTransitionTime": "2026-05-01T11:00:00Z"}]}}, claim)
        node["metadata"].pop("finalizers")  # nothing here would remove Karpenter's finalizer at the clean-up
        api.add_node(node)
        created.append(f"/api/v1/nodes/{node_name}")
        yield api, suffix
    finally:
        for path in reversed(created):
            if path.startswith(NODECLAIM.path):
                api.request("PATCH", path, {"metadata": {"finalizers": None}}, MERGE)
            api.request("DELETE", path)


def test_a_karpenter_nodeclaim_as_the_server_holds_it_is_adopted_in_step_and_registered(
        karpenters: tuple[Api, str]) -> None:
    api, suffix = karpenters
    mine = f"migration-{suffix}"
    nodeclaims = [o for o in api.request("GET", NODECLAIM.path).json()["items"]
                  if o["metadata"]["name"].startswith(mine)]
    pools = {o["metadata"]["name"]: o for o in api.request("GET", NODEPOOL.path).json()["items"]}
    classes = {o["metadata"]["name"]: o for o in api.request("GET", EC2NODECLASS.path).json()["items"]}
    nodes = [Node.model_validate(n) for n in api.request("GET", "/api/v1/nodes").json()["items"]
             if n["metadata"]["name"].startswith(mine)]
    (nodeclaim,) = nodeclaims
    assert nodeclaim["spec"]["expireAfter"] == "720h"  # the CRD's default, applied by the server
    decisions = adoption.decide(nodeclaims, [], nodes, NOW, adoption.Surroundings(
        pools, classes, {(mine, mine): "carpool-spec-hash"}))
    assert decisions.refused == [] and decisions.waiting == {}
    (adopting,) = decisions.adoptions
    claim = adopting.claim
    assert (claim.name, claim.nodepool, claim.nodeclass, claim.status) == (
        f"{mine}-x7k2p", mine, mine, ClaimStatus.REGISTERED)
    assert (claim.instance_id, claim.instance_type, claim.zone, claim.capacity_type, claim.image_id) == (
        IID, "m5.xlarge", "us-east-1b", "on-demand", "ami-0123456789abcdef0")
    assert claim.node_name == f"{mine}.ec2.internal" and claim.reserved["cpu"] == 4000 and claim.reserved["nodes"] == 1
    assert claim.created_at == datetime.fromisoformat(nodeclaim["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    assert claim.adopted is not None and claim.adopted.uid == nodeclaim["metadata"]["uid"]
    assert claim.adopted.expire_after == "720h"
    assert claim.spec_hash == "carpool-spec-hash" and "Karpenter's hashes agree" in adopting.why
    assert f"hash {karpenter_hash.nodepool_hash(pools[mine])} (computed)" in adopting.why


def test_a_nodepool_edited_after_karpenter_stopped_is_judged_by_karpenters_hash_of_it(
        karpenters: tuple[Api, str]) -> None:
    """The pool's annotation is stale once its spec changed (Karpenter no longer runs to rewrite it); carpool's
    own figure of Karpenter's hash sees a template change as drift and a change elsewhere as none."""
    api, suffix = karpenters
    mine = f"migration-{suffix}"
    (nodeclaim,) = [o for o in api.request("GET", NODECLAIM.path).json()["items"]
                    if o["metadata"]["name"].startswith(mine)]
    klass = api.request("GET", f"{EC2NODECLASS.path}/{mine}").json()
    limited = api.patch(f"{NODEPOOL.path}/{mine}", {"spec": {"limits": {"cpu": "1000"}}})
    assert limited["metadata"]["generation"] == 2  # a spec change: the server bumps it, the conditions saw 1
    assert adoption.drift_baseline(nodeclaim, limited, klass, "carpool-spec-hash")[0] == "carpool-spec-hash"
    edited = api.patch(f"{NODEPOOL.path}/{mine}", {"spec": {"template": {"metadata": {"labels": {"team": "a"}}}}})
    spec_hash, why = adoption.drift_baseline(nodeclaim, edited, klass, "carpool-spec-hash")
    assert spec_hash == adoption.KARPENTER_DRIFTED and "(computed)" in why
