"""The rule that says a Karpenter controller is active: its Lease names a holder and was renewed less than
`leaseDurationSeconds` + `CLOCK_SKEW` ago (`carpool.karpenter_lease`), at the boundaries; and the Lease's
JSON read as the API server serves it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from carpool import karpenter_lease
from carpool.karpenter_lease import CLOCK_SKEW, Lease, LeaseUnreadable, from_json, is_active

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
HOLDER = "karpenter-5d8f9c7b6d-x2x7q_6f1e2d3c"
TICK = timedelta(microseconds=1)


def lease(holder: str = HOLDER, renewed: datetime | None = NOW, duration: int | None = 15) -> Lease:
    return Lease("kube-system", karpenter_lease.LEASE_NAME, "uid-1", holder, renewed, duration)


def test_karpenters_own_names_and_timing() -> None:
    assert karpenter_lease.LEASE_NAME == "karpenter-leader-election"
    assert karpenter_lease.DEFAULT_NAMESPACE == "kube-system"
    assert (karpenter_lease.LEASE_DURATION_SECONDS, karpenter_lease.RETRY_PERIOD_SECONDS) == (15, 2)


@pytest.mark.parametrize(("renewed_ago", "active"), [
    (timedelta(0), True),
    (timedelta(seconds=15), True),  # expired on the writer's clock, but within the skew allowed
    (timedelta(seconds=15) + CLOCK_SKEW - TICK, True),
    (timedelta(seconds=15) + CLOCK_SKEW, False),
    (timedelta(minutes=10), False),
    (-timedelta(seconds=30), True),  # the writer's clock ahead of ours
])
def test_active_while_renewed_within_its_duration_and_the_skew(renewed_ago: timedelta, active: bool) -> None:
    assert is_active(lease(renewed=NOW - renewed_ago), NOW) is active


def test_the_lease_s_own_duration_counts() -> None:
    assert is_active(lease(renewed=NOW - timedelta(seconds=50), duration=60), NOW)
    assert not is_active(lease(renewed=NOW - timedelta(seconds=7), duration=1), NOW)
    # without one, controller-runtime's 15 s
    assert is_active(lease(renewed=NOW - timedelta(seconds=19), duration=None), NOW)
    assert not is_active(lease(renewed=NOW - timedelta(seconds=20), duration=None), NOW)


def test_no_lease_a_released_lease_and_one_never_renewed_are_not_active() -> None:
    assert not is_active(None, NOW)
    assert not is_active(lease(holder="", duration=karpenter_lease.RELEASED_DURATION_SECONDS), NOW)
    assert not is_active(lease(renewed=None), NOW)


def test_the_json_the_api_server_serves() -> None:
    raw = {"kind": "Lease", "apiVersion": "coordination.k8s.io/v1",
           "metadata": {"name": "karpenter-leader-election", "namespace": "kube-system", "uid": "u"},
           "spec": {"holderIdentity": HOLDER, "leaseDurationSeconds": 15,
                    "acquireTime": "2026-05-01T11:00:00.000000Z", "renewTime": "2026-05-01T11:59:58.123456Z"}}
    read = from_json(raw)
    assert read == Lease("kube-system", "karpenter-leader-election", "u", HOLDER,
                         datetime(2026, 5, 1, 11, 59, 58, 123456, tzinfo=UTC), 15)
    assert karpenter_lease.micro_time(read.renew_time) == "2026-05-01T11:59:58.123456Z"  # type: ignore[arg-type]
    released = from_json({"metadata": {"name": "x", "namespace": "y"}, "spec": {"leaseDurationSeconds": 1}})
    assert (released.holder, released.renew_time) == ("", None)


@pytest.mark.parametrize(("spec", "field"), [
    ({"renewTime": "yesterday"}, "spec.renewTime"),
    ({"renewTime": 5}, "spec.renewTime"),
    ({"leaseDurationSeconds": "15"}, "spec.leaseDurationSeconds"),
    ({"leaseDurationSeconds": True}, "spec.leaseDurationSeconds"),
])
def test_a_lease_not_as_served_names_its_field(spec: dict[str, object], field: str) -> None:
    with pytest.raises(LeaseUnreadable, match=f"^Lease kube-system/l: {field}: ") as caught:
        from_json({"metadata": {"name": "l", "namespace": "kube-system"}, "spec": spec})
    assert caught.value.field == field
