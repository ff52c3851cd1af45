"""Time to capacity from hand-made stamps: nearest-rank percentiles, each step's durations, carpool's
overhead (a pod's wait less EC2's boot and the kubelet's registration), which pods count for the launch
steps, and where the stamps come from (the simulated cluster, and a hook on CreateFleet's answers)."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from carpool import labels
from carpool.ports import NodePatch
from carpool.sim.cluster.capacity_stamps import CapacityStamps
from carpool.sim.run.faults import InvocationKilled
from carpool.sim.run.result import Durations, SimResult
from carpool.sim.run.time_to_capacity import (
    FleetLaunches,
    Launched,
    NodeLaunch,
    Wait,
    durations,
    percentile,
    summary,
    waits,
)

from ..conftest import make_node, make_pod

UNREGISTERED = {"key": labels.UNREGISTERED_TAINT, "effect": "NoExecute"}


# -- percentiles ----------------------------------------------------------------------------------------
def test_percentiles_are_nearest_rank_values_some_pod_had() -> None:
    hundred = [float(v) for v in range(1, 101)]
    assert (percentile(hundred, 50), percentile(hundred, 99)) == (50.0, 99.0)
    ten = [float(v) for v in range(1, 11)]
    assert (percentile(ten, 50), percentile(ten, 99)) == (5.0, 10.0)
    assert percentile([7.0], 50) == percentile([7.0], 99) == 7.0


def test_durations_of_nothing_are_zero_and_of_some_values_exact() -> None:
    assert durations([]) == Durations()
    assert durations([30.0, 5.0, 10.0]) == Durations(count=3, p50=10.0, p99=30.0, max=30.0)
    assert durations([0.1 + 0.2]) == Durations(count=1, p50=0.3, p99=0.3, max=0.3)  # rounded to milliseconds


# -- the steps -------------------------------------------------------------------------------------------
def test_each_step_and_carpools_overhead_from_hand_made_waits() -> None:
    pods = [
        # pending, bound, CreateFleet, Node created, Ready, unregistered lifted
        Launched(0.0, 70.0, fleet=10.0, node=50.0, ready=65.0, registered=55.0),
        Launched(5.0, 70.0, fleet=10.0, node=50.0, ready=65.0, registered=55.0),
        Launched(0.0, 110.0, fleet=30.0, node=80.0, ready=95.0, registered=100.0),
        Wait(20.0, 25.0),  # bound to a node that already ran
    ]

    ttc = summary(pods)

    assert (ttc.pods, ttc.through_new_nodes) == (4, 3)
    assert ttc.pending_to_create_fleet == Durations(count=3, p50=10.0, p99=30.0, max=30.0)
    assert ttc.create_fleet_to_node == Durations(count=3, p50=40.0, p99=50.0, max=50.0)
    assert ttc.node_to_ready == Durations(count=3, p50=15.0, p99=15.0, max=15.0)
    assert ttc.node_to_registered == Durations(count=3, p50=5.0, p99=20.0, max=20.0)
    assert ttc.registered_to_bound == Durations(count=3, p50=15.0, p99=15.0, max=15.0)
    assert ttc.pending_to_bound == Durations(count=4, p50=65.0, p99=110.0, max=110.0)
    # (CreateFleet - pending) + (bound - Ready): 10 + 5, 5 + 5, 30 + 15
    assert ttc.carpool_overhead == Durations(count=3, p50=15.0, p99=45.0, max=45.0)


def test_the_json_shape_is_camel_case_steps_of_count_and_percentiles() -> None:
    ttc = summary([Launched(0.0, 70.0, fleet=10.0, node=50.0, ready=65.0, registered=55.0)])
    doc = SimResult(scenario="s", duration_seconds=1.0, time_to_capacity=ttc).to_json_dict()["timeToCapacity"]
    assert doc["pods"] == doc["throughNewNodes"] == 1
    assert doc["pendingToCreateFleet"] == {"count": 1, "p50": 10.0, "p99": 10.0, "max": 10.0}
    assert set(doc) == {"pods", "throughNewNodes", "pendingToCreateFleet", "createFleetToNode", "nodeToReady",
                        "nodeToRegistered", "registeredToBound", "pendingToBound", "carpoolOverhead"}


def test_only_pods_a_node_was_launched_for_while_they_waited_count_for_the_launch_steps() -> None:
    stamps = CapacityStamps()
    stamps.node_created("n1", make_node("n1", taints=[UNREGISTERED]), 50.0)
    stamps.node_changed("n1", make_node("n1"), 55.0)
    stamps.node_created("n2", make_node("n2", taints=[UNREGISTERED]), 50.0)
    stamps.node_changed("n2", make_node("n2"), 55.0)
    stamps.node_created("ng-1", make_node("ng-1"), 0.0)  # a node group's: never had the taint
    launches = {"n1": NodeLaunch(10.0, 65.0), "n2": NodeLaunch(10.0, 65.0)}
    for key, pending, node, bound in [("a", 0.0, "n1", 70.0), ("b", 100.0, "n1", 105.0), ("c", 0.0, "ng-1", 30.0),
                                      ("d", 0.0, None, None), ("e", 0.0, "n2", 52.0)]:
        stamps.pod_pending(f"default/{key}", pending)
        if node is not None and bound is not None:
            stamps.pod_bound(f"default/{key}", node, bound)

    found = {w.pending + w.bound: w for w in waits(stamps, launches)}

    assert found == {
        70.0: Launched(0.0, 70.0, fleet=10.0, node=50.0, ready=65.0, registered=55.0),
        205.0: Wait(100.0, 105.0),  # n1 was running before b waited
        30.0: Wait(0.0, 30.0),  # a node group's node
        52.0: Wait(0.0, 52.0),  # e tolerates the unregistered taint: bound before it was lifted
    }  # d was never bound


# -- the stamps ------------------------------------------------------------------------------------------
def test_a_pod_waits_anew_when_marked_again_and_only_its_first_binding_counts() -> None:
    stamps = CapacityStamps()
    stamps.pod_bound("default/never-marked", "n1", 3.0)
    stamps.pod_pending("default/web", 10.0)
    stamps.pod_bound("default/web", "n1", 20.0)
    stamps.pod_bound("default/web", "n2", 30.0)
    assert "default/never-marked" not in stamps.pods
    assert (stamps.pods["default/web"].bound, stamps.pods["default/web"].node) == (20.0, "n1")
    stamps.pod_pending("default/web", 40.0)  # recreated under its name (a StatefulSet's pod)
    assert stamps.pods["default/web"].bound is None


def test_the_simulated_cluster_stamps_marking_node_creation_the_lifted_taint_and_binding(cluster, clock) -> None:
    cluster.add_pod(make_pod("web-0"))
    cluster.bind()  # no node: marked Unschedulable at 0
    clock.advance(40)
    cluster.add_node(make_node("n1", taints=[UNREGISTERED]))
    clock.advance(5)
    cluster.bind()  # the unregistered taint keeps the pod off
    cluster.patch_node("n1", NodePatch(labels={labels.REGISTERED: "true"}))
    clock.advance(3)
    cluster.patch_node("n1", NodePatch(remove_taint_keys=frozenset({labels.UNREGISTERED_TAINT})))
    clock.advance(2)
    cluster.patch_node("n1", NodePatch(labels={"a": "b"}))
    cluster.bind()

    pod, node = cluster.stamps.pods["default/web-0"], cluster.stamps.nodes["n1"]
    assert (pod.pending, pod.bound, pod.node) == (0.0, 50.0, "n1")
    assert (node.created, node.unregistered, node.lifted) == (40.0, True, 48.0)


# -- CreateFleet's answers ------------------------------------------------------------------------------
@pytest.fixture
def ec2():
    return boto3.client("ec2", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s")


def _answer(ids: list[str]) -> dict:
    return {"FleetId": "fleet-1", "Instances": [{"InstanceIds": ids, "InstanceType": "m5.large"}] if ids else [],
            "Errors": []}


def test_each_create_fleet_answer_is_stamped_with_the_simulated_time_even_when_the_invocation_dies(ec2) -> None:
    now = [12.0]
    launches = FleetLaunches.install(ec2, lambda: now[0])

    def killed(**_: object) -> None:  # the crash faults' hook, registered before ours was
        raise InvocationKilled("after CreateFleet")

    with Stubber(ec2) as stub:
        stub.add_response("create_fleet", _answer(["i-1", "i-2"]))
        stub.add_response("create_fleet", _answer([]))
        stub.add_response("create_fleet", _answer(["i-3"]))
        ec2.create_fleet(LaunchTemplateConfigs=[], TargetCapacitySpecification={"TotalTargetCapacity": 2})
        now[0] = 30.0
        ec2.create_fleet(LaunchTemplateConfigs=[], TargetCapacitySpecification={"TotalTargetCapacity": 1})
        ec2.meta.events.register("after-call.ec2.CreateFleet", killed)
        with pytest.raises(InvocationKilled):
            ec2.create_fleet(LaunchTemplateConfigs=[], TargetCapacitySpecification={"TotalTargetCapacity": 1})

    assert launches.launched_at == {"i-1": 12.0, "i-2": 12.0, "i-3": 30.0}
    launches.uninstall(ec2)
    ec2.meta.events.unregister("after-call.ec2.CreateFleet", killed)
    with Stubber(ec2) as stub:
        stub.add_response("create_fleet", _answer(["i-4"]))
        ec2.create_fleet(LaunchTemplateConfigs=[], TargetCapacitySpecification={"TotalTargetCapacity": 1})
    assert "i-4" not in launches.launched_at
