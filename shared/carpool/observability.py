"""Metrics with Karpenter-parity meaning, emitted as CloudWatch EMF through Powertools.

Names (namespace `Carpool`): PodsUnboundSeconds, SchedulingDurationSeconds, NodeClaimsCreated{nodepool,
reason}, LaunchFailures{reason}, InterruptionsReceived{kind}, NodePoolUsage/NodePoolLimit{nodepool,
resource}, EstimatedHourlyCost, CapacityCacheHits/CapacityCacheDefaults, WatcherRuns, Disruptions{reason},
PodsServedBy{server}. The CDK dashboard and alarms read exactly these names.

A process-local tally of the same numbers lets the simulation and tests read them back without parsing
stdout.

Traces: every handler's Powertools `Tracer` is created with `auto_patch=False` and handed to
`trace_calls`, which patches the libraries carpool calls out through when they are first imported.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from aws_lambda_powertools.metrics import MetricUnit, single_metric

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

NAMESPACE = "Carpool"
tally: defaultdict[tuple[str, tuple[tuple[str, str], ...]], float] = defaultdict(float)
log = logging.getLogger(__name__)

#: X-Ray patch -> the module whose import triggers it. Every AWS call carpool makes goes through a boto3
#: client (`carpool.adapters.aws.session`), so patching botocore once boto3 is loaded traces them all.
#: (The hook is on boto3, not botocore: Powertools itself imports bare `botocore` at start-up, and a hook
#: on `botocore.client` would run before `botocore.client` is bound on its package, which X-Ray's patch
#: reads.) lightkube talks to the Kubernetes API through httpx2, which the X-Ray SDK cannot patch.
TRACED_LIBRARIES: dict[str, str] = {"botocore": "boto3"}


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


def trace_calls(tracer: Tracer) -> None:
    """Have X-Ray record carpool's AWS calls, patching botocore when boto3 is first imported.

    Powertools' default (`Tracer(auto_patch=True)`) imports and patches every library the X-Ray SDK
    supports while the handler module loads: botocore, and whatever else happens to be installed
    (requests, sqlite3...). carpool imports boto3 only when the first event builds its clients
    (`wiring.get()`), so the patch waits for that import instead of pulling the SDK into the handler's
    import. Nothing happens when tracing is disabled (outside Lambda, in tests, in the simulation).
    """
    if tracer.disabled:
        return
    import wrapt

    for library, trigger in TRACED_LIBRARIES.items():
        wrapt.register_post_import_hook(_patcher(tracer, library), trigger)


def _patcher(tracer: Tracer, library: str) -> Callable[[ModuleType], None]:
    def patch(_module: ModuleType) -> None:
        # An exception here would fail the import of the library itself: tracing is not worth that.
        try:
            tracer.patch([library])
        except Exception:
            log.warning("X-Ray: could not patch %s; its calls will not be traced", library, exc_info=True)

    return patch
