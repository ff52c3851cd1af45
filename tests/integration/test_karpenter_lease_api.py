"""Reading Karpenter's leader-election Lease through the lightkube adapter (`Cluster.get_lease`), side by
side: against the simulated API server (always), and against the real kube-apiserver of
`../shared/kube-apiserver` (skipped without KUBE_ENDPOINT: `start.sh`, then `source <RUN>/env`).

The same answers from both: no Lease is None; a Lease created through the API is read with its holder and
its MicroTime `renewTime`; a time without microseconds is refused (400). On the real server only (the
simulated one has no RBAC): carpool's own user (`carpool-limited-token`, group `carpool-controller`) is
refused with 403 until `infra/rbac.yaml`'s Lease Role is bound to its group in Karpenter's namespace, and
the adapter says so as `LeaseForbidden` naming the permission; bound, it reads Karpenter's Lease there and
no other."""

from __future__ import annotations

import base64
import os
import ssl
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml

from carpool.adapters.k8s.cluster import ClusterAccess, LightkubeCluster
from carpool.karpenter_lease import LEASE_NAME, Lease, is_active
from carpool.ports import LeaseForbidden
from carpool.sim.cluster.apiserver import SimApiServer
from carpool.sim.cluster.simulated import SimulatedCluster

ENDPOINT = os.environ.get("KUBE_ENDPOINT", "")
ROOT = Path(__file__).resolve().parents[2]
HOLDER = "karpenter-5d8f9c7b6d-x2x7q_6f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a0b"
RENEWED = "2026-05-01T12:00:02.123456Z"
NOW = datetime(2026, 5, 1, 12, 0, 5, tzinfo=UTC)


class Token:
    stale = False

    def __init__(self, token: str) -> None:
        self._token = token

    def token(self) -> str:
        return self._token


def lease_body(name: str = LEASE_NAME, renewed: str = RENEWED) -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
            "spec": {"holderIdentity": HOLDER, "leaseDurationSeconds": 15, "acquireTime": "2026-05-01T11:00:00.000000Z",
                     "renewTime": renewed, "leaseTransitions": 0}}


class Api:
    """One API server as a test sees it: the adapter for a token, and raw requests as an admin."""

    def __init__(self, endpoint: str, ca_data: str, http: httpx2.Client, admin_token: str) -> None:
        self.endpoint, self.ca_data, self.http, self.admin = endpoint, ca_data, http, admin_token

    def adapter(self, token: str | None = None) -> LightkubeCluster:
        return LightkubeCluster("c", "us-east-1", access=ClusterAccess(self.endpoint, self.ca_data),
                                tokens=Token(token or self.admin))

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> httpx2.Response:
        return self.http.request(method, f"{self.endpoint}{path}", json=body,
                                 headers={"Authorization": f"Bearer {self.admin}"})

    def create_lease(self, namespace: str, body: dict[str, Any]) -> httpx2.Response:
        return self.request("POST", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", body)


@pytest.fixture
def simulated() -> Iterator[Api]:
    with SimApiServer(SimulatedCluster(lambda: NOW)) as server, httpx2.Client() as http:
        yield Api(server.url, "", http, "k8s-aws-v1.test")


@pytest.fixture
def real() -> Iterator[Api]:
    if not ENDPOINT:
        pytest.skip("needs a real kube-apiserver (KUBE_ENDPOINT)")
    ca_file = os.environ["KUBE_CA_FILE"]
    with httpx2.Client(verify=ssl.create_default_context(cafile=ca_file)) as http:
        yield Api(ENDPOINT, base64.b64encode(Path(ca_file).read_bytes()).decode(), http, os.environ["KUBE_TOKEN"])


@pytest.fixture(params=["simulated", "real"])
def api(request: pytest.FixtureRequest) -> Api:
    return request.getfixturevalue(request.param)


@pytest.fixture
def namespace(api: Api) -> Iterator[str]:
    name = f"karpenter-{uuid.uuid4().hex[:8]}"
    if api.endpoint == ENDPOINT:
        assert api.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}}).status_code == 201
        yield name
        api.request("DELETE", f"/api/v1/namespaces/{name}")
    else:
        yield name  # the simulated server keeps no namespace objects


def test_no_lease_is_none(api: Api, namespace: str) -> None:
    assert api.adapter().get_lease(namespace, LEASE_NAME) is None


def test_a_lease_created_through_the_api_is_read_with_its_holder_and_renew_time(api: Api, namespace: str) -> None:
    assert api.create_lease(namespace, lease_body()).status_code == 201
    read = api.adapter().get_lease(namespace, LEASE_NAME)
    assert isinstance(read, Lease)
    assert (read.namespace, read.name, read.holder, read.duration_seconds) == (namespace, LEASE_NAME, HOLDER, 15)
    assert read.renew_time == datetime(2026, 5, 1, 12, 0, 2, 123456, tzinfo=UTC)
    assert read.uid
    assert is_active(read, NOW)


def test_a_renew_time_without_microseconds_is_refused(api: Api, namespace: str) -> None:
    answer = api.create_lease(namespace, lease_body(renewed="2026-05-01T12:00:02Z"))
    assert answer.status_code == 400
    assert "parsing time" in answer.json()["message"]
    assert api.adapter().get_lease(namespace, LEASE_NAME) is None


# -- RBAC, on the real server ----------------------------------------------------------------------------------
@pytest.fixture
def bound(real: Api) -> Iterator[tuple[Api, str]]:
    """`infra/rbac.yaml` as `KubernetesAccessSetup` applies it, under names of its own: the ClusterRole bound
    to carpool's group, and the Lease Role in a namespace of its own (Karpenter's, `-c karpenterNamespace`)
    bound there. Yields the API and that namespace."""
    role, cluster_role = yaml.safe_load_all((ROOT / "infra" / "rbac.yaml").read_text())
    assert (cluster_role["kind"], role["kind"]) == ("ClusterRole", "Role") and "namespace" not in role["metadata"]
    name = f"carpool-controller-{uuid.uuid4().hex[:8]}"
    ns = f"karpenter-{uuid.uuid4().hex[:8]}"
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    group = [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "carpool-controller"}]
    assert real.request("POST", "/api/v1/namespaces", {"metadata": {"name": ns}}).status_code == 201
    cluster_role["metadata"] = {"name": name}
    role["metadata"] = {"name": name, "namespace": ns}
    assert real.request("POST", f"{rbac}/clusterroles", cluster_role).status_code == 201
    assert real.request("POST", f"{rbac}/namespaces/{ns}/roles", role).status_code == 201
    for path, kind in ((f"{rbac}/clusterrolebindings", "ClusterRole"), (f"{rbac}/namespaces/{ns}/rolebindings", "Role")):
        binding = {"metadata": {"name": name}, "subjects": group,
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}}
        assert real.request("POST", path, binding).status_code == 201
    yield real, ns
    real.request("DELETE", f"{rbac}/clusterrolebindings/{name}")
    real.request("DELETE", f"{rbac}/clusterroles/{name}")
    real.request("DELETE", f"/api/v1/namespaces/{ns}")


def _eventually(read: Any) -> Any:
    """The authorizer's cache follows a new binding within moments."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return read()
        except LeaseForbidden:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_without_the_rbac_rule_a_read_is_refused_as_lease_forbidden(real: Api) -> None:
    ns = f"karpenter-{uuid.uuid4().hex[:8]}"
    with pytest.raises(LeaseForbidden) as refused:
        real.adapter("carpool-limited-token").get_lease(ns, LEASE_NAME)
    assert "leases" in str(refused.value) and "coordination.k8s.io" in str(refused.value)
    assert "infra/rbac.yaml" in str(refused.value)


def test_the_rbac_file_reads_karpenters_lease_in_its_namespace_and_no_other_lease(bound: tuple[Api, str]) -> None:
    api, ns = bound
    assert api.create_lease(ns, lease_body()).status_code == 201
    assert api.create_lease(ns, lease_body(name="someone-else")).status_code == 201
    limited = api.adapter("carpool-limited-token")
    read = _eventually(lambda: limited.get_lease(ns, LEASE_NAME))
    assert read is not None and read.holder == HOLDER
    with pytest.raises(LeaseForbidden):
        limited.get_lease(ns, "someone-else")
    with pytest.raises(LeaseForbidden):  # the Role is Karpenter's namespace's alone
        limited.get_lease("default", LEASE_NAME)
