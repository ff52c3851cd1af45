"""`carpool apply` through a kubeconfig, side by side against the simulated API server and the real
kube-apiserver with Karpenter's CRDs (skipped without KUBE_ENDPOINT: `../shared/kube-apiserver/start.sh`,
then `source ~/.cache/carpool-kube-apiserver/run/env`).

The same file applied twice is `unchanged`; an edit is `configured` and a field removed from the file goes
from the object while the CRD's defaults stay; `--dry-run` changes nothing. On the real server, kubectl
itself (when installed) agrees: after `carpool apply`, `kubectl apply` of the same file is `unchanged`, and
after a `kubectl apply` of an edit, `carpool apply` follows kubectl's last-applied annotation.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from real_api import ensure_karpenter_crds, real_api, unique
from typer.testing import CliRunner

from carpool.cli import app
from carpool.karpenter_objects import EC2NODECLASS, NODEPOOL, KarpenterObjects
from carpool.sim.cluster.apiserver import SimApiServer
from carpool.sim.cluster.simulated import SimulatedCluster


@dataclass
class Server:
    """One API server as `carpool apply` reaches it, and as the test reads it back."""

    name: str
    kubeconfig: Path
    objects: KarpenterObjects


def kubeconfig(path: Path, server: str, token: str, ca_data: str | None = None) -> Path:
    cluster: dict[str, Any] = {"server": server}
    if ca_data:
        cluster["certificate-authority-data"] = ca_data
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": cluster}], "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return path


@pytest.fixture(params=["sim", "real"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    from carpool.adapters.k8s.kubeconfig import karpenter_objects

    if request.param == "sim":
        with SimApiServer(SimulatedCluster(lambda: datetime.now(UTC))) as sim:
            path = kubeconfig(tmp_path / "kubeconfig", sim.url, "t")
            yield Server("sim", path, karpenter_objects(path))
        return
    with real_api() as api:
        ensure_karpenter_crds(api)
        path = kubeconfig(tmp_path / "kubeconfig", api.endpoint, api.admin_token, api.ca_data)
        yield Server("real", path, karpenter_objects(path))


def documents(name: str) -> list[dict[str, Any]]:
    nodeclass = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name},
                 "spec": {"role": "KarpenterNodeRole-demo", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                          "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
                          "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}]}}
    pool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": name},
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]}},
                "limits": {"cpu": "64", "memory": "256Gi"}}}
    return [pool, nodeclass]  # the pool first: apply still creates the class before it


def apply(server: Server, path: Path, *extra: str) -> list[str]:
    result = CliRunner().invoke(app, ["apply", "-f", str(path), "--kubeconfig", str(server.kubeconfig), *extra])
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result.stdout.strip().splitlines()


@pytest.fixture
def name(server: Server) -> Iterator[str]:
    made = unique("config-deploy")
    yield made
    server.objects.delete_object(NODEPOOL, made)
    server.objects.delete_object(EC2NODECLASS, made)


def test_apply_creates_then_leaves_then_patches(server: Server, name: str, tmp_path: Path) -> None:
    path = tmp_path / "pools.yaml"
    docs = documents(name)
    path.write_text(yaml.safe_dump_all(docs))
    assert apply(server, path) == [f"ec2nodeclass.karpenter.k8s.aws/{name} created", f"nodepool.karpenter.sh/{name} created"]
    created = server.objects.get_object(NODEPOOL, name)
    assert created is not None and created["spec"]["disruption"]["consolidateAfter"] == "0s"  # the CRD's default
    assert apply(server, path) == [f"ec2nodeclass.karpenter.k8s.aws/{name} unchanged",
                                   f"nodepool.karpenter.sh/{name} unchanged"]

    edited = copy.deepcopy(docs)
    edited[0]["spec"]["limits"] = {"cpu": "128"}
    path.write_text(yaml.safe_dump_all(edited))
    dry = apply(server, path, "--dry-run")
    assert dry[0] == f"ec2nodeclass.karpenter.k8s.aws/{name} unchanged (dry run)"
    assert dry[1] == f"nodepool.karpenter.sh/{name} configured (dry run)"
    assert dry[2].startswith("  patch: ") and '"memory": null' in dry[2] and '"cpu": "128"' in dry[2]
    assert server.objects.get_object(NODEPOOL, name)["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]

    assert apply(server, path)[1] == f"nodepool.karpenter.sh/{name} configured"
    now = server.objects.get_object(NODEPOOL, name)
    assert now["spec"]["limits"] == {"cpu": "128"} and now["spec"]["disruption"] == created["spec"]["disruption"]
    assert now["metadata"]["generation"] == created["metadata"]["generation"] + 1


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs kubectl")
def test_kubectl_and_carpool_apply_follow_each_other(server: Server, name: str, tmp_path: Path) -> None:
    if server.name == "sim":
        pytest.skip("kubectl needs the real server's discovery and OpenAPI documents")
    path = tmp_path / "pools.yaml"
    docs = documents(name)
    path.write_text(yaml.safe_dump_all(docs))
    apply(server, path)

    def kubectl(*args: str) -> list[str]:
        env = {**os.environ, "KUBECONFIG": str(server.kubeconfig)}
        done = subprocess.run(["kubectl", *args], capture_output=True, text=True, env=env, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()

    assert sorted(kubectl("apply", "-f", str(path))) == [f"ec2nodeclass.karpenter.k8s.aws/{name} unchanged",
                                                         f"nodepool.karpenter.sh/{name} unchanged"]
    edited = copy.deepcopy(docs)
    edited[0]["spec"]["weight"] = 10
    edited[0]["spec"]["limits"] = {"cpu": "32"}
    path.write_text(yaml.safe_dump_all(edited))
    assert f"nodepool.karpenter.sh/{name} configured" in kubectl("apply", "-f", str(path))
    path.write_text(yaml.safe_dump_all(docs))  # back to the first file: weight (only kubectl applied it) goes
    assert apply(server, path)[1] == f"nodepool.karpenter.sh/{name} configured"
    now = server.objects.get_object(NODEPOOL, name)
    assert "weight" not in now["spec"] and now["spec"]["limits"] == {"cpu": "64", "memory": "256Gi"}
    assert sorted(kubectl("apply", "-f", str(path))) == [f"ec2nodeclass.karpenter.k8s.aws/{name} unchanged",
                                                         f"nodepool.karpenter.sh/{name} unchanged"]


def test_a_pool_whose_class_is_nowhere_is_applied_with_a_warning(server: Server, name: str, tmp_path: Path) -> None:
    """As Karpenter accepts it (its NodeClassReady condition says NodeClassNotFound), but the user is told."""
    path = tmp_path / "pool.yaml"
    path.write_text(yaml.safe_dump(documents(name)[0]))
    result = CliRunner().invoke(app, ["apply", "-f", str(path), "--kubeconfig", str(server.kubeconfig)])
    assert result.exit_code == 0 and result.stdout.strip() == f"nodepool.karpenter.sh/{name} created"
    assert result.stderr.strip() == (f"warning: NodePool {name}: EC2NodeClass {name!r} is not in the cluster; the "
                                     "pool launches nothing until it is applied")


def test_what_the_server_refuses_is_one_line_and_exit_1_and_the_rest_is_applied(
        server: Server, name: str, tmp_path: Path) -> None:
    """A label value the API server refuses (metadata is the server's to judge, not the CRD's): the class is
    applied, the pool is one `error:` line naming it and the field."""
    docs = documents(name)
    docs[0]["metadata"]["labels"] = {"team": "not a label value"}
    path = tmp_path / "pools.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    result = CliRunner().invoke(app, ["apply", "-f", str(path), "--kubeconfig", str(server.kubeconfig)])
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert result.stdout.strip() == f"ec2nodeclass.karpenter.k8s.aws/{name} created"
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: nodepool.karpenter.sh/{name}: ") and "metadata.labels" in line, line
