"""The Lambda service as the simulation plays it: when each function is invoked, and how long it takes.

Each function is invoked only as its deployed trigger would invoke it, never more often:
- on its schedule (`carpool.delivery.SCHEDULE_SECONDS`, which the stack's rules are built from);
- by its SQS event source mapping (`carpool.delivery.BY_FUNCTION`): once a message is visible (EventBridge
  delivers it `durations.BUS_TO_QUEUE_SECONDS` after PutEvents), the mapping gathers a batch for the
  batching window or until the batch is full, then invokes, with at most `max_concurrency` batches in
  flight; a failed record comes back after the queue's visibility timeout.

Each invocation takes simulated time (`carpool.sim.run.durations`): a cold start when no warm execution
environment of the function is idle (`Containers`), then its modelled work. Its reads and writes happen
when that time has passed, never sooner, so the simulation is not faster than the deployed path. A
scheduled watcher run waits on its watch stream in simulated time (`carpool.sim.run.discrete.Processes`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from carpool import delivery
from carpool.sim.clock import SimClock
from carpool.sim.localaws import lambda_runtime
from carpool.sim.localaws.event_source import SqsEventSource
from carpool.sim.run import durations
from carpool.sim.run.discrete import Agenda, Processes

#: Visibility timeout given to messages while a handler holds them (the simulation decides in simulated
#: time when a failed message becomes visible again).
HOLD_SECONDS = 43_200

#: runs a handler: (function, event, context, its simulated duration) -> its answer
Invoke = Callable[[str, Mapping[str, Any], lambda_runtime.LambdaContext, Callable[[], float]], Any]


@dataclass
class Containers:
    """One function's execution environments: an idle warm one is reused, else a new one starts cold. An
    environment is retired once idle `durations.WARM_SECONDS`, or `durations.ENVIRONMENT_LIFETIME_SECONDS`
    after it started however busy it is. Each has its own number: what it keeps in memory (the handler's
    dependencies and their caches) is its own and goes with it (`carpool.sim.localaws.requests`)."""

    #: (when it became idle, when it started, its number) of each idle environment
    idle: list[tuple[float, float, int]] = field(default_factory=list)
    #: environment number -> when it started, while it runs an invocation
    busy: dict[int, float] = field(default_factory=dict)
    started: int = 0

    def acquire(self, now: float) -> tuple[int, bool]:
        """Take an environment: its number, and True when it is a new one (a cold start)."""
        self.idle = [e for e in self.idle if now - e[0] <= durations.WARM_SECONDS
                     and now - e[1] < durations.ENVIRONMENT_LIFETIME_SECONDS]
        if self.idle:
            _idle, born, number = self.idle.pop()
            self.busy[number] = born
            return number, False
        self.started += 1
        self.busy[self.started] = now
        return self.started, True

    def release(self, now: float, number: int) -> None:
        self.idle.append((now, self.busy.pop(number), number))


class LambdaService:
    """Schedules, event source mappings, execution environments and invocation times of one simulation."""

    def __init__(self, clock: SimClock, agenda: Agenda, processes: Processes, invoke: Invoke, *,
                 region: str, account: str, sizes: Callable[[str], int],
                 after: Callable[[], None]) -> None:
        self._clock, self._agenda, self._processes, self._invoke = clock, agenda, processes, invoke
        self._region, self._account = region, account
        #: what a function's modelled work scales with when it has no records (objects it lists)
        self._sizes = sizes
        #: run after every invocation ends (the loop settles the world: kubelets, binder, queues)
        self._after = after
        self.containers: dict[str, Containers] = {name: Containers() for name in delivery.MEMORY_MIB}
        self._pollers: dict[str, _Poller] = {}
        #: (function, simulated time) of every invocation's start, as its trigger fired it
        self.triggered: list[tuple[str, float]] = []

    # -- schedules ---------------------------------------------------------------------------------------
    def schedule(self, name: str, first_at: float, until: float) -> None:
        """Invoke `name` every `SCHEDULE_SECONDS[name]` from `first_at` while before `until`."""
        period = delivery.SCHEDULE_SECONDS[name]

        def tick(at: float) -> None:
            self._scheduled(name)
            if at + period <= until:
                self._agenda.at(at + period, lambda: tick(at + period), f"schedule {name}")

        self._agenda.at(first_at, lambda: tick(first_at), f"schedule {name}")

    def _scheduled(self, name: str) -> None:
        event = lambda_runtime.scheduled_event(f"carpool-{name}", self._clock.now(), self._region, self._account)
        if name == "watcher":
            self._run_waiting(name, event)
        else:
            self._run_at_end(name, event, self._sizes(name), lambda _answer: None)

    # -- queues -------------------------------------------------------------------------------------------
    def subscribe(self, name: str, source: SqsEventSource) -> None:
        self._pollers[name] = _Poller(self, name, source, delivery.BY_FUNCTION[name])

    def check_queues(self) -> None:
        """Let each event source mapping see newly visible messages (called after every action)."""
        for poller in self._pollers.values():
            poller.check()

    # -- invocations ---------------------------------------------------------------------------------------
    def _run_at_end(self, name: str, event: Mapping[str, Any], items: int,
                    answered: Callable[[Any], None]) -> None:
        """An invocation that starts now and whose reads and writes happen when its time has passed."""
        start = self._clock.elapsed
        self.triggered.append((name, start))
        environment, cold = self.containers[name].acquire(start)
        took = (durations.cold_start(name) if cold else 0.0) + durations.work(name, items)

        tail = durations.tail(name)

        def run() -> None:
            context = lambda_runtime.LambdaContext.deployed(name, self._region, self._account,
                                                     spent=durations.work(name, items), environment=environment)
            answer = self._invoke(name, event, context, lambda: took + tail)
            self._after()
            if tail:
                self._agenda.at(self._clock.elapsed + tail, lambda: end(answer), f"end {name}")
            else:
                end(answer)

        def end(answer: Any) -> None:
            self.containers[name].release(self._clock.elapsed, environment)
            answered(answer)

        self._agenda.at(start + took, run, f"invoke {name}")

    def _run_waiting(self, name: str, event: Mapping[str, Any]) -> None:
        """An invocation that runs on its own thread and waits in simulated time (the watcher's watch):
        its cold start and fixed work pass before the handler starts; what it reads and publishes costs
        its time as it goes (`SimulatedCluster.charge`, the PutEvents hook of the runner)."""
        start = self._clock.elapsed
        self.triggered.append((name, start))
        environment, cold = self.containers[name].acquire(start)
        before = (durations.cold_start(name) if cold else 0.0) + durations.work(name, 0)
        clock = self._clock

        def body() -> None:
            self._processes.sleep(before)
            context = lambda_runtime.LambdaContext.deployed(name, self._region, self._account,
                                                     elapsed=lambda: clock.elapsed, environment=environment)
            self._invoke(name, event, context, lambda: clock.elapsed - start)

        def ended() -> None:
            self.containers[name].release(clock.elapsed, environment)

        self._processes.start(name, body, on_end=ended)

    def invoke_batch(self, poller: _Poller, records: list[dict[str, Any]]) -> None:
        def answered(answer: Any) -> None:
            failed = failed_ids(answer, records)
            poller.source.delete([r["receiptHandle"] for r in records if r["messageId"] not in failed])
            for r in records:
                if r["messageId"] in failed:
                    self._agenda.at(self._clock.elapsed + delivery.visibility_timeout_seconds(poller.name),
                                    _showing(poller.source, r["receiptHandle"]),
                                    f"visible again {poller.name}")
            poller.busy -= 1

        poller.busy += 1
        self._run_at_end(poller.name, {"Records": records}, len(records), answered)


class _Poller:
    """One function's SQS event source mapping."""

    def __init__(self, service: LambdaService, name: str, source: SqsEventSource, mapping: delivery.Delivery) -> None:
        self.service, self.name, self.source, self.mapping = service, name, source, mapping
        self.busy = 0
        self._due: float | None = None

    def _full(self) -> bool:
        return self.mapping.max_concurrency is not None and self.busy >= self.mapping.max_concurrency

    def check(self) -> None:
        if self._due is not None or self._full() or not self.source.has_visible():
            return
        now = self.service._clock.elapsed
        # a batch already full does not wait out the window (Lambda invokes at the window's end, at the
        # batch size or at 6 MB, whichever comes first)
        full = self.source.visible_count(self.mapping.batch_size) >= self.mapping.batch_size
        window = 0 if full else self.mapping.max_batching_window_seconds
        self._due = now + durations.BUS_TO_QUEUE_SECONDS + window
        self.service._agenda.at(self._due, self._fire, f"batch {self.name}")

    def _fire(self) -> None:
        self._due = None
        if self._full():
            return  # the invocation that frees a slot checks again
        records = self.source.receive(self.mapping.batch_size, HOLD_SECONDS)
        if records:
            self.service.invoke_batch(self, records)
        self.check()


def _showing(source: SqsEventSource, receipt: str) -> Callable[[], None]:
    """Make a failed message visible again (refused, harmlessly, when it moved to the dead-letter queue)."""
    def show() -> None:
        source.change_visibility(receipt, 0)
    return show


def failed_ids(answer: Any, records: list[dict[str, Any]]) -> set[str]:
    """Lambda semantics: listed failures fail; an exception or a malformed answer fails the batch."""
    if not isinstance(answer, Mapping) or not isinstance(answer.get("batchItemFailures", []), list):
        return {r["messageId"] for r in records}
    return {str(f.get("itemIdentifier")) for f in answer.get("batchItemFailures", []) if isinstance(f, Mapping)}
