"""The Lambda service on the wall clock: carpool's five handlers invoked only as their deployed triggers
invoke them, in real seconds (the simulated-clock counterpart is `carpool.sim.run.lambda_service`).

- Schedules: `carpool.delivery.SCHEDULE_SECONDS` (watcher and disruption every minute; the first run at
  once, as a rule created at deploy time fires within its first minute).
- SQS event source mappings: `carpool.delivery.BY_FUNCTION`. Lambda's poller long-polls the queue, gathers
  records until the batch is full or the batching window has passed since the first, and invokes with at
  most `max_concurrency` batches in flight. It deletes the records the answer does not list in
  `batchItemFailures` (all of them stay when the handler raises or answers malformed,
  `lambda_service.failed_ids`); those come back after the queue's visibility timeout, which
  `LocalAws.create_event_path` sets as the stack does, and after 3 receives SQS moves them to the DLQ.
  The poller here uses local SQS's public API (ReceiveMessage, DeleteMessageBatch) rather than its backend:
  the handlers' own requests are served at the same moment by other threads, which the backend is not
  safe for.
- Execution environments: an invocation takes an idle warm environment of its function or starts a new
  one (a cold start: the handler's `wiring.get()` builds its dependencies there), retired as the
  simulation retires them (`carpool.sim.run.lambda_service.Containers`, here on `time.monotonic()`). An
  environment is a `contextvars.Context` of its own, so what a cold start built (clients, caches, its EKS
  token) serves that environment's later invocations and no other's, as in Lambda.
- Each invocation runs with the function's environment installed (`carpool.environment.using`) and a
  context counting down from the deployed timeout on the wall clock (`LambdaContext.deployed`). A thread
  cannot be stopped from outside, so an invocation that outruns its timeout finishes, but its answer is
  dropped as Lambda drops a timed-out one (its records are retried); what it wrote after the deadline
  stays written, which Lambda would have cut short.
"""

from __future__ import annotations

import contextvars
import functools
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from carpool import delivery, environment
from carpool.sim.localaws import lambda_runtime
from carpool.sim.run.lambda_service import Containers, failed_ids

#: the longest ReceiveMessage long poll the poller waits in one request (short: stopping is prompt)
POLL_SECONDS = 1
#: what the poller asks SQS for (all attributes: the records carry them)
RECEIVE_MAX = 10


@dataclass
class Invocation:
    """One handler run, for tests and the time-to-capacity figures."""

    function: str
    started: float  # time.time()
    records: int
    cold: bool
    ended: float | None = None
    answer: Any = None
    error: str | None = None


@dataclass
class _Function:
    name: str
    handler: Callable[[dict[str, Any], Any], Any]
    env: Mapping[str, str]
    containers: Containers = field(default_factory=Containers)
    #: environment number -> what its process holds (a retired one's is dropped when it is next reused)
    contexts: dict[int, contextvars.Context] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class WallClockLambda:
    """Runs carpool's handlers for one cluster as the Lambda service does, until `stop()`.

    `functions`: name -> the environment the stack gives it (`LocalAws.env` plus the function's own
    variables and credentials); `queues`: function -> (queue URL, queue ARN) of its event source mapping;
    `sqs`: a boto3 SQS client of local AWS (the service's own, not a function's)."""

    def __init__(self, functions: Mapping[str, Mapping[str, str]], queues: Mapping[str, tuple[str, str]],
                 sqs: Any, *, region: str, account: str,
                 handlers: Mapping[str, Callable[[dict[str, Any], Any], Any]] | None = None,
                 schedules: Mapping[str, int] = delivery.SCHEDULE_SECONDS) -> None:
        loaded = handlers or {name: lambda_runtime.load_handler(name) for name in functions}
        self._functions = {name: _Function(name, loaded[name], env) for name, env in functions.items()}
        self._queues = dict(queues)
        self._sqs = sqs
        self._region, self._account = region, account
        self._schedules = {name: period for name, period in schedules.items() if name in functions}
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.invocations: list[Invocation] = []

    # -- lifecycle

    def start(self) -> WallClockLambda:
        for name, period in self._schedules.items():
            self._spawn(f"schedule-{name}", functools.partial(self._schedule, name, period))
        for name, (url, arn) in self._queues.items():
            self._spawn(f"poller-{name}", functools.partial(self._poll, name, url, arn))
        return self

    def stop(self, wait_seconds: float = 5.0) -> None:
        """No new invocation starts; running ones are waited for up to `wait_seconds` (a watcher mid-watch
        ends at its deadline, so a test's teardown may cut it short: its thread is a daemon)."""
        self._stopping.set()
        deadline = time.monotonic() + wait_seconds
        for thread in list(self._threads):
            thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> WallClockLambda:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, name: str, target: Callable[[], None]) -> threading.Thread:
        thread = threading.Thread(target=target, name=f"lambda-{name}", daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()
        return thread

    # -- triggers

    def _schedule(self, name: str, period: int) -> None:
        """EventBridge's rule: an invocation every `period` seconds whether or not the last one ended
        (the watcher's runs overlap by design: each watches a little longer than the period)."""
        next_at = time.monotonic()
        while not self._stopping.is_set():
            event = lambda_runtime.scheduled_event(f"carpool-{name}", datetime.now(UTC), self._region, self._account)
            self._spawn(f"{name}-run", functools.partial(self.invoke, name, event))
            next_at += period
            self._stopping.wait(max(0.0, next_at - time.monotonic()))

    def _poll(self, name: str, url: str, arn: str) -> None:
        """The event source mapping of `name`: batches of records, at most `max_concurrency` in flight."""
        mapping = delivery.BY_FUNCTION[name]
        slots = threading.BoundedSemaphore(mapping.max_concurrency or 1000)
        while not self._stopping.is_set():
            if not slots.acquire(timeout=POLL_SECONDS):
                continue
            records = self._gather(url, arn, mapping)
            if not records:
                slots.release()
                continue
            self._spawn(f"{name}-batch", functools.partial(self._batch, name, url, records, slots))

    def _gather(self, url: str, arn: str, mapping: delivery.Delivery) -> list[dict[str, Any]]:
        """Records until the batch is full or the window has passed since the first arrived."""
        records: list[dict[str, Any]] = []
        window_ends: float | None = None
        while len(records) < mapping.batch_size and not self._stopping.is_set():
            left = POLL_SECONDS if window_ends is None else window_ends - time.monotonic()
            if left <= 0:
                break
            wait = min(POLL_SECONDS, int(left)) if window_ends is not None else POLL_SECONDS
            answer = self._sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=min(RECEIVE_MAX, mapping.batch_size - len(records)),
                                               WaitTimeSeconds=wait, AttributeNames=["All"],
                                               MessageAttributeNames=["All"])
            got = answer.get("Messages", [])
            records += [lambda_runtime.sqs_record(m, arn, self._region) for m in got]
            if records and window_ends is None:
                window_ends = time.monotonic() + mapping.max_batching_window_seconds
            if not got and window_ends is None:
                break
        return records

    def _batch(self, name: str, url: str, records: list[dict[str, Any]], slots: threading.BoundedSemaphore) -> None:
        try:
            answer = self.invoke(name, {"Records": records})
            failed = failed_ids(answer, records)
            done = [r for r in records if r["messageId"] not in failed]
            for start in range(0, len(done), 10):
                self._sqs.delete_message_batch(QueueUrl=url, Entries=[
                    {"Id": str(i), "ReceiptHandle": r["receiptHandle"]} for i, r in enumerate(done[start:start + 10])])
        finally:
            slots.release()

    # -- invocations

    def invoke(self, name: str, event: Mapping[str, Any]) -> Any:
        """Run `name`'s handler now, in a warm environment or a new one; an exception is the answer
        Lambda records as a failed invocation (None here), never the end of the service."""
        function = self._functions[name]
        number, process, cold = self._acquire(function)
        record = Invocation(name, time.time(), len(event.get("Records", [])), cold)
        with self._lock:
            self.invocations.append(record)
        context = lambda_runtime.LambdaContext.deployed(name, self._region, self._account, environment=number)
        try:
            record.answer = process.run(self._run, function, dict(event), context)
        except Exception as exc:  # the function failed; Lambda logs it and the trigger retries
            record.error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"
        finally:
            record.ended = time.time()
            took, limit = record.ended - record.started, delivery.TIMEOUT_SECONDS.get(name, 60)
            if took > limit:  # Lambda would have stopped it there: the answer is lost, the trigger retries
                record.error, record.answer = f"Task timed out after {limit} seconds ({took:.1f} s)", None
            with function.lock:
                function.containers.release(time.monotonic(), number)
        return record.answer

    @staticmethod
    def _run(function: _Function, event: dict[str, Any], context: Any) -> Any:
        with environment.using(function.env):
            return function.handler(event, context)

    @staticmethod
    def _acquire(function: _Function) -> tuple[int, contextvars.Context, bool]:
        """An environment: its number, its process state, whether it is new (a cold start)."""
        with function.lock:
            number, cold = function.containers.acquire(time.monotonic())
            if cold:
                function.contexts[number] = contextvars.Context()
                alive = set(function.containers.busy) | {n for _idle, _born, n in function.containers.idle}
                function.contexts = {n: c for n, c in function.contexts.items() if n in alive}
            return number, function.contexts[number], cold

    # -- what tests read

    def errors(self) -> list[Invocation]:
        with self._lock:
            return [i for i in self.invocations if i.error]

    def count(self, name: str) -> int:
        with self._lock:
            return sum(1 for i in self.invocations if i.function == name)
