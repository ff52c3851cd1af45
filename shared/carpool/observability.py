"""Metrics with Karpenter-parity meaning, emitted as CloudWatch EMF through Powertools.

Names (namespace `Carpool`): PodsUnboundSeconds, SchedulingDurationSeconds, NodeClaimsCreated{nodepool,
reason}, LaunchFailures{reason}, InterruptionsReceived{kind}, NodePoolUsage/NodePoolLimit{nodepool,
resource}, EstimatedHourlyCost, CapacityCacheHits/CapacityCacheDefaults, WatcherRuns, Disruptions{reason},
PodsServedBy{server}. The CDK dashboard and alarms read exactly these names.

A process-local tally of the same numbers lets the simulation and tests read them back without parsing
stdout.
"""

from __future__ import annotations

import os
from collections import defaultdict

from aws_lambda_powertools.metrics import MetricUnit, single_metric

NAMESPACE = "Carpool"
tally: defaultdict[tuple[str, tuple[tuple[str, str], ...]], float] = defaultdict(float)


def _enabled() -> bool:
    return os.environ.get("POWERTOOLS_METRICS_DISABLED", "false").lower() not in ("1", "true")


def emit(name: str, value: float = 1.0, unit: MetricUnit = MetricUnit.Count, **dimensions: str) -> None:
    """Record one data point with its own dimensions (EMF allows per-metric dimensions this way)."""
    tally[(name, tuple(sorted(dimensions.items())))] += value
    if not _enabled():
        return
    with single_metric(name=name, unit=unit, value=value, namespace=NAMESPACE) as metric:
        for k, v in dimensions.items():
            metric.add_dimension(name=k, value=str(v))


def seconds(name: str, value: float, **dimensions: str) -> None:
    emit(name, value, MetricUnit.Seconds, **dimensions)


def total(name: str, **dimensions: str) -> float:
    """Sum of everything recorded under `name` whose dimensions include `dimensions`."""
    want = set(dimensions.items())
    return sum(v for (n, dims), v in tally.items() if n == name and want <= set(dims))
