"""Every data point carries the process's cluster; a point with a breakdown also lands in the cluster's
total series (what the alarms read). Checked on the EMF lines CloudWatch would ingest."""

from __future__ import annotations

import json
from typing import Any

import pytest

from carpool import observability
from carpool.app.settings import Settings


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "carpool")
    yield


def emf_lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]


def series(line: dict[str, Any]) -> list[dict[str, str]]:
    """The (dimension name -> value) sets one EMF line publishes its metric under."""
    (directive,) = line["_aws"]["CloudWatchMetrics"]
    return [{name: line[name] for name in names} for names in directive["Dimensions"]]


def test_cluster_comes_from_the_environment_variable_the_stack_sets(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CARPOOL_CLUSTER_NAME", "blue")
    observability.seconds("PodsUnboundSeconds", 12.0)
    (line,) = emf_lines(capsys)
    assert line["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Carpool"
    assert line["PodsUnboundSeconds"] == [12.0]
    assert series(line) == [{"cluster": "blue", "service": "carpool"}]


def test_a_breakdown_is_published_under_its_own_series_and_the_cluster_total(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CARPOOL_CLUSTER_NAME", "blue")
    assert "LaunchFailures" in observability.CLUSTER_TOTALS
    observability.emit("LaunchFailures", reason="InsufficientCapacity")
    (line,) = emf_lines(capsys)
    assert series(line) == [
        {"reason": "InsufficientCapacity", "cluster": "blue", "service": "carpool"},
        {"cluster": "blue", "service": "carpool"},
    ]


def test_a_breakdown_no_alarm_reads_is_a_property_of_the_clusters_one_series(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # every series is billed each hour it receives data: a pool and reason each would be a series nobody alarms on
    monkeypatch.setenv("CARPOOL_CLUSTER_NAME", "blue")
    observability.emit("NodeClaimsCreated", nodepool="default", reason="provisioning")
    (line,) = emf_lines(capsys)
    assert series(line) == [{"cluster": "blue", "service": "carpool"}]
    assert (line["nodepool"], line["reason"], line["NodeClaimsCreated"]) == ("default", "provisioning", [1.0])
    assert (line["metric"], line["value"]) == ("NodeClaimsCreated", 1.0)  # read by the dashboard as a log line
    assert observability.total("NodeClaimsCreated", cluster="blue", nodepool="default") >= 1.0


def test_only_the_breakdown_values_an_alarm_reads_are_series(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CARPOOL_CLUSTER_NAME", "blue")
    assert "Disruptions" not in observability.CLUSTER_TOTALS
    observability.emit("Disruptions", reason=observability.REGISTRATION_TIMEOUT)
    observability.emit("Disruptions", reason="Empty")
    alarmed, other = emf_lines(capsys)
    assert series(alarmed) == [{"reason": "registration-timeout", "cluster": "blue", "service": "carpool"}]
    assert "_aws" not in other  # a log line: no series
    assert other == {"metric": "Disruptions", "value": 1.0, "unit": "Count", "reason": "Empty", "cluster": "blue",
                     "service": "carpool"}
    assert observability.total("Disruptions", cluster="blue", reason="Empty") >= 1.0


def test_a_metric_no_alarm_reads_is_a_log_line_not_a_series(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CARPOOL_CLUSTER_NAME", "blue")
    assert "PodsServedBy" in observability.LOG_ONLY
    observability.emit("PodsServedBy", 3.0, server="carpool")
    (line,) = emf_lines(capsys)
    assert "_aws" not in line  # no EMF directive: CloudWatch makes no series of it
    assert line == {"metric": "PodsServedBy", "value": 3.0, "unit": "Count", "server": "carpool", "cluster": "blue",
                    "service": "carpool"}
    assert observability.total("PodsServedBy", cluster="blue", server="carpool") >= 3.0


def test_the_environment_wins_over_the_caller(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CARPOOL_CLUSTER_NAME", "blue")
    observability.emit("LaunchFailures", reason="Error", cluster="someone-else")
    (line,) = emf_lines(capsys)
    assert {s["cluster"] for s in series(line)} == {"blue"}


def test_two_clusters_never_share_a_series(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    seen: dict[str, list[frozenset[tuple[str, str]]]] = {}
    for cluster in ("a", "b"):
        monkeypatch.setenv("CARPOOL_CLUSTER_NAME", cluster)
        observability.emit("LaunchFailures", 4.0, reason="Error")
        observability.emit("WatcherRuns")
        seen[cluster] = [frozenset(s.items()) for line in emf_lines(capsys) for s in series(line)]
    assert seen["a"] and seen["b"]
    assert not set(seen["a"]) & set(seen["b"])


def test_tally_records_the_cluster_and_total_still_matches_a_subset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    monkeypatch.setenv("CARPOOL_CLUSTER_NAME", "tally-a")
    observability.emit("Disruptions", reason="registration-timeout")
    monkeypatch.setenv("CARPOOL_CLUSTER_NAME", "tally-b")
    observability.emit("Disruptions", reason="registration-timeout")
    observability.emit("Disruptions", reason="registration-timeout")
    assert observability.total("Disruptions", reason="registration-timeout", cluster="tally-a") == 1
    assert observability.total("Disruptions", reason="registration-timeout", cluster="tally-b") == 2
    assert observability.total("Disruptions", reason="registration-timeout") >= 3


def test_without_any_setting_the_cluster_is_the_settings_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CARPOOL_CLUSTER_NAME", raising=False)
    assert observability.cluster_name() == Settings.from_env({}).cluster_name


def test_disabled_metrics_print_nothing(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    observability.emit("WatcherRuns")
    assert emf_lines(capsys) == []
