"""The simulation's discrete-event core: actions at their own moments, invocations that wait in simulated
time and run one at a time with the loop."""

from __future__ import annotations

import threading

from carpool.sim.clock import SimClock
from carpool.sim.run.discrete import Agenda, Processes


def _loop(clock: SimClock, agenda: Agenda, after: object = None, until: float = 1e9) -> None:
    while (at := agenda.next_time()) is not None and at <= until:
        at, action, _ = agenda.pop()
        clock.advance(max(0.0, at - clock.elapsed))
        action()
        if callable(after):
            after()


def test_actions_run_in_time_order_and_ties_in_the_order_added() -> None:
    agenda, seen = Agenda(), []
    agenda.at(2.5, lambda: seen.append("c"))
    agenda.at(0.7, lambda: seen.append("a"))
    agenda.at(2.5, lambda: seen.append("d"))
    agenda.at(1.3000001, lambda: seen.append("b"))
    clock = SimClock()
    _loop(clock, agenda)
    assert seen == ["a", "b", "c", "d"] and clock.elapsed == 2.5


def test_a_sleeping_invocation_resumes_at_its_moment_while_the_loop_goes_on() -> None:
    clock, agenda = SimClock(), Agenda()
    processes = Processes(clock, agenda)
    trace: list[tuple[str, float]] = []

    def body() -> None:
        trace.append(("start", clock.elapsed))
        processes.sleep(4.2)
        trace.append(("woke", clock.elapsed))

    agenda.at(1.0, lambda: processes.start("fn", body, on_end=lambda: trace.append(("end", clock.elapsed))))
    agenda.at(3.0, lambda: trace.append(("loop", clock.elapsed)))
    _loop(clock, agenda)
    assert trace == [("start", 1.0), ("loop", 3.0), ("woke", 5.2), ("end", 5.2)]
    assert processes.waiting == 0


def test_a_change_wakes_a_waiting_invocation_before_its_deadline() -> None:
    clock, agenda = SimClock(), Agenda()
    processes = Processes(clock, agenda)
    state = {"changed": False}
    woke: list[float] = []

    def body() -> None:
        processes.wait(60.0, lambda: state["changed"])
        woke.append(clock.elapsed)

    agenda.at(0.0, lambda: processes.start("watch", body))
    agenda.at(7.5, lambda: state.update(changed=True))
    _loop(clock, agenda, after=processes.wake_changed)
    assert woke == [7.5]


def test_only_one_thread_runs_at_a_time() -> None:
    clock, agenda = SimClock(), Agenda()
    processes = Processes(clock, agenda)
    running = threading.Semaphore(1)
    overlaps: list[str] = []

    def body(name: str) -> None:
        for _ in range(5):
            if not running.acquire(blocking=False):
                overlaps.append(name)
                return
            running.release()
            processes.sleep(1.0)

    for i in range(3):
        agenda.at(0.5 * i, lambda i=i: processes.start(f"p{i}", lambda: body(f"p{i}")))
    _loop(clock, agenda)
    assert overlaps == [] and processes.waiting == 0


def test_ending_the_simulation_ends_every_waiting_invocation() -> None:
    clock, agenda = SimClock(), Agenda()
    processes = Processes(clock, agenda)
    finished: list[str] = []

    def body() -> None:
        try:
            processes.wait(100.0, lambda: False)
        finally:
            finished.append("cleaned up")

    agenda.at(0.0, lambda: processes.start("w", body))
    _loop(clock, agenda, until=10.0)
    assert processes.waiting == 1
    processes.kill_all()
    assert processes.waiting == 0 and finished == ["cleaned up"] and processes.failures == []


def test_what_an_invocations_worker_threads_owe_is_paid_on_its_own_thread() -> None:
    import contextvars

    clock, agenda = SimClock(), Agenda()
    processes = Processes(clock, agenda)
    paid_at: list[float] = []
    outside: list[bool] = []

    def body() -> None:
        context = contextvars.copy_context()  # as carpool.together starts its workers
        worker = threading.Thread(target=context.run, args=(lambda: processes.owe(0.75),))
        worker.start()
        worker.join()
        processes.pay(0.25)
        paid_at.append(clock.elapsed)

    agenda.at(2.0, lambda: processes.start("fn", body))
    _loop(clock, agenda)
    outside.append(processes.owe(1.0))  # the loop's own thread belongs to no invocation
    assert paid_at == [3.0] and outside == [False]
