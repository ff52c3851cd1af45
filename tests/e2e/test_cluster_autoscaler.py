"""Coexistence with Cluster Autoscaler: the managed node group and its pods are not carpool's."""

from carpool import labels as L

from .conftest import assert_allocatable_parity

SCENARIO = "003-cluster-autoscaler.yaml"


def test_carpool_serves_the_unpinned_pods(scenario_result):
    web = scenario_result.workloads["Deployment/default/web"]
    assert web.total == 12 and web.scheduled == 12


def test_pods_pinned_to_the_node_group_are_left_to_cluster_autoscaler(scenario_result):
    agents = scenario_result.workloads["Deployment/default/system-agent"]
    assert agents.total == 6
    assert agents.scheduled == 2  # one per node-group node
    assert agents.pending == 4  # carpool launched nothing for them
    assert all(i.node_pool == "default" for i in scenario_result.launches)
    # the pinned pods alone would need 4 more nodes; web (6 cpu) needs far fewer than that plus them
    assert len(scenario_result.launches) <= 4


def test_node_group_nodes_are_never_touched(scenario_result):
    assert all(t.nodes.get("nodegroup/system") == 2 for t in scenario_result.timeline)
    touched = [d for d in scenario_result.decisions if d.source == "k8s-api" and "10-0-200" in d.message]
    assert touched == []


def test_carpool_nodes_do_not_pose_as_the_node_group(scenario_result):
    assert L.EKS_NODEGROUP == "eks.amazonaws.com/nodegroup"
    assert all(i.node_pool != "" for i in scenario_result.launches)


def test_allocatable_parity(scenario_result):
    """Every node launched offers what the scheduler packed it for (max pods, reserved resources)."""
    assert_allocatable_parity(scenario_result, SCENARIO)


def test_a_pod_left_to_cluster_autoscaler_says_so_once(scenario_result):
    """`kubectl describe pod` on a pod a node group serves: carpool's `FailedScheduling` says it is not
    carpool's to serve and why (written once, though the watcher publishes the pod every minute)."""
    left = [e for e in scenario_result.events if e.reason == "FailedScheduling" and "not carpool's to serve" in e.message]
    assert left and all("eks.amazonaws.com/nodegroup" in e.message and e.count == 1 for e in left)
    assert not [e for e in scenario_result.events if e.reason == "Nominated" and e.name in {x.name for x in left}]
