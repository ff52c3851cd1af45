"""Metrics with Karpenter-parity meaning, emitted as CloudWatch EMF through Powertools.

Names (namespace `Carpool`): PodsUnboundSeconds, SchedulingDurationSeconds, NodeClaimsCreated{nodepool,
reason}, LaunchFailures{reason}, InterruptionsReceived{kind}, InterruptionsStale{kind},
NodePoolUsage{nodepool, resource}, NodePoolLimitUsed, EstimatedHourlyCost{nodepool},
CapacityCacheHits/CapacityCacheDefaults, WatcherRuns, Disruptions{reason}, PodsServedBy{server},
PodPendingToLaunchSeconds{nodepool}, NodeRegistrationSeconds{nodepool} (`carpool.app.startup`),
NodeClassNotReady (cause, nodeclass and nodepool as properties: a launch an EC2NodeClass refused),
KarpenterControllerActive (`carpool.app.standstill`). The CDK
dashboard and alarms (`infra/monitoring.py`) read exactly these names.

Every data point also carries `cluster` (and Powertools' `service`): two clusters in one account and
Region must never share a series, or one cluster's watcher would keep the other's alarms green. The
cluster is the process's (`CARPOOL_CLUSTER_NAME`, the variable the stack sets on every
function and `carpool.app.settings` reads), never the caller's. A point with a breakdown (`reason`,
`nodepool`...) is published to its own series, and, for the metrics in `CLUSTER_TOTALS`, to the cluster's
total ``{cluster, service}`` too. CloudWatch does not add series up across dimension values, and an alarm
can neither SEARCH nor sum an unknown set of series, so the totals an alarm reads (launch failure rate,
all launch failures) have to be published as such; EMF does it with a second dimension set on the same
point, at no extra log line. Only those: every series is billed ($0.30 a month each, for each hour it
receives data), and a total nobody alarms on is one more series per metric for nothing (the dashboard
draws the breakdowns). A pool's limit is not published either: it is the deployed config's, so the
pool alarms and the dashboard take it from the config (`infra/monitoring.py`).

The metrics no alarm reads (`LOG_ONLY`: scheduling duration, pods served by, capacity cache, estimated
cost, interruptions received, dropped pod events, catalog fallbacks) are written as structured log lines
instead (``{"metric": name, "value": ..., "unit": ..., <dimensions>}``, no EMF directive, so no series):
the dashboard reads them with Logs Insights, at $0.005 per GB scanned when it is looked at, where each
series would be $0.30 a month for every breakdown value. A CloudWatch metric filter on the log group turns
one back into a metric should an alarm ever need it. The startup durations (`PodPendingToLaunchSeconds`,
`NodeRegistrationSeconds`) are series all the same, though no alarm reads them yet: they are what a time-to-
capacity objective is set on, a pool a series each, and `durations` sends a batch's values in one
document, whose percentiles CloudWatch computes as from as many points.

A breakdown no alarm reads is not a dimension either (`PROPERTIES`): it is written into the EMF
document as a property, which Logs Insights groups by (the dashboard's tables), while the point counts in
one series, the cluster's. So `NodeClaimsCreated` is one series, not one per pool and reason, and the
startup durations one each, as Karpenter's pods startup duration has no pool label. Where an alarm reads
one value of a breakdown (`Disruptions{reason=registration-timeout}`), the metric's other values are log
lines (`ALARMED_VALUES`). A pool's usage of each limited resource is a log line too; what an alarm reads is
one series for the cluster, `NodePoolLimitUsed`: the highest share (percent) any pool uses of any of its
`spec.limits`, with that pool and resource as properties. One series and one alarm whatever the number of
pools, and the threshold follows the config the watcher reads, not the one the stack was deployed with. At 1,000 nodes this is about a third of the series carpool would otherwise pay
for (`bench/own_cost.py`).

A process-local tally of the same numbers lets the simulation and tests read them back without parsing
stdout.

Traces: every handler's Powertools `Tracer` is created with `auto_patch=False` and handed to
`trace_calls`, which patches the libraries carpool calls out through when they are first imported.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, TypeVar

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider

from carpool import environment

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

NAMESPACE = "Carpool"
#: The dimension that keeps clusters apart, on every data point.
CLUSTER = "cluster"
#: Where the cluster name comes from (set by the stack on every function).
CLUSTER_VARIABLE = "CARPOOL_CLUSTER_NAME"
#: `carpool.app.settings.Settings.from_env`'s default, so metrics and settings agree when nothing is set.
DEFAULT_CLUSTER = "demo"
#: Metrics whose cluster total ``{cluster, service}`` is published beside each breakdown series: the ones
#: an alarm reads the total of (`infra/monitoring.py`; its tests check the two agree).
CLUSTER_TOTALS = frozenset({"LaunchFailures", "InterruptionsStale", "ConfigInvalid", "DisruptionActionFailures"})
#: Metrics written as log lines, not series (see the module docstring); `infra/monitoring.py` graphs them
#: from the logs and its tests check that no alarm reads one.
LOG_ONLY = frozenset({
    "SchedulingDurationSeconds", "PodsServedBy", "CapacityCacheHits", "CapacityCacheDefaults", "EstimatedHourlyCost",
    "InterruptionsReceived", "PodEventsDropped", "CatalogFallbacks", "DisruptionsAbandoned", "UsageReconciled",
    "NodePoolUsage", "NodeClaimSyncFailures",
})  # fmt: skip
#: Breakdowns written as properties of the EMF document, not dimensions (see the module docstring): the
#: point counts in the series of its other dimensions. `infra/monitoring.py` shows them from the logs.
PROPERTIES: dict[str, frozenset[str]] = {
    "NodeClaimsCreated": frozenset({"nodepool", "reason"}),
    "PodPendingToLaunchSeconds": frozenset({"nodepool"}),
    "NodeRegistrationSeconds": frozenset({"nodepool"}),
    "NodePoolLimitUsed": frozenset({"nodepool", "resource"}),
    "NodeClassNotReady": frozenset({"cause", "nodeclass", "nodepool"}),
}
#: The claim of a node that never joined, terminated by the disruption function (`carpool.app.disrupt`).
REGISTRATION_TIMEOUT = "registration-timeout"
#: Metrics of which only these values of one breakdown are series (an alarm reads each); a point with any
#: other value is a log line, as a `LOG_ONLY` metric's.
ALARMED_VALUES: dict[str, tuple[str, frozenset[str]]] = {
    "Disruptions": ("reason", frozenset({REGISTRATION_TIMEOUT})),
}
tally: defaultdict[tuple[str, tuple[tuple[str, str], ...]], float] = defaultdict(float)
log = logging.getLogger(__name__)
#: X-Ray patch -> the module whose import triggers it. Every AWS call carpool makes goes through a boto3
#: client (`carpool.adapters.aws.session`), so patching botocore once boto3 is loaded traces them all.
#: (The hook is on boto3, not botocore: Powertools itself imports bare `botocore` at start-up, and a hook
#: on `botocore.client` would run before `botocore.client` is bound on its package, which X-Ray's patch
#: reads.) lightkube talks to the Kubernetes API through httpx2, which the X-Ray SDK cannot patch.
TRACED_LIBRARIES: dict[str, str] = {"botocore": "boto3"}
#: True once botocore is patched: its calls are recorded, so threads making them need the caller's entity
_traced = False
T = TypeVar("T")


def cluster_name() -> str:
    """The environment's cluster. Read per data point, not cached at import: the simulation sets the
    variable after carpool is imported (each of its functions in its own environment)."""
    return environment.get(CLUSTER_VARIABLE) or DEFAULT_CLUSTER


def _enabled() -> bool:
    return environment.get("POWERTOOLS_METRICS_DISABLED", "false").lower() not in ("1", "true")


def emit(name: str, value: float = 1.0, unit: MetricUnit = MetricUnit.Count, **dimensions: str) -> None:
    """Record one data point under this process's cluster, with its own breakdown dimensions."""
    cluster = cluster_name()
    point = {**{k: str(v) for k, v in dimensions.items()}, CLUSTER: cluster}
    tally[(name, tuple(sorted(point.items())))] += value
    if not _enabled():
        return
    if name in LOG_ONLY or not _alarmed(name, point):
        service = environment.get("POWERTOOLS_SERVICE_NAME")
        line = {"metric": name, "value": value, "unit": unit.value, **point, **({"service": service} if service else {})}
        print(json.dumps(line, separators=(",", ":")), flush=True)
        return
    # One provider per point (what `single_metric` does), so dimensions never leak between points.
    metric = _document(name, point)
    metric.add_metric(name=name, unit=unit, value=value)
    if name in PROPERTIES or name in ALARMED_VALUES:  # shaped as a log-only line too: the dashboard's tables read both
        metric.add_metadata(key="metric", value=name)
        metric.add_metadata(key="value", value=value)
    if set(metric.dimension_set) - {CLUSTER} and name in CLUSTER_TOTALS:
        metric.add_dimensions(**_cluster_total(metric.service, cluster))
    metric.flush_metrics()


def _alarmed(name: str, point: dict[str, str]) -> bool:
    """Whether `point` of `name` belongs to a series an alarm reads (`ALARMED_VALUES`)."""
    key, values = ALARMED_VALUES.get(name, ("", frozenset()))
    return not key or point.get(key) in values


def _document(name: str, point: dict[str, str]) -> AmazonCloudWatchEMFProvider:
    """An EMF document for `name`: the point's dimensions, and its `PROPERTIES` as properties."""
    metric = AmazonCloudWatchEMFProvider(namespace=NAMESPACE, service=environment.get("POWERTOOLS_SERVICE_NAME") or None)
    properties = PROPERTIES.get(name, frozenset())
    for key, val in point.items():
        if key in properties:
            metric.add_metadata(key=key, value=val)
        else:
            metric.add_dimension(name=key, value=val)
    return metric


def durations(name: str, values: Sequence[float], **dimensions: str) -> None:
    """Record many durations of one series at once (a batch's pods): EMF carries up to 100 values of a
    metric in one document, and CloudWatch computes its statistics (p50, p99, max) from them as from as
    many data points, so a burst of a thousand pods is ten log lines, not a thousand."""
    if not values:
        return
    if name in LOG_ONLY or not _enabled():
        for value in values:
            seconds(name, value, **dimensions)
        return
    point = {**{k: str(v) for k, v in dimensions.items()}, CLUSTER: cluster_name()}
    tally[(name, tuple(sorted(point.items())))] += sum(values)
    # dimensions and properties before the values: Powertools publishes each hundred as it fills up
    metric = _document(name, point)
    for value in values:
        metric.add_metric(name=name, unit=MetricUnit.Seconds, value=value)
    if metric.metric_set:  # what the last full hundred left
        metric.flush_metrics()


def _cluster_total(service: str | None, cluster: str) -> dict[str, str]:
    """The dimension set of the cluster-wide series: Powertools adds `service` only to the first set."""
    return {CLUSTER: cluster, **({"service": service} if service else {})}


def seconds(name: str, value: float, **dimensions: str) -> None:
    emit(name, value, MetricUnit.Seconds, **dimensions)


def total(name: str, **dimensions: str) -> float:
    """Sum of everything recorded under `name` whose dimensions include `dimensions` (`cluster` among them)."""
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
        global _traced
        # An exception here would fail the import of the library itself: tracing is not worth that.
        try:
            tracer.patch([library])
        except Exception:
            log.warning("X-Ray: could not patch %s; its calls will not be traced", library, exc_info=True)
        else:
            _traced = True

    return patch


def in_this_trace(call: Callable[[], T]) -> Callable[[], T]:
    """`call`, to run on another thread with its AWS calls recorded under this thread's current X-Ray
    entity (the handler's subsegment), as they are when made here.

    The X-Ray SDK keeps the current entity per thread: in Lambda, a thread that has none makes its own
    facade segment from `_X_AMZN_TRACE_ID`, so a worker's calls would hang off the invocation's segment
    beside the handler's subsegment instead of inside it (the SDK's documented remedy is to hand the
    entity to the thread). Unchanged when nothing is traced (tracing disabled, botocore not patched)."""
    if not _traced:
        return call
    from aws_xray_sdk.core import xray_recorder

    try:
        entity = xray_recorder.get_trace_entity()
    except Exception:  # outside any trace (the SDK may raise when the context is missing)
        return call
    if entity is None:
        return call

    def traced() -> T:
        xray_recorder.set_trace_entity(entity)
        try:
            return call()
        finally:
            xray_recorder.clear_trace_entities()

    return traced
