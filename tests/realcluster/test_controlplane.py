"""The tier's control plane is EKS's where carpool depends on it: nodes authenticate as `system:node:NAME`
and NodeRestriction refuses what EKS refuses, carpool's group has `infra/rbac.yaml` and no more, Karpenter's
kinds are served, the real scheduler and controller manager act on a Deployment, and a function's EKS token
authenticates through the webhook as its access entry says (and only so)."""

from __future__ import annotations

import ssl
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from botocore.credentials import Credentials
from tests.realcluster.authenticator import AccessEntry, Authenticator, AuthenticatorServer, moto_secret
from tests.realcluster.controlplane import CARPOOL_GROUP, ControlPlane, require_binaries

from carpool.adapters.k8s.token import eks_token
from carpool.sim.localaws.server import LocalAws

NODES = "/api/v1/nodes"


def _node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def _as_node(plane: ControlPlane, name: str) -> httpx2.Client:
    """A client authenticated by the node's client certificate, as its kubelet is."""
    cert, key = plane.client_certificate(f"system:node:{name}", ("system:nodes",))
    context = ssl.create_default_context(cafile=str(plane.ca_file))
    context.load_cert_chain(str(cert), str(key))
    return httpx2.Client(base_url=plane.endpoint, verify=context, timeout=30)


def _name() -> str:
    return f"ip-10-0-{uuid.uuid4().int % 250}-{uuid.uuid4().int % 250}.ec2.internal"


def test_a_node_registers_itself_with_its_client_certificate(control_plane: ControlPlane) -> None:
    name = _name()
    with _as_node(control_plane, name) as node:
        created = node.post(NODES, json=_node(name, {"karpenter.sh/nodepool": "default"}))
        assert created.status_code == 201, created.text
        assert created.json()["metadata"]["labels"]["karpenter.sh/nodepool"] == "default"


def test_node_restriction_refuses_a_restricted_label_as_eks_does(control_plane: ControlPlane) -> None:
    name = _name()
    with _as_node(control_plane, name) as node:
        refused = node.post(NODES, json=_node(name, {"node-restriction.kubernetes.io/pool": "x"}))
    assert refused.status_code == 403, refused.text
    assert "node-restriction.kubernetes.io" in refused.text


def test_a_node_may_not_touch_another_node(control_plane: ControlPlane) -> None:
    mine, other = _name(), _name()
    assert control_plane.request("POST", NODES, _node(other, {})).status_code == 201
    with _as_node(control_plane, mine) as node:
        patched = node.patch(f"{NODES}/{other}", json={"metadata": {"labels": {"a": "b"}}},
                             headers={"Content-Type": "application/merge-patch+json"})
    assert patched.status_code == 403, patched.text


def _allowed(plane: ControlPlane, verb: str, resource: str, group: str = "", namespace: str = "",
             name: str = "") -> bool:
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
              "spec": {"user": "arn:aws:sts::123456789012:assumed-role/x/y", "groups": [plane.carpool_group],
                       "resourceAttributes": {"verb": verb, "resource": resource, "group": group,
                                              "namespace": namespace, "name": name}}}
    answer = plane.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    return bool(answer.json()["status"].get("allowed"))


def test_carpools_group_has_infra_rbac_and_no_more(control_plane: ControlPlane) -> None:
    assert _allowed(control_plane, "create", "nodeclaims", "karpenter.sh")
    assert _allowed(control_plane, "delete", "pods", "", "default")
    assert not _allowed(control_plane, "create", "pods", "", "default")
    assert _allowed(control_plane, "get", "leases", "coordination.k8s.io", control_plane.karpenter_namespace,
                    "karpenter-leader-election")
    assert not _allowed(control_plane, "get", "leases", "coordination.k8s.io", "default", "karpenter-leader-election")
    assert not _allowed(control_plane, "create", "deployments", "apps", "default")


def test_karpenters_kinds_are_served(control_plane: ControlPlane) -> None:
    for path in ("/apis/karpenter.sh/v1/nodepools", "/apis/karpenter.sh/v1/nodeclaims",
                 "/apis/karpenter.k8s.aws/v1/ec2nodeclasses"):
        assert control_plane.request("GET", path).status_code == 200, path


def test_the_real_controllers_and_scheduler_act_on_a_deployment(control_plane: ControlPlane) -> None:
    """The ReplicaSet controller makes the pods; with no node the scheduler marks them Unschedulable."""
    name = f"web-{uuid.uuid4().hex[:6]}"
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
                  "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                           "template": {"metadata": {"labels": {"app": name}},
                                        "spec": {"containers": [{"name": "c", "image": "pause"}]}}}}
    assert control_plane.request("POST", "/apis/apps/v1/namespaces/default/deployments", deployment).status_code == 201
    deadline = time.monotonic() + 60
    unschedulable: list[str] = []
    while time.monotonic() < deadline and len(unschedulable) < 2:
        pods = control_plane.request("GET", "/api/v1/namespaces/default/pods",
                                     params={"labelSelector": f"app={name}"}).json()["items"]
        unschedulable = [c["message"] for p in pods for c in p["status"].get("conditions") or []
                         if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"]
        time.sleep(0.5)
    assert len(unschedulable) == 2, unschedulable
    assert all("nodes are available" in m for m in unschedulable), unschedulable


# --- EKS tokens through the authenticator webhook ---------------------------------------------------------


@pytest.fixture(scope="module")
def eks_plane() -> Iterator[tuple[ControlPlane, Authenticator, Credentials, str]]:
    """A plane whose token webhook is the EKS authenticator on local STS, one role mapped to carpool's
    group by an access entry; answers the plane, the authenticator, the role's credentials, its ARN."""
    require_binaries(("etcd", "kube-apiserver"))
    with LocalAws(cluster="eks-auth", export=False) as aws:
        role = aws.client("iam").create_role(RoleName="carpool-eks-auth-watcher",
                                             AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        given = aws.client("sts").assume_role(RoleArn=role, RoleSessionName="carpool-watcher")["Credentials"]
        credentials = Credentials(given["AccessKeyId"], given["SecretAccessKey"], given["SessionToken"])
        authenticator = Authenticator("eks-auth", aws.endpoint, moto_secret(aws.account))
        authenticator.add_entry(AccessEntry(role, (CARPOOL_GROUP,)))
        with AuthenticatorServer(authenticator) as server, ControlPlane(
                token_webhook_url=server.url, scheduler=False, controller_manager=False) as plane:
            yield plane, authenticator, credentials, role


def test_a_functions_eks_token_gets_carpools_group(eks_plane: tuple[ControlPlane, Authenticator, Credentials, str]) -> None:
    plane, _authenticator, credentials, _role = eks_plane
    token = eks_token("eks-auth", "us-east-1", credentials)
    assert plane.request("GET", "/api/v1/nodes", token=token).status_code == 200
    # and no more than the group's ClusterRole: it may not list secrets
    assert plane.request("GET", "/api/v1/secrets", token=token).status_code == 403


def test_a_token_signed_for_another_cluster_is_refused(eks_plane: tuple[ControlPlane, Authenticator, Credentials, str]) -> None:
    plane, authenticator, credentials, _role = eks_plane
    token = eks_token("another-cluster", "us-east-1", credentials)
    assert plane.request("GET", "/api/v1/nodes", token=token).status_code == 401
    assert authenticator.decisions[-1] == (None, "sts getCallerIdentity failed: SignatureDoesNotMatch")


def test_an_unmapped_role_is_refused(eks_plane: tuple[ControlPlane, Authenticator, Credentials, str]) -> None:
    plane, authenticator, _credentials, role = eks_plane
    del authenticator.entries[role]
    time.sleep(1.1)  # a token of another second: the API server caches each token's answer (2 minutes)
    try:
        fresh = eks_token("eks-auth", "us-east-1", _credentials)
        assert plane.request("GET", "/api/v1/nodes", token=fresh).status_code == 401
        assert (authenticator.decisions[-1][1] or "").startswith("ARN is not mapped")
    finally:
        authenticator.add_entry(AccessEntry(role, (CARPOOL_GROUP,)))
