"""e2e: scenarios from examples/ run through the real handlers, local AWS (moto on 127.0.0.1) and the
simulated cluster. Each scenario runs once per test module; the tests then assert on its outcome."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from carpool import resources as R
from carpool.api.loader import load
from carpool.catalog import builder
from carpool.sim.clock import SimClock
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.sim.localaws.in_process import ec2_instance_types
from carpool.sim.run.result import Instance, SimResult
from carpool.sim.run.runner import simulate
from carpool.sim.run.scenario import Scenario, load_scenario
from carpool.sizing import KubeletSettings, network_settings, size_node
from carpool.sizing.reserved import eviction_threshold

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(name: str) -> SimResult:
    return simulate(load_scenario(EXAMPLES / name))


def registered(result: SimResult) -> list[Instance]:
    """Instances whose node joined the cluster."""
    return [i for i in result.launches if i.node_name]


@pytest.fixture(scope="module")
def scenario_result(request: pytest.FixtureRequest) -> SimResult:
    """The result of the module's `SCENARIO` (one run shared by the module's tests)."""
    return run(request.module.SCENARIO)


#: Resources whose allocatable the kubelet derives from capacity and reservations.
_RESERVED = (R.CPU, R.MEMORY, R.EPHEMERAL_STORAGE)


def allocatable_mismatches(result: SimResult, scenario: Scenario) -> list[str]:
    """Every launched instance whose node offers other than what carpool's scheduler packed it for.

    For each instance: the max pods and the allocatable its kubelet computed from the decoded user data
    (after its AMI's bootstrap defaults) against the node's real capacity minus what `size_node` reserves
    for that type, node class and network mode. Capacity is the node's own (the simulation's truth
    differs from carpool's estimate on purpose); reservations must agree exactly."""
    manifests = load([text for _label, text in scenario.manifest_texts()])
    pools = {p.name: p for p in manifests.nodepools}
    classes = {c.name: c for c in manifests.nodeclasses}
    cni = SimulatedCluster(SimClock(), scenario.cluster.cni).cni_env()
    out = []
    for inst in result.launches:
        nodeclass = classes[pools[inst.node_pool].node_class_name]
        kubelet = KubeletSettings.from_spec(nodeclass.spec.kubelet)
        it = builder.instance_type(ec2_instance_types()[inst.instance_type], [], scenario.cluster.region)
        size = size_node(it, nodeclass.ami_family(), network_settings(cni, nodeclass.metadata.annotations or {}),
                         kubelet)
        capacity, allocatable = R.parse(inst.capacity), R.parse(inst.allocatable)
        if capacity.get(R.PODS) != size.max_pods:
            out.append(f"{inst.instance_id} {inst.instance_type}: max pods {capacity.get(R.PODS)}, "
                       f"scheduler assumed {size.max_pods}")
        assumed = R.add(size.kube_reserved, size.system_reserved, eviction_threshold(capacity, kubelet.eviction_hard, []))
        for name in _RESERVED:
            expected = max(0, capacity[name] - assumed.get(name, 0))
            if allocatable.get(name) != expected:
                out.append(f"{inst.instance_id} {inst.instance_type}: allocatable {name} {allocatable.get(name)}, "
                           f"scheduler assumed {expected} (capacity {capacity[name]}, reserved {assumed.get(name, 0)}; "
                           f"user data: {inst.kube_reserved} {inst.system_reserved} {inst.eviction_hard})")
    return out


@pytest.fixture(autouse=True, scope="session")
def _saved_requests() -> Iterator[None]:
    """With ``CARPOOL_REQUESTS_DIR`` set, keep the AWS requests of every scenario this session ran, one JSON
    file per scenario, for ``tests/infra/test_iam_requests.py`` to evaluate against the IAM policies."""
    yield
    target = os.environ.get("CARPOOL_REQUESTS_DIR")
    if target:
        from carpool.sim.localaws import requests

        Path(target).mkdir(parents=True, exist_ok=True)
        for recording in requests.recordings():
            (Path(target) / f"{recording.scenario}.json").write_text(recording.model_dump_json())


def assert_allocatable_parity(result: SimResult, scenario_file: str) -> None:
    """No launched instance's node offers other than what the scheduler assumed (see above)."""
    assert result.launches, "the scenario launched nothing to compare"
    mismatches = allocatable_mismatches(result, load_scenario(EXAMPLES / scenario_file))
    assert not mismatches, "\n".join(mismatches)
