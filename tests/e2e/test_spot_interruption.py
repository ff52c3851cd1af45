"""A spot interruption warning: the node is cordoned and drained, a replacement launched, pods run again."""

from .conftest import assert_allocatable_parity

SCENARIO = "005-spot-interruption.yaml"


def test_pods_run_again_after_the_instance_is_reclaimed(scenario_result):
    assert scenario_result.pods.total == 4 and scenario_result.pods.pending == 0


def interrupted(result):
    """The one instance of the first launch (before the warning at 120 s)."""
    [first] = [i for i in result.launches if i.launched_at < 120]
    return first


def test_the_interrupted_instance_was_reclaimed_and_replaced(scenario_result):
    gone = interrupted(scenario_result)
    # carpool may terminate it itself once drained; EC2 takes it two minutes after the warning at the latest
    assert gone.terminated_at is not None and 120 <= gone.terminated_at <= 120 + 120
    replacements = [i for i in scenario_result.launches if i.launched_at >= 120]
    assert replacements, "no replacement was launched"
    assert min(i.launched_at for i in replacements) <= 130  # within a tick of the warning
    assert len(scenario_result.instances) >= 1


def test_the_node_was_cordoned_and_drained_through_the_api(scenario_result):
    actions = [d.message for d in scenario_result.decisions if d.source == "k8s-api"]
    node = interrupted(scenario_result).node_name
    assert f"cordon {node}" in actions or any(a.startswith(f"taint {node}") for a in actions)
    assert any(a.startswith("evict default/web-") for a in actions)
    assert scenario_result.invocations.get("interruption", 0) >= 1


def test_allocatable_parity(scenario_result):
    """Every node launched offers what the scheduler packed it for (max pods, reserved resources)."""
    assert_allocatable_parity(scenario_result, SCENARIO)
