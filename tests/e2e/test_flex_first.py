"""`make demo`: c7i-flex first, general-purpose fallback in the same invocation, back to flex later."""

from .conftest import assert_allocatable_parity, registered

SCENARIO = "flex-first.yaml"
ICE_UNTIL = 180


def test_every_pod_runs(scenario_result):
    r = scenario_result
    assert r.pods.total == 40
    assert r.pods.scheduled == 40 and r.pods.pending == 0
    assert r.expectations == {"allPodsScheduled": True}


def test_flex_was_tried_first_and_failed_with_capacity_errors(scenario_result):
    failures = scenario_result.launch_failures
    assert failures, "the provisioner never asked EC2 for c7i-flex"
    assert {f.error_code for f in failures} == {"InsufficientInstanceCapacity"}
    assert all(f.instance_type.startswith("c7i-flex.") for f in failures)
    assert all(f.at < ICE_UNTIL for f in failures)


def test_fallback_launched_in_the_same_invocation(scenario_result):
    """The first batch's pods did not wait for another batch: general capacity came with the first
    provisioner invocation, after the flex capacity errors."""
    start = min(i.launched_at for i in scenario_result.launches)
    first = [i for i in scenario_result.launches if i.launched_at == start]
    assert start < 15, "the first pods waited for more than the first provisioner invocation"
    assert {i.node_pool for i in first} == {"general"}
    # and every one of those pods was bound as soon as those nodes were Ready (boot 40 s + registration
    # 15 s): none waited for a node from a later batch
    ready = next(p for p in scenario_result.timeline if p.at >= start + 40 + 15 + 10)
    assert ready.at < 300 and ready.pending_pods == 0


def test_no_flex_during_the_shortage_and_flex_again_afterwards(scenario_result):
    during = [i for i in scenario_result.launches if i.launched_at < ICE_UNTIL]
    assert all(i.node_pool == "general" for i in during)
    later = [i for i in scenario_result.launches if i.launched_at >= 300]
    assert later, "the scale-up at 300 s launched nothing"
    assert all(i.node_pool == "flex" and i.instance_type.startswith("c7i-flex.") for i in later)


def test_nodes_carry_what_the_launch_decided(scenario_result):
    for inst in registered(scenario_result):
        assert inst.max_pods and inst.max_pods > 0
        assert inst.image_name.startswith("amazon-eks-node-al2023-x86_64-standard-1.32")


def test_nothing_dead_lettered_and_cost_reported(scenario_result):
    assert not any(scenario_result.dead_letters.values())
    assert scenario_result.hourly_cost > 0
    assert scenario_result.invocations["provisioner"] >= 1
    # the stack's schedule, not the timeline's ticks: one run a minute from the start (the run the
    # schedule starts at the very end has not reached its handler when the scenario ends)
    assert scenario_result.invocations["watcher"] == len(range(0, int(scenario_result.duration_seconds), 60))


def test_allocatable_parity(scenario_result):
    """Every node launched offers what the scheduler packed it for (max pods, reserved resources)."""
    assert_allocatable_parity(scenario_result, SCENARIO)


def test_carpool_own_aws_cost_is_reported_for_every_service(scenario_result):
    from carpool.sim.run import own_cost

    cost = scenario_result.own_cost
    assert tuple(cost.services) == own_cost.SERVICES
    # every usage-driven service; the stack's fixed monitoring is not the simulation's to count
    used = {k: v for k, v in cost.services.items() if k not in own_cost.FIXED_SERVICES}
    assert all(usd > 0 for usd in used.values()), cost.services
    assert all(cost.services[k] == 0 for k in own_cost.FIXED_SERVICES)
    assert cost.monthly_usd == round(sum(cost.services.values()), 2)
    assert {"watcher", "provisioner", "registrar", "disruption"} <= set(cost.lambda_by_function)
    # the deployed watcher resyncs, then follows its watch stream for its whole run (billed by the second)
    assert 60_000 <= cost.per_invocation["watcher"]["billedMs"] <= 90_000
    assert cost.per_invocation["provisioner"]["writeUnits"] > 0


def test_status_at_the_end_lists_each_running_node_as_a_claim_and_each_pools_usage(scenario_result):
    """`carpool status` on the simulation's local AWS: a claim per instance still running, with its node,
    and the pools' usage counting exactly those nodes."""
    status = scenario_result.status
    running = {i.instance_id: i for i in scenario_result.instances if i.running}
    assert {c.instance_id for c in status.claims} == set(running)
    assert all(c.node and c.state == "registered" for c in status.claims)
    assert {c.instance_id: c.nodepool for c in status.claims} == {k: i.node_pool for k, i in running.items()}
    assert {p.name: p.usage.get("nodes", 0) for p in status.pools} == scenario_result.nodes_by_pool()
    assert status.learned and status.pending == []


def test_kubectl_describe_shows_carpools_events_on_the_pods_and_the_nodes(scenario_result):
    """Karpenter's events, where a user looks: every pod carpool launched for is `Nominated` to its claim,
    every node it launched is `Registered` and `Initialized`, each written once."""
    events = scenario_result.events
    nominated = {e.name for e in events if e.kind == "Pod" and e.reason == "Nominated"}
    # every pod that waited for a node carpool launched (one of the 40 found room on a node already up)
    assert len(nominated) >= scenario_result.time_to_capacity.through_new_nodes >= 39
    assert all(e.message.startswith("Pod should schedule on: nodeclaim/") for e in events if e.reason == "Nominated")
    joined = {i.node_name for i in scenario_result.instances if i.node_name}
    for reason in ("Registered", "Initialized"):
        assert {e.name for e in events if e.kind == "Node" and e.reason == reason} >= joined, reason
    # said once each; only what holds run after run (a node kept, a disruption blocked) is counted again
    assert all(e.count == 1 for e in events if e.reason not in ("Unconsolidatable", "DisruptionBlocked"))
