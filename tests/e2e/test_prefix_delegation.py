"""Prefix delegation: one small instance holds the pods, and its user data says max pods 110."""

from .conftest import assert_allocatable_parity

SCENARIO = "004-prefix-delegation.yaml"
SMALL = ("large", "xlarge", "2xlarge")


def test_every_pod_runs_on_one_small_instance(scenario_result):
    assert scenario_result.pods.total == 60 and scenario_result.pods.pending == 0
    assert len(scenario_result.launches) == 1
    inst = scenario_result.launches[0]
    assert inst.instance_type.split(".")[1] in SMALL, inst.instance_type


def test_the_node_registered_with_the_prefix_delegation_max_pods(scenario_result):
    """The node's pod capacity comes from the user data carpool wrote (the kubelet's --max-pods)."""
    [inst] = scenario_result.launches
    assert inst.max_pods == 110


def test_allocatable_parity(scenario_result):
    """Every node launched offers what the scheduler packed it for (max pods, reserved resources)."""
    assert_allocatable_parity(scenario_result, SCENARIO)
