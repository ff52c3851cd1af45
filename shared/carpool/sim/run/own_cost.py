"""What carpool itself costs on AWS per month: Lambda, DynamoDB, EventBridge, SQS, CloudWatch, X-Ray, and
the stack's fixed monitoring (alarms, dashboard, the alarm topic's key).

Pure arithmetic over what a run used (`Usage`: invocations, billed durations, memory sizes, DynamoDB
read/write units, bus entries, queue requests, log bytes, metric series), extrapolated from the run's
window to a month, plus what the stack costs by existing (`Usage.alarm_metrics` and the others: a
simulation runs no stack and leaves them at zero; the benchmark counts them on the synthesized one). The simulation measures the usage (`carpool.sim.run.usage`); the benchmark builds it
from a model of a steady month (`bench/own_cost.py`). Both price it here, so the two agree.

Prices: AWS public list prices, us-east-1, first (most expensive) tier, checked 2026-11 on each service's
pricing page (aws.amazon.com/<service>/pricing). Free tiers are ignored: they are per account and shared
with whatever else runs there, so carpool is charged as if it had none.

- Lambda, arm64: $0.0000133334 per GB-second, $0.20 per million requests. Duration is billed per
  invocation, rounded up to the millisecond, at the configured memory.
- DynamoDB on-demand (prices since 2024-11-01): $0.625 per million write request units, $0.125 per
  million read request units. Units by item size (DynamoDB Developer Guide, "Read/write capacity mode"):
  one write unit per 1 KB written, one read unit per 4 KB read strongly consistent (half eventually
  consistent), twice that in transactions; a Query's unit is its returned items' total size, not each
  item's. A write also writes each global secondary index that projects the item.
- EventBridge: $1.00 per million custom events put (each 64 KB chunk of an entry is one event). Events
  AWS services put on the default bus and scheduled rules are free; rule deliveries to SQS are free.
- SQS standard: $0.40 per million requests (each 64 KB chunk of a payload is one request). Lambda's event
  source mapping long-polls every queue it reads, even an empty one: at rest five pollers per mapping
  each make a 20-second ReceiveMessage (AWS Lambda Developer Guide, "Scaling behavior of SQS event
  source mappings"; SQS Developer Guide: empty receives are billed like any other request).
- CloudWatch: $0.30 per custom metric per month (a metric is one name + dimension set; embedded metric
  format included), prorated by the hour: a metric costs $0.30 / 730 for each hour in which it receives
  data (`Usage.metric_series` counts metric-months: a series sent every hour is 1, one sent in a tenth of
  the hours 0.1; `hourly_share` gives the share for a rate of sends); logs: $0.50 per GB ingested
  (Standard class; EMF documents are log events too). Alarms: $0.10 per month per metric an alarm reads
  (standard resolution; a metric-math alarm is billed for each metric in its expression). Dashboards:
  $3.00 per month each.
- KMS: $1.00 per customer managed key per month (the alarm topic's; requests for it are a handful a
  month).
- X-Ray: $5.00 per million traces recorded (tracing is active on every function; Lambda samples the
  first request each second and 5 % of the rest, which at carpool's rates is nearly every invocation:
  every invocation is charged).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from carpool.sim.run.result import OwnCost

#: Hours in the month AWS's price pages use.
MONTH_HOURS = 730
MONTH_SECONDS = MONTH_HOURS * 3600

LAMBDA_GB_SECOND_USD = 0.0000133334
LAMBDA_REQUEST_USD = 0.20 / 1e6
DYNAMODB_WRITE_UNIT_USD = 0.625 / 1e6
DYNAMODB_READ_UNIT_USD = 0.125 / 1e6
EVENTBRIDGE_EVENT_USD = 1.00 / 1e6
SQS_REQUEST_USD = 0.40 / 1e6
CLOUDWATCH_METRIC_MONTH_USD = 0.30
LOGS_INGESTED_GB_USD = 0.50
XRAY_TRACE_USD = 5.00 / 1e6

#: Payload size one EventBridge event or SQS request covers.
CHUNK_BYTES = 64 * 1024
#: Lambda's own lines per invocation (START, END, REPORT with the X-Ray trace id), in bytes.
PLATFORM_LOG_BYTES = 420
#: Idle SQS event source mapping: pollers, and ReceiveMessage requests each makes a minute (20 s waits).
SQS_IDLE_POLLERS = 5
SQS_RECEIVES_PER_POLLER_MINUTE = 3

CLOUDWATCH_ALARM_METRIC_MONTH_USD = 0.10
CLOUDWATCH_DASHBOARD_MONTH_USD = 3.00
KMS_KEY_MONTH_USD = 1.00

SERVICES = ("Lambda", "DynamoDB", "EventBridge", "SQS", "CloudWatch metrics", "CloudWatch Logs", "X-Ray",
            "CloudWatch alarms", "CloudWatch dashboards", "KMS")
#: What the stack costs by existing, whatever the load.
FIXED_SERVICES = ("CloudWatch alarms", "CloudWatch dashboards", "KMS")

_READ_KB, _WRITE_KB = 4096, 1024
_GB = 1024**3


@dataclass
class FunctionUsage:
    """One function over the window: its invocations with their billed milliseconds, memory and log output,
    and the DynamoDB units, bus events and SQS requests they made."""

    memory_mib: int
    invocations: int = 0
    billed_ms: float = 0.0
    log_bytes: int = 0
    read_units: float = 0.0
    write_units: float = 0.0
    #: custom events put on carpool's bus, in 64 KB chunks
    bus_events: int = 0
    #: SQS requests for the messages in the window (EventBridge's sends, the mapping's receives and
    #: deletes of the messages this function got, the function's own sends)
    sqs_requests: int = 0

    def add(self, seconds: float, log_bytes: int = 0) -> None:
        self.invocations += 1
        self.billed_ms += billed_ms(seconds)
        self.log_bytes += log_bytes

    @property
    def gb_seconds(self) -> float:
        return self.billed_ms / 1000.0 * self.memory_mib / 1024.0


@dataclass
class Usage:
    """Everything carpool used on AWS in `seconds` of (simulated or modelled) time."""

    seconds: float
    functions: dict[str, FunctionUsage] = field(default_factory=dict)
    #: functions run on a schedule, by their period in seconds: a month has MONTH_SECONDS / period runs of
    #: them whatever the window saw, each using what the window's runs used on average
    schedules: dict[str, float] = field(default_factory=dict)
    #: queues an event source mapping polls all month long
    polled_queues: int = 0
    #: metric-months: each distinct series (name + dimension set) counts the share of the month's hours in
    #: which it receives data (a simulation counts every series it saw as sent all month)
    metric_series: float = 0.0
    #: metrics the stack's alarms read, its dashboards and customer managed KMS keys
    alarm_metrics: int = 0
    dashboards: int = 0
    kms_keys: int = 0


@dataclass(frozen=True)
class MonthlyCost:
    """A month of `Usage`: dollars per service and the quantities behind them."""

    services: dict[str, float]
    quantities: dict[str, float]
    lambda_by_function: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.services.values())

    @property
    def fixed(self) -> float:
        """What the stack costs by existing (`FIXED_SERVICES`)."""
        return sum(v for k, v in self.services.items() if k in FIXED_SERVICES)

    @property
    def usage_total(self) -> float:
        """What carpool's work costs: everything but the fixed part."""
        return self.total - self.fixed


def billed_ms(seconds: float) -> float:
    """Lambda bills each invocation's duration rounded up to the next millisecond (at least 1 ms)."""
    return float(max(1, math.ceil(seconds * 1000.0 - 1e-9)))


def hourly_share(sends_per_hour: float) -> float:
    """The share of a month's hours in which a series sent `sends_per_hour` times an hour on average, at
    random times (Poisson), receives data: what CloudWatch's hourly proration charges of its $0.30."""
    return 1.0 - math.exp(-max(sends_per_hour, 0.0))


def sqs_polling_requests_per_month(queues: int) -> float:
    """ReceiveMessage requests idle event source mappings make in a month."""
    return queues * SQS_IDLE_POLLERS * SQS_RECEIVES_PER_POLLER_MINUTE * MONTH_SECONDS / 60.0


def _scale(usage: Usage, name: str, f: FunctionUsage) -> float:
    """How many times the window's use of function `name` happens in a month."""
    period = usage.schedules.get(name)
    if period is not None and f.invocations:
        return MONTH_SECONDS / period / f.invocations
    return MONTH_SECONDS / usage.seconds


def monthly(usage: Usage) -> MonthlyCost:
    """Price `usage` for a month: each function's window scaled to the month (scheduled ones by their
    schedule), queue polling and metric series monthly already."""
    if usage.seconds <= 0:
        raise ValueError("usage window must be positive")
    month: dict[str, dict[str, float]] = {}
    for name, f in sorted(usage.functions.items()):
        k = _scale(usage, name, f)
        month[name] = {
            "invocations": f.invocations * k, "gbSeconds": f.gb_seconds * k, "readUnits": f.read_units * k,
            "writeUnits": f.write_units * k, "busEvents": f.bus_events * k, "sqsRequests": f.sqs_requests * k,
            "logBytes": (f.log_bytes + f.invocations * PLATFORM_LOG_BYTES) * k,
        }  # fmt: skip

    def total(key: str) -> float:
        return sum(m[key] for m in month.values())

    invocations, sqs = total("invocations"), total("sqsRequests") + sqs_polling_requests_per_month(usage.polled_queues)
    by_function = {name: round(m["gbSeconds"] * LAMBDA_GB_SECOND_USD + m["invocations"] * LAMBDA_REQUEST_USD, 4)
                   for name, m in month.items()}
    services = {
        "Lambda": total("gbSeconds") * LAMBDA_GB_SECOND_USD + invocations * LAMBDA_REQUEST_USD,
        "DynamoDB": total("readUnits") * DYNAMODB_READ_UNIT_USD + total("writeUnits") * DYNAMODB_WRITE_UNIT_USD,
        "EventBridge": total("busEvents") * EVENTBRIDGE_EVENT_USD,
        "SQS": sqs * SQS_REQUEST_USD,
        "CloudWatch metrics": usage.metric_series * CLOUDWATCH_METRIC_MONTH_USD,
        "CloudWatch Logs": total("logBytes") / _GB * LOGS_INGESTED_GB_USD,
        "X-Ray": invocations * XRAY_TRACE_USD,
        "CloudWatch alarms": usage.alarm_metrics * CLOUDWATCH_ALARM_METRIC_MONTH_USD,
        "CloudWatch dashboards": usage.dashboards * CLOUDWATCH_DASHBOARD_MONTH_USD,
        "KMS": usage.kms_keys * KMS_KEY_MONTH_USD,
    }
    quantities = {
        "invocations": invocations, "gbSeconds": total("gbSeconds"), "readUnits": total("readUnits"),
        "writeUnits": total("writeUnits"), "busEvents": total("busEvents"), "sqsRequests": sqs,
        "metricSeries": float(usage.metric_series), "logGB": total("logBytes") / _GB,
        "alarmMetrics": float(usage.alarm_metrics),
    }  # fmt: skip
    return MonthlyCost(services={k: round(v, 4) for k, v in services.items()},
                       quantities={k: round(v, 3) for k, v in quantities.items()}, lambda_by_function=by_function)


# -- DynamoDB item sizes and request units ----------------------------------------------------------------
def value_size(value: Mapping[str, Any]) -> int:
    """Bytes of one attribute value in DynamoDB's typed form ({"S": ...}), per the Developer Guide's
    "Item sizes and formats": strings and binaries by length, numbers by significant digits, sets by their
    members, lists and maps 3 bytes plus 1 per element.

    The meter sizes every item of every request a run makes (a 10,000-pod burst writes tens of thousands
    of values), so each type is sized by a function picked from a table, and a list or map sums its
    members with no generator frame per member."""
    (kind, raw), = value.items()
    sizer = _SIZERS.get(kind)
    if sizer is None:
        raise ValueError(f"unknown DynamoDB type {kind!r}")
    return sizer(raw)


def _text_size(raw: Any) -> int:
    """UTF-8 bytes of a string (an ASCII string's length is its size: no encoding needed)."""
    text = raw if isinstance(raw, str) else str(raw)
    return len(text) if text.isascii() else len(text.encode())


def _number_size(raw: Any) -> int:
    digits = str(raw).lstrip("-").replace(".", "").lstrip("0").rstrip("0") or "0"
    return (len(digits) + 1) // 2 + 1


def _binary_size(raw: Any) -> int:
    return len(raw if isinstance(raw, bytes | bytearray) else str(raw).encode())


def _list_size(raw: Any) -> int:
    return 3 + len(raw) + sum(map(value_size, raw))


def _map_size(raw: Any) -> int:
    return 3 + len(raw) + sum(map(_text_size, raw)) + sum(map(value_size, raw.values()))


_SIZERS: dict[str, Callable[[Any], int]] = {
    "S": _text_size,
    "N": _number_size,
    "B": _binary_size,
    "BOOL": lambda _raw: 1,
    "NULL": lambda _raw: 1,
    "SS": lambda raw: sum(map(_text_size, raw)),
    "NS": lambda raw: sum(map(_number_size, raw)),
    "BS": lambda raw: sum(map(_binary_size, raw)),
    "L": _list_size,
    "M": _map_size,
}


def item_size(item: Mapping[str, Mapping[str, Any]]) -> int:
    """An item's size: its attribute names plus their values."""
    return sum(map(_text_size, item)) + sum(map(value_size, item.values()))


def write_units(size: int, *, transactional: bool = False, indexes: int = 0) -> float:
    """Write request units for one item of `size` bytes, plus one write per index projecting it."""
    units = max(1, math.ceil(size / _WRITE_KB)) * (1 + indexes)
    return float(units * (2 if transactional else 1))


def read_units(sizes: Iterable[int], *, consistent: bool = False, transactional: bool = False,
               summed: bool = False) -> float:
    """Read request units: per item (GetItem, BatchGetItem) or over the summed size (Query, Scan), at
    least one 4 KB read either way."""
    values = list(sizes)
    blocks = (max(1, math.ceil(sum(values) / _READ_KB)) if summed
              else sum(max(1, math.ceil(s / _READ_KB)) for s in values))
    if transactional:
        return float(blocks * 2)
    return float(blocks) if consistent else blocks / 2.0


def entry_chunks(size: int) -> int:
    """64 KB chunks of one EventBridge entry or SQS payload (each is billed as one event/request)."""
    return max(1, math.ceil(size / CHUNK_BYTES))


def own_cost_of(usage: Usage, series: Iterable[str] = ()) -> OwnCost:
    """The result document's form of `monthly(usage)` (`series`: the metric series behind its count)."""
    cost = monthly(usage)
    return OwnCost(monthly_usd=round(cost.total, 2), services=cost.services,
                   lambda_by_function=cost.lambda_by_function, quantities=cost.quantities,
                   per_invocation={name: per_invocation(f) for name, f in sorted(usage.functions.items())},
                   metric_series=sorted(series))


def per_invocation(f: FunctionUsage) -> dict[str, float]:
    """One function's average invocation (and how many there were)."""
    n = max(f.invocations, 1)
    return {"invocations": f.invocations, "billedMs": round(f.billed_ms / n, 1), "memoryMiB": f.memory_mib,
            "readUnits": round(f.read_units / n, 3), "writeUnits": round(f.write_units / n, 3),
            "busEvents": round(f.bus_events / n, 3), "sqsRequests": round(f.sqs_requests / n, 3),
            "logBytes": round(f.log_bytes / n, 1)}
