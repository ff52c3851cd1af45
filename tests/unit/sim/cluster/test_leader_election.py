"""The simulated Karpenter controller's Lease (`carpool.sim.cluster.leader_election`), modelled on client-go's
leader election with controller-runtime's defaults: renewed every 2 s while it runs, released on a clean
stop, left to expire after a crash; and the Leases the simulated API server refuses as the real one does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from carpool.karpenter_lease import from_json, is_active
from carpool.sim.cluster.leader_election import lease_problem, renewer, written_at
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.sim.cluster.specs import KarpenterController

START = datetime(2026, 5, 1, tzinfo=UTC)


def controller(**fields: object) -> KarpenterController:
    return KarpenterController.model_validate({"from": 10, "until": 100, **fields})


def renewed(c: KarpenterController, elapsed: float) -> float | None:
    raw = written_at(c, elapsed, START)
    lease = from_json(raw) if raw is not None else None
    return (lease.renew_time - START).total_seconds() if lease is not None and lease.renew_time else None


def test_renewed_every_retry_period_while_it_runs() -> None:
    c = controller()
    assert written_at(c, 9.9, START) is None
    assert [renewed(c, t) for t in (10, 11.9, 12, 57.3, 99.9)] == [10, 10, 12, 56, 98]
    lease = from_json(written_at(c, 57.3, START))  # type: ignore[arg-type]
    assert (lease.holder, lease.duration_seconds, lease.namespace) == (c.holder, 15, "kube-system")


def test_a_clean_stop_releases_the_lease_at_once() -> None:
    lease = from_json(written_at(controller(), 100, START))  # type: ignore[arg-type]
    assert (lease.holder, lease.duration_seconds) == ("", 1)
    assert not is_active(lease, START + timedelta(seconds=100))


def test_a_crash_leaves_the_last_renewal_until_the_lease_expires() -> None:
    c = controller(stop="crash")
    assert renewed(c, 100) == renewed(c, 500) == 98  # the renewal due at 100 never happened
    lease = from_json(written_at(c, 500, START))  # type: ignore[arg-type]
    assert lease.holder == c.holder
    assert is_active(lease, START + timedelta(seconds=117.9)) and not is_active(lease, START + timedelta(seconds=118))


def test_the_run_writes_the_lease_before_a_read_only_when_it_changed() -> None:
    now = [0.0]
    cluster = SimulatedCluster(lambda: START + timedelta(seconds=now[0]))
    cluster.before_lease_read = renewer([controller()], lambda: now[0], START, cluster.put_lease)
    assert cluster.get_lease("kube-system", "karpenter-leader-election") is None
    now[0] = 20.5
    first = cluster.get_lease("kube-system", "karpenter-leader-election")
    version = cluster.resource_version
    assert first is not None and first.renew_time == START + timedelta(seconds=20)
    assert cluster.get_lease("kube-system", "karpenter-leader-election") == first and cluster.resource_version == version
    now[0] = 150
    released = cluster.get_lease("kube-system", "karpenter-leader-election")
    assert released is not None and released.holder == "" and released.uid == first.uid


def test_what_the_api_server_refuses() -> None:
    assert lease_problem({"spec": {"renewTime": "2026-05-01T00:00:02.123456Z", "leaseDurationSeconds": 15}}) is None
    assert "parsing time" in (lease_problem({"spec": {"renewTime": "2026-05-01T00:00:02Z"}}) or "")
    assert "parsing time" in (lease_problem({"spec": {"acquireTime": "2026-05-01T00:00:02.1234Z"}}) or "")
    assert "greater than 0" in (lease_problem({"spec": {"leaseDurationSeconds": 0}}) or "")
    answer = SimulatedCluster(lambda: START).put_lease({"metadata": {"name": "l", "namespace": "n"},
                                                        "spec": {"renewTime": "2026-05-01T00:00:02Z"}})
    assert answer.code == 400
