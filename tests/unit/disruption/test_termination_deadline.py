"""The drain deadline (NodePool `terminationGracePeriod`) as Karpenter's terminator applies it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from carpool.api.k8s import Pod
from carpool.disruption.deadline import delete_grace_seconds, must_delete, termination_deadline

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def pod(grace: int | None = None, deleted_at: datetime | None = None) -> Pod:
    meta: dict[str, object] = {"name": "p", "namespace": "shop"}
    if deleted_at is not None:
        meta["deletionTimestamp"] = deleted_at.isoformat()
    spec: dict[str, object] = {"containers": [{"name": "c", "image": "x"}]}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return Pod.model_validate({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})


def test_no_grace_period_means_no_deadline() -> None:
    assert termination_deadline(START, None) is None
    assert not must_delete(pod(), None, START + timedelta(days=30))


def test_the_deadline_is_the_drain_start_plus_the_grace_period() -> None:
    assert termination_deadline(START, 600) == START + timedelta(minutes=10)


def test_a_pod_is_deleted_once_its_own_grace_would_end_past_the_deadline() -> None:
    deadline = START + timedelta(minutes=10)
    slow = pod(grace=120)
    assert not must_delete(slow, deadline, deadline - timedelta(seconds=120))  # still ends in time if evicted
    assert must_delete(slow, deadline, deadline - timedelta(seconds=119))
    # no terminationGracePeriodSeconds: the API server's default, 30 s
    assert not must_delete(pod(), deadline, deadline - timedelta(seconds=30))
    assert must_delete(pod(), deadline, deadline - timedelta(seconds=29))


def test_with_steps_a_minute_apart_the_pod_is_deleted_at_the_last_step_its_grace_still_fits() -> None:
    deadline = START + timedelta(minutes=10)
    minute = timedelta(minutes=1)
    slow = pod(grace=120)
    assert not must_delete(slow, deadline, deadline - timedelta(seconds=180), lead=minute)
    # the next step (60 s on) would leave it 119 s of its 120: this one deletes it, with 179 s to go
    at = deadline - timedelta(seconds=179)
    assert must_delete(slow, deadline, at, lead=minute)
    assert delete_grace_seconds(deadline, at) == 179 >= 120


def test_a_terminating_pod_is_deleted_again_only_if_it_would_outlive_the_deadline() -> None:
    deadline = START + timedelta(minutes=10)
    assert not must_delete(pod(deleted_at=deadline - timedelta(seconds=1)), deadline, deadline)
    assert must_delete(pod(deleted_at=deadline + timedelta(seconds=1)), deadline, START)


def test_the_deleted_pod_gets_what_remains_and_at_least_a_second() -> None:
    deadline = START + timedelta(minutes=10)
    assert delete_grace_seconds(deadline, deadline - timedelta(seconds=90.5)) == 90
    assert delete_grace_seconds(deadline, deadline + timedelta(minutes=5)) == 1
