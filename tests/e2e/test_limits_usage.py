"""NodePool limits count what the nodes really are (issue 38, item 1), through the real handlers on local
AWS and the simulated cluster (`carpool simulate`), and through `carpool plan`.

While scheduling, a new claim is charged its largest remaining option; once launched it holds its
instance type's capacity, once registered its node's, so a pool near its limit catches up in the same
invocation instead of leaving pods pending for good. The usage `carpool status` (here the simulation's
`--status`) and `carpool plan` show is what the instances have.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from carpool import resources as R
from carpool.cli import app
from carpool.sim.run.result import SimResult
from carpool.sim.run.runner import simulate
from carpool.sim.run.scenario import load_scenario

from .conftest import EXAMPLES

HERE = Path(__file__).resolve().parent / "limits"
GPU = "nvidia.com/gpu"
GIB = 2**30


def _run(name: str) -> SimResult:
    return simulate(load_scenario(HERE / name))


@pytest.fixture(scope="module")
def gpu_run() -> SimResult:
    return _run("gpu-pool.yaml")


@pytest.fixture(scope="module")
def memory_run() -> SimResult:
    return _run("memory-pool.yaml")


@pytest.fixture(scope="module")
def default_run() -> SimResult:
    return _run("default-pool.yaml")


def _usage(result: SimResult, pool: str) -> dict[str, int]:
    assert result.status is not None
    return next(p.usage for p in result.status.pools if p.name == pool)


def _running(result: SimResult) -> list[dict[str, int]]:
    """The capacity every node still running reports."""
    return [R.parse(i.capacity) for i in result.launches if i.terminated_at is None and i.joined]


def test_a_gpu_pool_serves_every_pod_within_its_limit(gpu_run: SimResult) -> None:
    assert gpu_run.pods.scheduled == gpu_run.pods.total == 8, gpu_run.pods
    used = _usage(gpu_run, "gpu")
    assert used[GPU] == sum(c.get(GPU, 0) for c in _running(gpu_run)) <= 16
    assert used["nodes"] == len(_running(gpu_run))


def test_a_memory_limited_pool_serves_every_pod(memory_run: SimResult) -> None:
    assert memory_run.pods.scheduled == memory_run.pods.total == 21, memory_run.pods
    used = _usage(memory_run, "small")
    assert used["memory"] == sum(c[R.MEMORY] for c in _running(memory_run)) <= 50 * GIB
    assert used["cpu"] == sum(c[R.CPU] for c in _running(memory_run))


def test_the_default_pool_counts_the_vcpus_it_runs(default_run: SimResult) -> None:
    assert default_run.pods.scheduled == 1
    (node,) = _running(default_run)
    used = _usage(default_run, "default")
    assert used["cpu"] == node[R.CPU] == 64_000  # m6g.16xlarge (or another 64-vCPU type), not the 96 of its largest option
    assert used["memory"] == node[R.MEMORY]


def _plan(tmp_path: Path, scenario: str, pods: Path) -> dict[str, Any]:
    """`carpool plan --json` on a scenario's manifests and the given pods."""
    manifests = tmp_path / "manifests.yaml"
    manifests.write_text(yaml.safe_dump_all(yaml.safe_load((HERE / scenario).read_text())["manifests"]))
    return _plan_files(manifests, pods)


def _plan_files(manifests: Path, pods: Path) -> dict[str, Any]:
    out = CliRunner().invoke(app, ["plan", "-m", str(manifests), "-p", str(pods), "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def _unschedulable(plan: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in plan["pods"].items() if "reasons" in v}


def test_plan_serves_the_gpu_pool(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "gpu-pool.yaml", HERE / "gpu-pods.yaml")
    assert not _unschedulable(plan) and len(plan["pods"]) == 8
    # each claim's cheapest option is a one-GPU g6.xlarge: the pool holds one GPU a node, not eight
    assert plan["limits"]["gpu"][GPU] == {"usage": len(plan["nodeClaims"]), "limit": 16}


def test_plan_serves_the_memory_limited_pool(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "memory-pool.yaml", HERE / "memory-pods.yaml")
    assert not _unschedulable(plan) and len(plan["pods"]) == 21
    assert plan["limits"]["small"]["memory"]["usage"] <= 50 * GIB


def test_plan_places_hostname_spread_pods_in_the_getting_started_pool(tmp_path: Path) -> None:
    pods = tmp_path / "pods.yaml"
    pods.write_text(yaml.safe_dump({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 6, "selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}},
                     "containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}]}}}}))
    plan = _plan_files(EXAMPLES / "karpenter" / "default.yaml", pods)
    assert not _unschedulable(plan), _unschedulable(plan)
    claims = plan["nodeClaims"]
    assert len(claims) == 6 and len({c["name"] for c in claims}) == 6  # one node a pod, each its own name
    assert plan["limits"]["default"]["cpu"]["usage"] <= 1000_000


@pytest.fixture(scope="module")
def nodes_run() -> SimResult:
    return _run("nodes-pool.yaml")


def test_a_nodes_limit_holds_the_pool_to_that_many_nodes(nodes_run: SimResult) -> None:
    # limits.nodes (Karpenter v1.11): each claim counts one node, as nodepool.status.resources["nodes"]
    assert (nodes_run.pods.scheduled, nodes_run.pods.pending) == (2, 2), nodes_run.pods
    assert len(nodes_run.launches) == 2
    used = _usage(nodes_run, "two")
    assert used["nodes"] == len(_running(nodes_run)) == 2


def test_plan_explains_the_nodes_limit(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "nodes-pool.yaml", HERE / "nodes-pods.yaml")
    assert len(plan["nodeClaims"]) == 2
    held = _unschedulable(plan)
    assert len(held) == 2 and all(v["reasons"] == {"two": "limit nodes exhausted"} for v in held.values()), held
    assert plan["limits"]["two"]["nodes"] == {"usage": 2, "limit": 2}
