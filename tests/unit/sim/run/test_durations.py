"""The simulation's invocation times are never faster than what the bench measured, and scale with the
deployed memory as Lambda's CPU share does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from carpool import delivery
from carpool.sim.run import durations

RESULTS = Path(__file__).resolve().parents[4] / "bench" / "results.json"


def _stage(name: str) -> dict[str, float]:
    stages = json.loads(RESULTS.read_text())["stages"]
    return next(s for s in stages if s["benchmark"] == name)


@pytest.mark.parametrize("function", sorted(durations.COSTS))
def test_a_cold_start_costs_at_least_what_the_bench_measured(function: str) -> None:
    measured_ms = _stage(f"{function} init + first invocation")["milliseconds"]
    assert durations.COSTS[function].cold_cpu * 1000 >= measured_ms
    # and the deployed function has no more than its memory's share of a core
    assert durations.cold_start(function) >= measured_ms / 1000 * durations.cpu_factor(function) - 1e-9


def test_a_thousand_pod_provisioner_invocation_is_not_faster_than_the_bench() -> None:
    measured = _stage("provisioner 1000 pods (one invocation)")["wallSeconds"]
    cost = durations.COSTS["provisioner"]
    assert cost.base_cpu + 1000 * cost.per_item_cpu + cost.base_io >= measured


def test_less_memory_is_less_cpu() -> None:
    # 2 GB buys a whole core; 256 MB about a seventh of one
    assert durations.cpu_factor("provisioner") == pytest.approx(durations.CORE_SLOWDOWN)
    assert durations.cpu_factor("watcher") == pytest.approx(
        durations.FULL_VCPU_MIB / delivery.MEMORY_MIB["watcher"] * durations.CORE_SLOWDOWN)
    # what the watcher reads costs it time in proportion, at its memory's share of a core
    assert durations.read("watcher", 10**6) == pytest.approx(
        10**6 * durations.BYTE_CPU_SECONDS * durations.cpu_factor("watcher"))
    assert durations.work("provisioner", 1000) > durations.work("provisioner", 10)


def test_createfleet_latency_is_charged_after_the_provisioners_writes() -> None:
    assert durations.tail("provisioner") == durations.CREATE_FLEET_SECONDS + durations.EVENT_WRITES_SECONDS
    assert durations.CREATE_FLEET_SECONDS > 0 and durations.EVENT_WRITES_SECONDS > 0
    assert durations.tail("registrar") == 0


def test_reading_a_byte_is_not_faster_than_the_watchers_resync_at_scale() -> None:
    """The resync at 5,000 nodes (`bench/scale.py`): the watcher's CPU seconds over the bytes it read
    (HTTP and decode; its wall time also waits on the simulated API server, which is not carpool)."""
    rows = json.loads((RESULTS.parent / "scale_results.json").read_text())
    resync = next(r for r in rows if r["benchmark"].startswith("watcher resync"))
    assert resync["cpuSeconds"] / resync["bytesRead"] <= durations.BYTE_CPU_SECONDS
