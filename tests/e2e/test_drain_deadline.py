"""The drain deadline end to end (`examples/014-drain-deadline.yaml`): a pod whose PodDisruptionBudget
refuses every eviction holds its drifted node only until the NodePool's `terminationGracePeriod` (5 m)
is about to end; then it is deleted, its ReplicaSet's new pod runs on the replacement, and the node goes.
Bounds are in simulated time: the disruption function runs every minute."""

from __future__ import annotations

from carpool.sim.run.result import SimResult

SCENARIO = "014-drain-deadline.yaml"
PUBLISHED_AT = 300
GRACE = 300
POD_GRACE = 30
DISRUPTION_EVERY = 60


def _api(result: SimResult, verb: str) -> list[tuple[float, str]]:
    return [(d.at, d.message) for d in result.decisions if d.source == "k8s-api" and d.message.startswith(f"{verb} ")]


def test_the_budget_refuses_evictions_until_the_deadline_then_the_pod_is_deleted(scenario_result: SimResult) -> None:
    r = scenario_result
    tainted = [at for at, m in _api(r, "taint") if "karpenter.sh/disrupted" in m]
    refused = _api(r, "eviction-blocked")
    deleted = _api(r, "delete")
    assert tainted and refused, "the drifted node was drained and the budget held its pod"
    assert [m.split()[1] for _, m in deleted] == [deleted[0][1].split()[1]] and "default/ledger-" in deleted[0][1]
    assert not [m for _, m in _api(r, "evict") if "ledger" in m]  # never evicted: deleted
    drain_started = refused[0][0]
    deadline = drain_started + GRACE
    # deleted at the last (minutely) disruption run at which its own 30 s grace still ends by the deadline,
    # with all the time left: Karpenter, reconciling continuously, deletes it 30 s before the deadline
    at, message = deleted[0]
    assert deadline - POD_GRACE - DISRUPTION_EVERY < at <= deadline - POD_GRACE
    grace = int(message.rsplit("grace=", 1)[1].rstrip("s"))
    assert grace >= POD_GRACE and abs(at + grace - deadline) <= 1
    assert all(a < at for a, _ in refused)


def test_the_old_node_goes_and_the_pod_runs_on_the_replacement(scenario_result: SimResult) -> None:
    r = scenario_result
    assert r.pods.total == 1 and r.pods.pending == 0
    assert r.expectations == {"allPodsScheduled": True}
    old = [i for i in r.launches if i.launched_at < PUBLISHED_AT]
    assert len(old) == 1 and old[0].terminated_at is not None
    assert [i.image_name.rsplit("-", 1)[1] for i in r.instances] == ["v20250301"]
    assert not [d for d in r.decisions if d.level == "ERROR"]
