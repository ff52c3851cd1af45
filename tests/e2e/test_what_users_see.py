"""What a Karpenter user sees with `kubectl describe` (issue 31), held by the simulated API server: a pod no
NodePool can serve carries `FailedScheduling` with each pool's reason; pods carpool launched for carry
`Nominated`; nodes carry their lifecycle; a capacity error and a disruption a PodDisruptionBudget blocks are
said on the objects they concern."""

SCENARIO = "019-what-users-see.yaml"


def _on(result, kind, name):
    return [e for e in result.events if e.kind == kind and e.name == name]


def test_the_unservable_pod_says_why_for_every_nodepool(scenario_result):
    (failed,) = [e for e in _on(scenario_result, "Pod", "huge") if e.reason == "FailedScheduling"]
    assert failed.type == "Warning" and failed.message.startswith("Failed to schedule pod, ")
    for pool in ("flex", "general"):
        assert f'incompatible with nodepool "{pool}"' in failed.message
    assert "cpu=500" in failed.message
    # written once although the watcher publishes the pod every minute: its reasons did not change
    assert failed.count == 1


def test_every_served_pod_is_nominated_to_its_claim(scenario_result):
    web = [e for e in scenario_result.events if e.kind == "Pod" and e.name.startswith("web-")]
    assert len({e.name for e in web if e.reason == "Nominated"}) == 12
    claims = {c.name for c in scenario_result.status.claims}
    assert {e.message.rsplit("/", 1)[-1] for e in web if e.reason == "Nominated"} <= claims


def test_every_node_says_it_registered_and_initialized(scenario_result):
    for instance in scenario_result.instances:
        reasons = {e.reason for e in _on(scenario_result, "Node", instance.node_name)}
        assert {"Launched", "Registered", "Initialized"} <= reasons, instance.node_name


def test_a_drift_the_budget_blocks_is_said_on_each_node_and_counted_not_repeated(scenario_result):
    """After the new AMI every node has drifted, and web's budget allows no eviction: Karpenter's
    `DisruptionBlocked` names the budget, one event per node whose count grows with each run that waits."""
    for instance in scenario_result.instances:
        (blocked,) = [e for e in _on(scenario_result, "Node", instance.node_name) if e.reason == "DisruptionBlocked"]
        assert blocked.message.startswith("Cannot disrupt Node: ")
        assert "PodDisruptionBudget default/web" in blocked.message
        assert blocked.count > 1
    assert not [e for e in scenario_result.events if e.reason == "DisruptionTerminating"]


def test_the_capacity_error_is_said_on_the_pods_that_waited_for_it(scenario_result):
    """c7i-flex had no capacity: the pods the flex claim was for carry `InsufficientCapacityError` naming
    the offerings tried, and are then nominated to the claim that launched instead."""
    ice = [e for e in scenario_result.events if e.reason == "InsufficientCapacityError"]
    assert ice and all(e.kind == "Pod" and e.type == "Warning" for e in ice)
    assert all("insufficient capacity for c7i-flex." in e.message for e in ice)
    nominated = {e.name for e in scenario_result.events if e.reason == "Nominated"}
    assert {e.name for e in ice} <= nominated


def test_the_lower_weight_pool_launches_in_the_invocation_that_met_the_capacity_error(scenario_result):
    """flex has no capacity for any of its offerings (spot and on-demand, three zones, three sizes): the
    invocation that hit the errors walks them all and launches from `general` at once, about 12 s after the
    pods went pending (a watcher batch, the provisioner, CreateFleet), not a watcher minute later."""
    assert {i.node_pool for i in scenario_result.launches} == {"general"}
    assert all(i.launched_at <= 15 for i in scenario_result.launches)
    assert scenario_result.time_to_capacity.pending_to_create_fleet.max <= 15
    assert not [d for d in scenario_result.decisions if "will be retried" in d.message]
