"""NodePool status as Karpenter core's nodepool controllers write it: counter, validation, readiness and
registration health."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from carpool.karpenter_status import nodepool as np
from carpool.karpenter_status.registration import Outcome

T0 = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
GIB = 2**30


def _pool(generation: int = 1, status: dict | None = None) -> dict:
    return {"metadata": {"name": "general", "uid": "u1", "generation": generation,
                         "creationTimestamp": "2026-12-01T00:00:00Z"}, "spec": {}, "status": status or {}}


def _class(ready: str = "True", reason: str = "Ready", message: str = "", generation: int = 1, **meta: object) -> dict:
    return {"metadata": {"name": "default", "generation": generation, **meta},
            "status": {"conditions": [{"type": "Ready", "status": ready, "reason": reason, "message": message,
                                       "observedGeneration": generation, "lastTransitionTime": "2026-12-01T00:00:00Z"}]}}


def _conditions(status: dict) -> dict[str, dict]:
    return {c["type"]: c for c in status["conditions"]}


def test_resources_are_the_pools_usage_as_kubernetes_quantities() -> None:
    usage = {"cpu": 4000, "memory": 15154 * 2**20, "pods": 58, "ephemeral-storage": 40 * GIB, "nodes": 2,
             "nvidia.com/gpu": 1}
    status = np.nodepool_status(_pool(), np.NodePoolFacts(usage=usage, nodeclass=_class()), T0).status
    assert status["resources"] == {"cpu": "4", "memory": "15154Mi", "pods": "58", "ephemeral-storage": "40Gi",
                                   "nodes": "2", "nvidia.com/gpu": "1"}
    assert status["nodes"] == 2


def test_an_empty_pool_lists_karpenters_base_resources_at_zero() -> None:
    status = np.nodepool_status(_pool(), np.NodePoolFacts(nodeclass=_class()), T0).status
    assert status["resources"] == {"cpu": "0", "memory": "0", "pods": "0", "ephemeral-storage": "0", "nodes": "0"}
    assert status["nodes"] == 0
    assert np.resource_list({"cpu": 1930}) ["cpu"] == "1930m"


def test_a_valid_pool_with_a_ready_class_is_ready() -> None:
    status = np.nodepool_status(_pool(), np.NodePoolFacts(nodeclass=_class()), T0).status
    cond = _conditions(status)
    assert cond["ValidationSucceeded"]["status"] == cond["NodeClassReady"]["status"] == cond["Ready"]["status"] == "True"
    assert cond["NodeRegistrationHealthy"]["status"] == "Unknown"  # no registration seen yet
    assert status["nodeClassObservedGeneration"] == 1


def test_validation_says_what_carpool_refused() -> None:
    facts = np.NodePoolFacts(problems=("spec.weight: must be at most 100",), nodeclass=_class())
    cond = _conditions(np.nodepool_status(_pool(), facts, T0).status)
    assert (cond["ValidationSucceeded"]["status"], cond["ValidationSucceeded"]["reason"],
            cond["ValidationSucceeded"]["message"]) == ("False", "NodePoolValidationFailed", "spec.weight: must be at most 100")
    assert cond["Ready"]["status"] == "False"


def test_node_class_ready_follows_the_class() -> None:
    missing = _conditions(np.nodepool_status(_pool(), np.NodePoolFacts(nodeclass=None), T0).status)
    assert (missing["NodeClassReady"]["reason"], missing["NodeClassReady"]["message"]) == (
        "NodeClassNotFound", "NodeClass not found on cluster")
    assert "NodeRegistrationHealthy" not in missing  # Karpenter's registration health waits for the class
    unready = _conditions(np.nodepool_status(_pool(), np.NodePoolFacts(
        nodeclass=_class("False", "UnhealthyDependents", "InstanceProfileReady=False")), T0).status)
    assert (unready["NodeClassReady"]["status"], unready["NodeClassReady"]["reason"],
            unready["NodeClassReady"]["message"]) == ("False", "UnhealthyDependents", "InstanceProfileReady=False")
    assert unready["Ready"]["status"] == "False"
    unknown = _conditions(np.nodepool_status(_pool(), np.NodePoolFacts(nodeclass=_class("Unknown", "X")), T0).status)
    assert unknown["NodeClassReady"]["reason"] == "NodeClassReadinessUnknown"
    going = _conditions(np.nodepool_status(_pool(), np.NodePoolFacts(
        nodeclass=_class(deletionTimestamp="2026-12-02T05:00:00Z")), T0).status)
    assert going["NodeClassReady"]["reason"] == "NodeClassTerminating"


def _run(status: dict, outcomes: list[Outcome], ring: tuple[bool, ...] | None, at: datetime,
         generation: int = 1, class_generation: int = 1) -> np.NodePoolStatus:
    return np.nodepool_status(_pool(generation, status), np.NodePoolFacts(
        nodeclass=_class(generation=class_generation), ring=ring, outcomes=outcomes), at)


def test_registration_health_turns_true_on_a_registration_and_false_on_half_the_ring_failing() -> None:
    first = _run({}, [], None, T0)
    healthy = _run(first.status, [Outcome(True)], first.ring, T0 + timedelta(minutes=1))
    assert _conditions(healthy.status)["NodeRegistrationHealthy"]["status"] == "True"
    one_failure = _run(healthy.status, [Outcome(False)], healthy.ring, T0 + timedelta(minutes=2))
    assert _conditions(one_failure.status)["NodeRegistrationHealthy"]["status"] == "True"  # 1 of 4
    two = _run(one_failure.status, [Outcome(False, "LaunchFailed", "no instance came")], one_failure.ring,
               T0 + timedelta(minutes=3))
    cond = _conditions(two.status)["NodeRegistrationHealthy"]
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "LaunchFailed", "no instance came")
    assert two.ring == (True, False, False)
    assert _conditions(two.status)["Ready"]["status"] == "True"  # not one of Ready's dependents


def test_registration_health_is_kept_across_a_restart_from_the_condition() -> None:
    first = _run({}, [], None, T0)
    failing = _run(first.status, [Outcome(False), Outcome(False)], first.ring, T0)
    assert _conditions(failing.status)["NodeRegistrationHealthy"]["status"] == "False"
    restarted = _run(failing.status, [Outcome(True)], None, T0 + timedelta(minutes=1))  # ring from the condition
    assert _conditions(restarted.status)["NodeRegistrationHealthy"]["status"] == "False"  # 2 of 4 still fail


def test_an_edit_of_the_pool_or_its_class_resets_registration_health() -> None:
    first = _run({}, [], None, T0)
    failing = _run(first.status, [Outcome(False), Outcome(False)], first.ring, T0)
    edited = _run(failing.status, [], failing.ring, T0 + timedelta(minutes=1), generation=2)
    assert _conditions(edited.status)["NodeRegistrationHealthy"]["status"] == "Unknown"
    assert edited.ring == ()
    class_edited = _run(failing.status, [], failing.ring, T0 + timedelta(minutes=1), class_generation=2)
    assert _conditions(class_edited.status)["NodeRegistrationHealthy"]["status"] == "Unknown"
    assert class_edited.status["nodeClassObservedGeneration"] == 2


def test_an_unchanged_pool_builds_the_same_status() -> None:
    facts = np.NodePoolFacts(usage={"cpu": 2000, "nodes": 1}, nodeclass=_class())
    first = np.nodepool_status(_pool(), facts, T0)
    again = np.nodepool_status(_pool(status=first.status), facts, T0 + timedelta(minutes=1))
    assert again.status == first.status
