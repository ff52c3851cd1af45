"""Interruption events older than five minutes (by their own `time`, against the injected clock) are
dropped and counted, never acted on."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from carpool import observability
from carpool.api import events as ev
from carpool.app import interrupt
from carpool.app.cluster_config_source import ClusterConfigSource
from carpool.app.settings import Settings
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.state.memory import MemoryLedger
from carpool.state.models import Claim, ClaimStatus

EVENT_TIME = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
CLUSTER = "stale-test"


def _event(detail_type: str, detail: dict[str, Any]) -> ev.AwsEvent:
    return ev.parse_aws_event(json.dumps({
        "version": "0", "id": "12345678-1234-1234-1234-123456789012", "detail-type": detail_type,
        "source": "aws.ec2", "account": "123456789012", "time": EVENT_TIME.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": "us-east-1", "resources": [], "detail": detail,
    }))


def _terminated(instance_id: str) -> ev.AwsEvent:
    return _event(ev.INSTANCE_STATE_CHANGE, {"instance-id": instance_id, "state": "terminated"})


def _ledger_with(instance_id: str) -> MemoryLedger:
    """A launched claim whose node never joined: acting on a state change only releases the claim."""
    ledger = MemoryLedger()
    claim = Claim(name="c1", nodepool="default", nodeclass="default", created_at=EVENT_TIME,
                  instance_types=["m5.large"], pods=[], reserved={"nodes": 1}, requested={})
    ledger.reserve(claim, None, EVENT_TIME, 600)
    ledger.mark_launched(claim.model_copy(update={"status": ClaimStatus.LAUNCHED, "instance_id": instance_id}))
    return ledger


class _Ec2:
    """DescribeInstances: every instance asked about is terminated (what the state changes say)."""

    def describe_instances(self, filters: list[dict[str, Any]]) -> list[dict[str, Any]]:
        ids = next(f["Values"] for f in filters if f["Name"] == "instance-id")
        return [{"InstanceId": i, "State": {"Name": "terminated"}} for i in ids]


def _deps(ledger: MemoryLedger, age: timedelta) -> Any:
    # a cluster with no Karpenter Lease: carpool acts (`carpool.app.standstill`)
    cluster = SimulatedCluster(lambda: EVENT_TIME + age)
    return SimpleNamespace(ledger=ledger, clock=lambda: EVENT_TIME + age, compute=_Ec2(), settings=Settings(CLUSTER),
                           cluster=cluster, cache={}, config=ClusterConfigSource(cluster))


@pytest.fixture(autouse=True)
def _cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CARPOOL_CLUSTER_NAME", CLUSTER)


def test_an_event_older_than_five_minutes_is_dropped_with_a_metric() -> None:
    ledger = _ledger_with("i-1")
    before = observability.total("InterruptionsStale", kind="state-change", cluster=CLUSTER)
    summary, retry = interrupt.run({"m1": _terminated("i-1")}, _deps(ledger, timedelta(seconds=301)))
    assert retry == {}  # dropping is the outcome, not a failure to retry
    assert summary.handled == {}
    assert list(summary.stale) == ["i-1"] and "301 s old" in summary.stale["i-1"]
    assert ledger.find_by_instance("i-1") is not None  # the claim was not released
    assert observability.total("InterruptionsStale", kind="state-change", cluster=CLUSTER) - before == 1


def test_an_event_five_minutes_old_is_still_acted_on() -> None:
    ledger = _ledger_with("i-1")
    stale_before = observability.total("InterruptionsStale", cluster=CLUSTER)
    summary, _ = interrupt.run({"m1": _terminated("i-1")}, _deps(ledger, interrupt.MAX_EVENT_AGE))
    assert summary.handled == {"i-1": "state-change"}
    assert summary.stale == {}
    assert ledger.find_by_instance("i-1") is None  # released
    assert observability.total("InterruptionsStale", cluster=CLUSTER) == stale_before


def test_age_comes_from_the_injected_clock_not_the_wall_clock() -> None:
    # The event is from 2024: against the wall clock it would be stale; the deps' clock says 10 s.
    ledger = _ledger_with("i-1")
    summary, _ = interrupt.run({"m1": _terminated("i-1")}, _deps(ledger, timedelta(seconds=10)))
    assert summary.handled == {"i-1": "state-change"}


def test_a_stale_event_for_another_owners_instance_is_only_ignored() -> None:
    before = observability.total("InterruptionsStale", cluster=CLUSTER)
    summary, _ = interrupt.run({"m1": _terminated("i-other")}, _deps(MemoryLedger(), timedelta(hours=1)))
    assert list(summary.ignored) == ["i-other"] and summary.stale == {}
    assert observability.total("InterruptionsStale", cluster=CLUSTER) == before


@pytest.mark.parametrize(
    ("detail_type", "detail", "kind"),
    [
        (ev.SPOT_INTERRUPTION, {"instance-id": "i-1", "instance-action": "terminate"}, "spot-interruption"),
        (ev.REBALANCE_RECOMMENDATION, {"instance-id": "i-1"}, "rebalance-recommendation"),
    ],
)
def test_stale_events_are_counted_by_kind(detail_type: str, detail: dict[str, Any], kind: str) -> None:
    before = observability.total("InterruptionsStale", kind=kind, cluster=CLUSTER)
    summary, _ = interrupt.run({"m1": _event(detail_type, detail)}, _deps(_ledger_with("i-1"), timedelta(minutes=6)))
    assert list(summary.stale) == ["i-1"]
    assert observability.total("InterruptionsStale", kind=kind, cluster=CLUSTER) - before == 1


def test_event_age_reads_a_zoneless_time_as_utc() -> None:
    event = _terminated("i-1").model_copy(update={"time": EVENT_TIME.replace(tzinfo=None)})
    assert interrupt.event_age(event, EVENT_TIME + timedelta(seconds=42)) == timedelta(seconds=42)
