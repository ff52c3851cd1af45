"""The simulation invokes each function exactly as the synthesized stack's triggers would: its schedules
at the template's rates, its queue consumers with the template's batch sizes, windows and concurrency.

The simulated Lambda service (`carpool.sim.run.lambda_service`) is driven here on its own, with handlers that
only record when they ran, so what is compared is the cadence and nothing else."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest
from cdk_support import Synth

from carpool.sim.clock import SimClock
from carpool.sim.localaws import lambda_runtime
from carpool.sim.run import durations
from carpool.sim.run.discrete import Agenda, Processes
from carpool.sim.run.lambda_service import LambdaService

_RATE = re.compile(r"rate\((\d+) (second|minute|hour|day)s?\)")
_UNIT = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}


def template_period(expression: str) -> int:
    match = _RATE.fullmatch(expression)
    assert match, f"not a rate expression: {expression}"
    return int(match.group(1)) * _UNIT[match.group(2)]


class _Recorder:
    """Handlers that only note when they ran."""

    def __init__(self, clock: SimClock) -> None:
        self.clock = clock
        self.starts: dict[str, list[float]] = {}
        self.batches: dict[str, list[int]] = {}

    def invoke(self, name: str, event: Mapping[str, Any], context: lambda_runtime.LambdaContext, seconds: Any) -> Any:
        self.starts.setdefault(name, []).append(self.clock.elapsed)
        self.batches.setdefault(name, []).append(len(event.get("Records") or []))
        return {"batchItemFailures": []}


class _Queue:
    """An event source's queue: messages visible from given moments."""

    def __init__(self, clock: SimClock, name: str) -> None:
        self.clock, self.name = clock, name
        self.messages: list[tuple[float, str]] = []

    def has_visible(self) -> bool:
        return any(at <= self.clock.elapsed for at, _ in self.messages)

    def visible_count(self, at_most: int) -> int:
        return min(at_most, sum(1 for at, _ in self.messages if at <= self.clock.elapsed))

    def receive(self, batch: int, _visibility: int) -> list[dict[str, Any]]:
        ready = [m for m in self.messages if m[0] <= self.clock.elapsed][:batch]
        for m in ready:
            self.messages.remove(m)
        return [{"messageId": mid, "receiptHandle": mid} for _, mid in ready]

    def delete(self, _receipts: list[str]) -> list[str]:
        return []


def _service(clock: SimClock, recorder: _Recorder) -> tuple[LambdaService, Agenda]:
    agenda = Agenda()
    processes = Processes(clock, agenda)
    service = LambdaService(clock, agenda, processes, recorder.invoke, region="us-east-1", account="123456789012",
                            sizes=lambda _name: 0, after=lambda: None)
    return service, agenda


def _run(clock: SimClock, agenda: Agenda, service: LambdaService, until: float) -> None:
    while (at := agenda.next_time()) is not None and at <= until:
        at, action, _ = agenda.pop()
        clock.advance(max(0.0, at - clock.elapsed))
        action()
        service.check_queues()


@pytest.mark.parametrize("name", ["watcher", "disruption"])
def test_the_simulation_runs_each_schedule_at_the_templates_rate(default: Synth, name: str) -> None:
    rules = default.resources("AWS::Events::Rule")
    logical = default.logical_id(default.stack.functions.schedules[name])
    period = template_period(rules[logical]["Properties"]["ScheduleExpression"])
    clock = SimClock()
    recorder = _Recorder(clock)
    service, agenda = _service(clock, recorder)
    service.schedule(name, 0.0, 600.0)
    _run(clock, agenda, service, 600.0)
    # an invocation starts when its trigger fires (its handler runs after its cold start and work)
    starts = [at for fn, at in service.triggered if fn == name]
    assert len(starts) == 600 // period + 1 and len(recorder.starts[name]) >= len(starts) - 1
    gaps = {round(b - a, 6) for a, b in zip(starts, starts[1:], strict=False)}
    assert gaps == {float(period)}


@pytest.mark.parametrize("name", ["provisioner", "registrar", "interruption"])
def test_the_simulation_batches_each_queue_as_its_event_source_mapping(default: Synth, name: str) -> None:
    function = default.logical_id(default.stack.functions.functions[name])
    (mapping,) = [r["Properties"] for r in default.resources("AWS::Lambda::EventSourceMapping").values()
                  if r["Properties"]["FunctionName"] == {"Ref": function}]
    batch = mapping["BatchSize"]
    window = mapping.get("MaximumBatchingWindowInSeconds", 0)
    concurrency = (mapping.get("ScalingConfig") or {}).get("MaximumConcurrency")
    clock = SimClock()
    recorder = _Recorder(clock)
    service, agenda = _service(clock, recorder)
    queue = _Queue(clock, name)
    service.subscribe(name, queue)  # type: ignore[arg-type]
    count = batch * 3 + 1
    queue.messages = [(5.0, f"m{i}") for i in range(count)]
    agenda.at(5.0, lambda: None)
    _run(clock, agenda, service, 600.0)
    # no batch is bigger than the template's; the first is full at once, so it waits for the bus only
    assert max(recorder.batches[name]) == batch and sum(recorder.batches[name]) == count
    starts = sorted(recorder.starts[name])
    triggered = [at for fn, at in service.triggered if fn == name]
    assert triggered[0] == 5.0 + durations.BUS_TO_QUEUE_SECONDS
    # the last batch fired, a single message, waits out the template's window before it is invoked
    assert min(recorder.batches[name]) == 1 and triggered[-1] >= triggered[-2] + window
    assert starts[0] >= triggered[0] + durations.work(name, 1)
    if concurrency is not None:
        # never more batches in flight than the template allows: the extra ones start only once one ended
        assert len([s for s in starts if s < starts[0] + durations.tail(name)]) <= concurrency


@pytest.mark.parametrize("name", ["provisioner", "registrar", "interruption"])
def test_the_simulations_visibility_timeout_is_the_templates(default: Synth, name: str) -> None:
    from carpool import delivery

    queue = default.stack.routing.work_queues[name].queue
    props = default.resources("AWS::SQS::Queue")[default.logical_id(queue)]["Properties"]
    assert props["VisibilityTimeout"] == delivery.visibility_timeout_seconds(name)
