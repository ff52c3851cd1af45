"""The real kube-apiserver of `../shared/kube-apiserver/` as a test sees it (import this, not a fixture file).

The server is shared by every test run on the machine: never stop or restart it, give what a test makes a
name of its own (`unique`), and delete it. Tests that need it skip without `KUBE_ENDPOINT`, saying how to
start it (`require_real`).

- `RealApi`: the endpoint, its CA, an admin token (`system:masters`) and raw requests (`request`), plus
  carpool's adapters for any token (`cluster`, `karpenter_objects`): `carpool-limited-token` is user
  `carpool` in group `carpool-controller`, the group `infra/rbac.yaml`'s ClusterRole is bound to;
- `ensure_karpenter_crds`: Karpenter v1.14.1's CRDs (`tests/data/karpenter-crds-v1.14.1/`) created when
  missing, then waited for until Established (the server serves a CRD's kind only then);
- `bound_cluster_role`: `infra/rbac.yaml`'s ClusterRole under a name of its own, bound to carpool's group,
  removed afterwards.
"""

from __future__ import annotations

import base64
import os
import ssl
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml

from carpool.adapters.k8s.cluster import ClusterAccess, LightkubeCluster
from carpool.adapters.k8s.karpenter_objects import LightkubeKarpenterObjects

ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = ROOT / "tests" / "data" / "karpenter-crds-v1.14.1"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
#: the user of `carpool-limited-token`'s group (the server's `tokens.csv`)
CARPOOL_GROUP = "carpool-controller"
LIMITED_TOKEN = "carpool-limited-token"
HOW_TO_START = ("needs the real kube-apiserver (KUBE_ENDPOINT unset): ../shared/kube-apiserver/start.sh, then "
                "`source ~/.cache/carpool-kube-apiserver/run/env` (KUBE_ENDPOINT, KUBE_CA_FILE, KUBE_TOKEN)")
#: how long a new CRD or binding may take to be served
SETTLE_SECONDS = 30.0


class FixedToken:
    """A bearer token that never goes stale (the EKS token provider's shape)."""

    stale = False

    def __init__(self, token: str) -> None:
        self._token = token

    def token(self) -> str:
        return self._token


@dataclass
class RealApi:
    """One API server: where it is, its CA (file and base64 PEM), the admin token, a client for raw requests."""

    endpoint: str
    ca_data: str
    admin_token: str
    http: httpx2.Client

    def request(self, method: str, path: str, body: Any = None, *, token: str | None = None,
                headers: dict[str, str] | None = None, params: dict[str, str] | None = None) -> httpx2.Response:
        """A raw request as the admin (or as `token`), JSON body."""
        sent = {"Authorization": f"Bearer {token or self.admin_token}", **(headers or {})}
        return self.http.request(method, f"{self.endpoint}{path}", json=body, headers=sent, params=params)

    def cluster(self, token: str | None = None) -> LightkubeCluster:
        """carpool's lightkube cluster adapter, authenticated with `token` (the admin's by default)."""
        return LightkubeCluster("c", "us-east-1", access=ClusterAccess(self.endpoint, self.ca_data),
                                tokens=FixedToken(token or self.admin_token))

    def karpenter_objects(self, token: str | None = None) -> LightkubeKarpenterObjects:
        return LightkubeKarpenterObjects(self.cluster(token).client)


def require_real() -> None:
    """Skip the calling test, saying how to start the server, when KUBE_ENDPOINT is unset."""
    if not os.environ.get("KUBE_ENDPOINT"):
        pytest.skip(HOW_TO_START)


@contextmanager
def real_api() -> Iterator[RealApi]:
    """The real server from KUBE_ENDPOINT / KUBE_CA_FILE / KUBE_TOKEN (skips without them)."""
    require_real()
    ca_file = os.environ["KUBE_CA_FILE"]
    with httpx2.Client(verify=ssl.create_default_context(cafile=ca_file), timeout=30) as http:
        yield RealApi(os.environ["KUBE_ENDPOINT"], base64.b64encode(Path(ca_file).read_bytes()).decode(),
                      os.environ["KUBE_TOKEN"], http)


def unique(prefix: str) -> str:
    """A name no other test (or helper sharing the server) uses."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def crd_documents() -> list[dict[str, Any]]:
    """Karpenter v1.14.1's CRDs as shipped (one per file)."""
    return [yaml.safe_load(path.read_text()) for path in sorted(CRD_DIR.glob("*.yaml"))]


def ensure_karpenter_crds(api: RealApi) -> list[str]:
    """Every CRD of `CRD_DIR` served: created when missing (a CRD another run created is left as it is),
    then each waited for until its `Established` condition is True. Answers the CRDs' names."""
    names = []
    for crd in crd_documents():
        name = crd["metadata"]["name"]
        names.append(name)
        found = api.request("GET", f"{CRDS}/{name}")
        if found.status_code == 404:
            created = api.request("POST", CRDS, crd)
            if created.status_code not in (201, 409):  # 409: created by a run at the same moment
                raise AssertionError(f"creating CRD {name}: {created.status_code} {created.text[:500]}")
        elif found.status_code != 200:
            raise AssertionError(f"reading CRD {name}: {found.status_code} {found.text[:500]}")
    for name in names:
        _wait_established(api, name)
    return names


def _wait_established(api: RealApi, name: str) -> None:
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        crd = api.request("GET", f"{CRDS}/{name}").json()
        conditions = {c["type"]: c["status"] for c in crd.get("status", {}).get("conditions") or []}
        if conditions.get("Established") == "True":
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"CRD {name} not Established after {SETTLE_SECONDS} s: {conditions}")
        time.sleep(0.2)


@contextmanager
def bound_cluster_role(api: RealApi) -> Iterator[str]:
    """`infra/rbac.yaml`'s ClusterRole under a name of its own, bound to carpool's group; both deleted after.
    Answers the role's name."""
    role = next(d for d in yaml.safe_load_all((ROOT / "infra" / "rbac.yaml").read_text()) if d["kind"] == "ClusterRole")
    name = unique("carpool-controller")
    role["metadata"] = {"name": name}
    assert api.request("POST", f"{RBAC}/clusterroles", role).status_code == 201
    binding = {"metadata": {"name": name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
               "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": CARPOOL_GROUP}]}
    try:
        assert api.request("POST", f"{RBAC}/clusterrolebindings", binding).status_code == 201
        yield name
    finally:
        api.request("DELETE", f"{RBAC}/clusterrolebindings/{name}")
        api.request("DELETE", f"{RBAC}/clusterroles/{name}")
