"""Two waves of six pods three minutes apart on the deployed clock (issue 30, item 8): consolidation never
takes the room that pods nominated to a node's claim were launched for, so four nodes are launched for the
four needed, none is terminated, and every pod is bound."""

SCENARIO = "018-two-waves-nominated-room.yaml"
NEEDED = 4


def test_four_launches_for_four_nodes(scenario_result):
    launched = [(i.instance_type, round(i.launched_at), i.terminated_at) for i in scenario_result.launches]
    assert len(launched) == NEEDED, launched
    assert all(i.terminated_at is None for i in scenario_result.launches), launched


def test_every_pod_is_bound(scenario_result):
    assert scenario_result.pods.total == 12 and scenario_result.pods.pending == 0, scenario_result.pods


def test_no_node_is_consolidated_onto_room_nominated_pods_wait_for(scenario_result):
    taken = [d.message for d in scenario_result.decisions if d.source == "disruption" and "underutilized: delete" in d.message]
    assert taken == []


def test_the_second_waves_nodes_were_initialized_before_their_pods_bound(scenario_result):
    """The scenario shows the race it is about: a disruption run fell between the second wave's nodes
    being labelled initialized and the kube-scheduler binding the pods launched for them."""
    initialized = [d.at for d in scenario_result.decisions if d.source == "registrar" and "initialized node" in d.message]
    runs = [d.at for d in scenario_result.decisions if d.source == "disruption"]
    second = [t for t in initialized if t > 180]
    assert second, "the second wave's nodes never initialized"
    assert any(min(second) < r < min(second) + 8 for r in runs), (second, sorted(set(runs)))
