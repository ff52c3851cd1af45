"""The month the own-cost benchmark models from a simulation: metric series at the month's rates, the
disruption function's catalog rebuild at its own period."""

from __future__ import annotations

import pytest
from bench import own_cost as bench

from carpool.sim.run import own_cost

MEASURED = {"watcher": {"invocations": 10.0}, "provisioner": {"invocations": 2.0}}


def test_series_are_billed_at_the_months_rate_of_the_invocations_that_send_them() -> None:
    sends = {
        "Carpool WatcherRuns {cluster=c}": {"watcher": 10},  # every run: every hour of the month
        "Carpool NodeClaimsCreated {cluster=c, nodepool=a, reason=provisioning}": {"provisioner": 2},
        "Carpool NodePoolLimitUsed {cluster=c}": {"watcher": 10},
        "Carpool CatalogFallbacks {cluster=c}": {"provisioner": 2},
    }
    month = {"watcher": own_cost.MONTH_SECONDS / 60, "provisioner": 730.0}  # one launch an hour
    series = bench.metric_months(sends, MEASURED, month)
    assert series["Carpool WatcherRuns {cluster=c}"] == pytest.approx(1.0)
    # one pool's series spread over the month's pools, each sent a third as often
    pool = series["Carpool NodeClaimsCreated {cluster=c, nodepool=a, reason=provisioning}"]
    assert pool == pytest.approx(bench.NODEPOOLS * own_cost.hourly_share(1 / bench.NODEPOOLS))
    # the highest share of a pool limit used: one series for every pool and limit, all month (each pool's
    # usage is a log line); start-up fallbacks are not a month's
    gauges = [k for k in series if " NodePoolLimitUsed " in k or " NodePoolUsage " in k]
    assert gauges == ["Carpool NodePoolLimitUsed {}"] and series[gauges[0]] == 1.0
    assert not [k for k in series if "CatalogFallbacks" in k]
    assert not [k for k in series if " Disruptions " in k]  # only what was sent: the churn's reasons are log lines


def test_the_catalog_rebuild_is_taken_out_of_the_every_minute_run() -> None:
    measured = {"billedMs": 1000.0, "invocations": 4.0}
    run, rebuild = bench._without_refresh(measured, [100.0, 120.0, 3580.0, 200.0])
    assert run["billedMs"] == pytest.approx(140.0)
    assert rebuild == pytest.approx((3580.0 - 140.0) / 1000)
