"""`bench/perf_basic.py`: the scenario is Karpenter's suite as written, and each threshold it misses is said."""

from __future__ import annotations

from bench import perf_basic


def _replicas(factor: float) -> list[tuple[float, str, int]]:
    sc = perf_basic.scaled(factor)
    out = []
    for step in sc.workload:
        if step.scale is not None:
            out.append((step.at, step.scale.deployment, step.scale.replicas))
    return out


def test_the_scenario_scales_both_deployments_to_350_after_the_scale_out():
    assert sorted(_replicas(1.0)) == [(300.0, "large-resource-app", 350), (300.0, "small-resource-app", 350)]
    assert sorted(r for _at, _d, r in _replicas(0.1)) == [35, 35]


def test_the_pods_are_the_suites():
    text = perf_basic.SCENARIO.read_text()
    for request in ("{cpu: 900m, memory: 3100Mi}", "{cpu: 3500m, memory: 28Gi}", "replicas: 500",
                    "consolidateAfter: 30s", '{nodes: "100%"}', "WhenEmptyOrUnderutilized"):
        assert request in text


def test_a_run_that_meets_every_threshold_reads_as_met():
    met = perf_basic.Figures(pods=1000, last_bound_seconds=150.0, bar_seconds=175.0, cpu_utilization=0.9,
                             memory_utilization=0.8, consolidation_seconds=300.0, pods_after=700, bound_after=700)
    assert met.missed() == []


def test_each_missed_threshold_is_said():
    missed = perf_basic.Figures(pods=1000, last_bound_seconds=300.0, bar_seconds=175.0, sent_back=196,
                                cpu_utilization=0.5, memory_utilization=0.6, consolidation_seconds=1300.0,
                                pods_after=700, bound_after=690).missed()
    assert len(missed) == 6, missed
    assert any("196 pods sent back" in m for m in missed)
