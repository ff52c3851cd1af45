"""Issue 29's acceptance: a node class with `clusterDNS`, `evictionSoft` and a 100Gi root volume boots nodes
that report what a real kubelet would, and pods asking 30Gi of ephemeral storage, selecting a label only
the API server may set, are scheduled."""

from __future__ import annotations

from carpool import resources as R

from .conftest import assert_allocatable_parity, registered

SCENARIO = "013-kubelet-and-root-volume.yaml"
GIB = 2**30


def test_the_30gi_pods_run(scenario_result):
    counts = scenario_result.workloads["Deployment/default/ledger"]
    assert counts.total == 2 and counts.pending == 0


def test_every_node_joined(scenario_result):
    assert registered(scenario_result)
    assert all(i.joined and not i.join_failure for i in scenario_result.launches)


def test_nodes_report_ephemeral_storage_from_the_100gi_root(scenario_result):
    for inst in registered(scenario_result):
        capacity, allocatable = R.parse(inst.capacity), R.parse(inst.allocatable)
        assert 99 * GIB < capacity[R.EPHEMERAL_STORAGE] <= 100 * GIB, inst
        # 1Gi kube-reserved and the 10% nodefs hard threshold come off; 30Gi still fits
        assert allocatable[R.EPHEMERAL_STORAGE] == capacity[R.EPHEMERAL_STORAGE] - GIB - -(-capacity[R.EPHEMERAL_STORAGE] // 10)
        assert allocatable[R.EPHEMERAL_STORAGE] > 30 * GIB


def test_the_kubelet_runs_with_the_node_class_settings(scenario_result):
    for inst in registered(scenario_result):
        assert inst.kubelet_settings["clusterDNS"] == ["169.254.20.10"], inst
        assert inst.kubelet_settings["evictionSoft"] == {"memory.available": "500Mi", "nodefs.available": "15%"}
        assert inst.kubelet_settings["evictionSoftGracePeriod"] == {"memory.available": "1m30s", "nodefs.available": "2m"}
        assert inst.kube_reserved["pid"] == "1000"


def test_allocatable_parity(scenario_result):
    assert_allocatable_parity(scenario_result, SCENARIO)
