"""Measures what carpool's handlers use on AWS during a simulation, for `carpool.sim.run.own_cost`.

- Invocations and their duration, per function, at the memory the stack deploys
  (`carpool.delivery.MEMORY_MIB`): the simulated duration the runner gives (`carpool.sim.run.durations`: cold
  start and modelled work; a watcher's watch on the simulated clock), else the handler's wall time.
- DynamoDB units from the items themselves: written items from the request, read items from the answer;
  an update or delete is sized by the item as last read or written (plus what an update sets), as
  DynamoDB charges the larger of the item before and after; no extra request is made to learn it.
- Entries put on the bus, messages sent to queues by the handlers and the messages each batch carried.
- Log bytes and metric series from what the handlers write to stdout (EMF documents included) and log
  through `carpool.*` loggers.

Hooks sit on the botocore session carpool's adapters build their clients from, like
`carpool.sim.localaws.requests`; the simulation's own calls use other clients and are not counted.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from carpool import delivery
from carpool.sim.run import decision_log, own_cost
from carpool.sim.run.discrete import ProcessKilled

_HOOK_ID = "carpool-sim-usage"
#: A stored item's identity: (table, ((key attribute, type, value), ...)) (see `_ref`).
Ref = tuple[str, tuple[tuple[str, str, str], ...]]
#: Global secondary indexes of the state table by their partition key (`infra/state.py`, projecting all).
_INDEX_KEYS = ("gsi1pk",)


class UsageMeter:
    """Counts one simulation's usage; `usage(seconds)` hands it to the cost model."""

    def __init__(self) -> None:
        self.function: str | None = None
        self.functions: dict[str, own_cost.FunctionUsage] = {}
        self.metric_series: set[str] = set()
        #: data points sent per series, by the function that sent them (for rates beyond the run)
        self.series_sends: dict[str, dict[str, int]] = {}
        #: each invocation's billed milliseconds, by function (the mean hides a rare long run)
        self.billed: dict[str, list[float]] = {}
        self._log_bytes = 0
        self._sessions: list[Any] = []
        #: what each stored item is known to weigh (bytes, in an index), by table and key
        self.sizes: dict[Ref, tuple[int, bool]] = {}
        self._handler: logging.Handler = logging.NullHandler()

    # -- wiring ----------------------------------------------------------------------------------------
    def install(self, log: Any) -> None:
        """Hook carpool's AWS session and count what is written to `log` (the captured stdout)."""
        from carpool.adapters.aws import session

        sess = session.session()
        for target in [sess.events, *[c.meta.events for c in session.clients()]]:
            target.register("before-parameter-build", self._before, unique_id=f"{_HOOK_ID}-before")
            target.register("after-call", self._after, unique_id=f"{_HOOK_ID}-after")
        self._sessions.append(sess)
        write = log.write

        def counting(text: str) -> int:
            if self.function is not None:
                self._log_bytes += len(text.encode())
                if '"_aws"' in text:
                    self._metrics(text)
            return int(write(text))

        log.write = counting
        self._handler = _LineBytes(self, log)
        logging.getLogger("carpool").addHandler(self._handler)

    def finish(self) -> None:
        logging.getLogger("carpool").removeHandler(self._handler)
        for sess in self._sessions:
            sess.events.unregister("before-parameter-build", unique_id=f"{_HOOK_ID}-before")
            sess.events.unregister("after-call", unique_id=f"{_HOOK_ID}-after")
        self._sessions.clear()
        self.function = None

    @contextlib.contextmanager
    def invocation(self, function: str, event: Mapping[str, Any],
                   seconds: Callable[[], float] | None = None) -> Iterator[None]:
        """Time one handler run of `function` (`seconds()` when given: its simulated duration, asked when
        it ends) and count the queue requests its batch stands for."""
        usage = self._of(function)
        records = event.get("Records") or []
        if records:
            # EventBridge sent each message; the mapping received them 10 at a time and deletes them so.
            usage.sqs_requests += len(records) + 2 * math.ceil(len(records) / 10)
        self.function, self._log_bytes = function, 0
        started = time.perf_counter()
        cut = False
        try:
            yield
        except ProcessKilled:
            cut = True  # cut short by the end of the simulation, not by carpool: not a run to bill as one
            raise
        finally:
            if not cut:
                took = seconds() if seconds is not None else time.perf_counter() - started
                usage.add(took, self._log_bytes)
                self.billed.setdefault(function, []).append(own_cost.billed_ms(took))
            self.function = None

    def usage(self, seconds: float) -> own_cost.Usage:
        return own_cost.Usage(
            seconds=seconds, functions=dict(self.functions),
            schedules={k: float(v) for k, v in delivery.SCHEDULE_SECONDS.items()},
            polled_queues=len(delivery.BY_FUNCTION), metric_series=len(self.metric_series))

    def item_bytes(self) -> dict[str, float]:
        """Mean size of the stored items known at the end of the run, by kind (the partition key's prefix:
        CLAIM, POOL, ...), as DynamoDB sizes them for request units."""
        kinds: dict[str, list[int]] = {}
        for (_table, key), (size, _indexed) in self.sizes.items():
            values = {name: raw for name, _kind, raw in key}
            pk = values.get("pk") or values.get("id") or ""
            kinds.setdefault(pk.split("#")[0], []).append(size)
        return {kind: round(sum(sizes) / len(sizes), 1) for kind, sizes in sorted(kinds.items())}

    def _of(self, function: str) -> own_cost.FunctionUsage:
        return self.functions.setdefault(function, own_cost.FunctionUsage(delivery.MEMORY_MIB[function]))

    # -- stdout ----------------------------------------------------------------------------------------
    def _metrics(self, text: str) -> None:
        for line in text.splitlines():
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if not isinstance(doc, dict) or "_aws" not in doc:
                continue
            for directive in doc["_aws"].get("CloudWatchMetrics") or []:
                for dims in directive.get("Dimensions") or [[]]:
                    values = ", ".join(f"{d}={doc.get(d, '')}" for d in sorted(dims))
                    for metric in directive.get("Metrics") or []:
                        series = f"{directive.get('Namespace')} {metric.get('Name')} {{{values}}}"
                        self.metric_series.add(series)
                        sends = self.series_sends.setdefault(series, {})
                        sends[self.function or ""] = sends.get(self.function or "", 0) + 1

    # -- AWS requests ----------------------------------------------------------------------------------
    def _before(self, params: Mapping[str, Any], model: Any, context: dict[str, Any] | None = None,
                **_: Any) -> None:
        if self.function is None or context is None:
            return
        service, operation = str(model.service_model.signing_name), str(model.name)
        context["carpool_usage"] = params = dict(params)
        usage = self._of(self.function)
        if service == "events" and operation == "PutEvents":
            usage.bus_events += sum(own_cost.entry_chunks(len(json.dumps(e, default=str).encode()))
                                   for e in params.get("Entries") or [])
        elif service == "sqs" and operation in ("SendMessage", "SendMessageBatch"):
            bodies = [params] if operation == "SendMessage" else list(params.get("Entries") or [])
            usage.sqs_requests += sum(own_cost.entry_chunks(len(str(b.get("MessageBody", "")).encode()))
                                     for b in bodies)

    def _after(self, parsed: Mapping[str, Any], model: Any, context: dict[str, Any] | None = None,
               **_: Any) -> None:
        if self.function is None or context is None or "carpool_usage" not in context:
            return
        if str(model.service_model.signing_name) != "dynamodb":
            return
        params, operation = context["carpool_usage"], str(model.name)
        reads, writes = _units(operation, params, parsed or {}, self.sizes)
        usage = self._of(self.function)
        usage.read_units += reads
        usage.write_units += writes


class _LineBytes(logging.Handler):
    """`carpool.*` log records: the simulation keeps them as decisions without writing them out; in
    Lambda the runtime's handler writes each as a line (level, time, request id, message)."""

    #: "[INFO]\t2026-01-01T00:00:00.000Z\t<36-character request id>\t" and the newline
    PREFIX_BYTES = 71

    def __init__(self, meter: UsageMeter, log: Any) -> None:
        super().__init__(logging.INFO)
        self._meter = meter
        self._log = log

    def emit(self, record: logging.LogRecord) -> None:
        # only this simulation's records: another one may be logging on another thread of the process
        if self._meter.function is not None and decision_log.routed_to(self._log):
            self._meter._log_bytes += self.PREFIX_BYTES + len(record.getMessage().encode())


def _key_of(item: Mapping[str, Any]) -> dict[str, Any]:
    """The primary key of an item of carpool's tables (`pk`/`sk`, or the idempotency table's `id`)."""
    return {k: v for k, v in item.items() if k in ("pk", "sk", "id")}


def _ref(table: str, key: Mapping[str, Any]) -> Ref:
    """An item's identity: its table and key attributes (name, type, value), in name order (a request's
    `Key` and an answer's item may list them in either order)."""
    return table, tuple(sorted((name, kind, str(raw)) for name, value in key.items() for kind, raw in value.items()))


def _indexes(item: Mapping[str, Any]) -> int:
    return sum(1 for k in _INDEX_KEYS if k in item)


def _units(operation: str, params: Mapping[str, Any], parsed: Mapping[str, Any],
           sizes: dict[Ref, tuple[int, bool]]) -> tuple[float, float]:
    """(read units, write units) of one DynamoDB request (see `own_cost` for the rules), keeping `sizes`
    (what each item weighs, learned from the items read and written) up to date."""
    consistent = bool(params.get("ConsistentRead"))
    if operation == "GetItem":
        return own_cost.read_units([_seen(sizes, str(params.get("TableName")), parsed.get("Item"))],
                                   consistent=consistent), 0.0
    if operation in ("Query", "Scan"):
        table = str(params.get("TableName"))
        found = [_seen(sizes, table, i) for i in parsed.get("Items") or []]
        return own_cost.read_units(found, consistent=consistent, summed=True), 0.0
    if operation == "BatchGetItem":
        found = [_seen(sizes, t, i) for t, items in (parsed.get("Responses") or {}).items() for i in items]
        return own_cost.read_units(found or [0], consistent=consistent), 0.0
    if operation == "TransactGetItems":
        gets = [g.get("Get") or {} for g in params.get("TransactItems") or []]
        found = [_seen(sizes, str(g.get("TableName")), r.get("Item"))
                 for g, r in zip(gets, parsed.get("Responses") or [], strict=False)]
        return own_cost.read_units(found or [0], transactional=True), 0.0
    if operation == "BatchWriteItem":
        writes = 0.0
        for table, requests in (params.get("RequestItems") or {}).items():
            for r in requests:
                if "PutRequest" in r:
                    writes += _write(sizes, table, "Put", r["PutRequest"], transactional=False)
                elif "DeleteRequest" in r:
                    writes += _write(sizes, table, "Delete", r["DeleteRequest"], transactional=False)
        return 0.0, writes
    if operation in ("PutItem", "UpdateItem", "DeleteItem"):
        kind = operation.removesuffix("Item")
        return 0.0, _write(sizes, str(params.get("TableName")), kind, params, transactional=False)
    if operation == "TransactWriteItems":
        writes = 0.0
        for item in params.get("TransactItems") or []:
            for kind, body in item.items():
                writes += _write(sizes, str(body.get("TableName")), kind, body, transactional=True)
        return 0.0, writes
    return 0.0, 0.0


def _seen(sizes: dict[Ref, tuple[int, bool]], table: str, item: Mapping[str, Any] | None) -> int:
    """A read item's size, remembered for the writes that follow."""
    if not item:
        return 0
    size = own_cost.item_size(item)
    sizes[_ref(table, _key_of(item))] = (size, _indexes(item) > 0)
    return size


def _write(sizes: dict[Ref, tuple[int, bool]], table: str, kind: str, body: Mapping[str, Any], *,
           transactional: bool) -> float:
    """One item write, charged by the larger of the item before and after (an update's new size: the
    item before plus every value and name it sets), plus the index when the item is (or was) in it."""
    key = body.get("Key") or _key_of(body.get("Item") or {})
    ref = _ref(table, key)
    old, old_indexed = sizes.get(ref, (0, False))
    if kind == "Put":
        item = body.get("Item") or {}
        new, indexed = own_cost.item_size(item), _indexes(item) > 0
    elif kind == "Update":
        names = " ".join([str(body.get("UpdateExpression", "")), *map(str, (body.get("ExpressionAttributeNames")
                                                                             or {}).values())])
        written = sum(own_cost.value_size(v) for v in (body.get("ExpressionAttributeValues") or {}).values())
        new = (old or own_cost.item_size(key)) + written + sum(len(n) for n in (body.get("ExpressionAttributeNames")
                                                                                or {}).values())
        indexed = old_indexed or any(k in names for k in _INDEX_KEYS)
    else:  # Delete, ConditionCheck: nothing new is written
        new, indexed = 0, old_indexed
    if kind == "Delete":
        sizes.pop(ref, None)
    elif kind != "ConditionCheck":
        sizes[ref] = (new, indexed)
    return own_cost.write_units(max(old, new), transactional=transactional, indexes=int(indexed))
