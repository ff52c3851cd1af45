"""Karpenter's termination finalizer on Nodes against the real kube-apiserver (skipped without
`KUBE_ENDPOINT`), as carpool relies on it, and the simulated API server beside it (the fidelity check of
what the simulation models): a deleted Node that holds it stays, with `deletionTimestamp`, until the
finalizer is removed; no finalizer can be added to it then; and `carpool release-finalizers` takes
carpool's finalizer off its Nodes and NodeClaims (docs/uninstall.md), leaving other objects alone.

Every object is named with this part's prefix and a random suffix, and removed afterwards: the server is
shared."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from real_api import RealApi, ensure_karpenter_crds, real_api, unique
from typer.testing import CliRunner

from carpool import labels as L
from carpool.cli import app
from carpool.karpenter_objects import NODECLAIM, TERMINATION_FINALIZER
from carpool.ports import NodePatch
from carpool.sim.cluster.apiserver import SimApiServer
from carpool.sim.cluster.simulated import SimulatedCluster

PREFIX = "deletes"
NODES = "/api/v1/nodes"
CLASS_REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


@pytest.fixture
def api() -> Iterator[RealApi]:
    with real_api() as real:
        yield real


@pytest.fixture
def simulated() -> Iterator[tuple[RealApi, SimulatedCluster]]:
    cluster = SimulatedCluster(lambda: datetime(2026, 6, 1, tzinfo=UTC))
    with SimApiServer(cluster) as server, httpx2.Client() as http:
        yield RealApi(server.url, "", "k8s-aws-v1.test", http), cluster


@pytest.fixture
def made(api: RealApi) -> Iterator[list[str]]:
    """Paths of what a test created: finalizers dropped and deleted afterwards."""
    paths: list[str] = []
    yield paths
    for path in paths:
        api.request("PATCH", path, {"metadata": {"finalizers": None}},
                    headers={"Content-Type": "application/merge-patch+json"})
        api.request("DELETE", path)


def _node(api: RealApi, made: list[str], owner: str, finalizers: list[str]) -> str:
    name = unique(f"{PREFIX}-node")
    body = {"metadata": {"name": name, "labels": {L.OWNED_BY: owner, L.REGISTERED: "true"}, "finalizers": finalizers},
            "spec": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0"}}
    created = api.request("POST", NODES, body)
    assert created.status_code == 201, created.text
    made.append(f"{NODES}/{name}")
    return name


@pytest.mark.parametrize("server", ["real", "simulated"])
def test_a_deleted_node_stays_until_its_finalizer_goes_and_takes_no_new_one(server: str,
                                                                           request: pytest.FixtureRequest) -> None:
    if server == "real":
        api: RealApi = request.getfixturevalue("api")
        name = _node(api, request.getfixturevalue("made"), unique(PREFIX), [])
    else:
        api, sim = request.getfixturevalue("simulated")
        name = sim.add_node({"metadata": {"name": unique(f"{PREFIX}-node"), "labels": {L.REGISTERED: "true"}},
                             "spec": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0"}})
    cluster = api.cluster()
    cluster.patch_node(name, NodePatch(add_finalizers=frozenset({TERMINATION_FINALIZER})))
    assert cluster.get_node(name).metadata.finalizers == [TERMINATION_FINALIZER]  # type: ignore[union-attr]
    cluster.delete_node(name)
    held = cluster.get_node(name)
    assert held is not None and held.metadata.deletion_timestamp is not None
    # the API server refuses a new finalizer on an object being deleted; carpool's patch does not ask for one
    refused = api.request("PATCH", f"{NODES}/{name}",
                          {"metadata": {"finalizers": [TERMINATION_FINALIZER, "example.com/late"]}},
                          headers={"Content-Type": "application/merge-patch+json"})
    assert refused.status_code == 422 and "no new finalizers" in refused.text
    cluster.patch_node(name, NodePatch(add_finalizers=frozenset({"example.com/late"})))  # nothing written
    assert cluster.get_node(name).metadata.finalizers == [TERMINATION_FINALIZER]  # type: ignore[union-attr]
    cluster.patch_node(name, NodePatch(remove_finalizers=frozenset({TERMINATION_FINALIZER})))
    assert cluster.get_node(name) is None, "its last finalizer gone, the deleted node goes"


def _kubeconfig(api: RealApi, tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "real",
        "clusters": [{"name": "real", "cluster": {"server": api.endpoint,
                                                  "certificate-authority": os.environ["KUBE_CA_FILE"]}}],
        "users": [{"name": "admin", "user": {"token": api.admin_token}}],
        "contexts": [{"name": "real", "context": {"cluster": "real", "user": "admin"}}]}))
    return path


def _nodeclaim(api: RealApi, made: list[str], owner: str) -> str:
    name = unique(f"{PREFIX}-nc")
    body: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {L.OWNED_BY: owner}, "finalizers": [TERMINATION_FINALIZER]},
        "spec": {"nodeClassRef": CLASS_REF, "requirements": [
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}]}}
    created = api.request("POST", NODECLAIM.path, body)
    assert created.status_code == 201, created.text
    made.append(f"{NODECLAIM.path}/{name}")
    return name


def test_release_finalizers_lets_carpools_nodes_and_nodeclaims_go_and_leaves_others(
        api: RealApi, made: list[str], tmp_path: Path) -> None:
    ensure_karpenter_crds(api)
    owner = unique(PREFIX)
    deleted, kept = _node(api, made, owner, [TERMINATION_FINALIZER]), _node(api, made, owner, [TERMINATION_FINALIZER])
    other = _node(api, made, unique(f"{PREFIX}-other"), [TERMINATION_FINALIZER])
    nodeclaim = _nodeclaim(api, made, owner)
    for path in (f"{NODES}/{deleted}", f"{NODES}/{other}", f"{NODECLAIM.path}/{nodeclaim}"):
        assert api.request("DELETE", path).status_code in (200, 202)
    config = _kubeconfig(api, tmp_path)

    dry = CliRunner().invoke(app, ["release-finalizers", "--cluster", owner, "--kubeconfig", str(config), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert sorted(dry.output.splitlines()) == sorted([
        f"node/{deleted}: finalizer {TERMINATION_FINALIZER} removed (being deleted: it goes now) (dry run)",
        f"node/{kept}: finalizer {TERMINATION_FINALIZER} removed (dry run)",
        f"nodeclaim/{nodeclaim}: finalizer {TERMINATION_FINALIZER} removed (being deleted: it goes now) (dry run)"])
    assert api.request("GET", f"{NODES}/{deleted}").status_code == 200, "a dry run writes nothing"

    done = CliRunner().invoke(app, ["release-finalizers", "--cluster", owner, "--kubeconfig", str(config)])
    assert done.exit_code == 0, done.output
    assert api.request("GET", f"{NODES}/{deleted}").status_code == 404
    assert api.request("GET", f"{NODECLAIM.path}/{nodeclaim}").status_code == 404
    assert api.request("GET", f"{NODES}/{kept}").json()["metadata"].get("finalizers") is None
    # another cluster's node (or Karpenter's) keeps its finalizer and stays Terminating
    assert api.request("GET", f"{NODES}/{other}").json()["metadata"]["finalizers"] == [TERMINATION_FINALIZER]
