"""The simulation's discrete-event core: an agenda of timed actions, and functions that wait.

The deployed functions run concurrently and for a while: a watcher run follows its watch stream for a
minute while provisioner batches come and go. The simulation plays that on one clock:

- `Agenda` holds what happens next (a workload step, a kubelet's boot step, a scheduled invocation, a
  queue's batch, a function's wake-up), each at its own moment, not rounded to a tick; the loop takes the
  earliest and moves the clock to it.
- `Processes` runs each function invocation on a thread of its own, but only one thread (the loop or one
  invocation) runs at a time, handing over a baton: an invocation that waits (`sleep`, or a watch with
  nothing to deliver) gives the baton back to the loop, which wakes it when its moment comes. So a run is
  deterministic, and simulated time passes only between actions, never during one.
"""

from __future__ import annotations

import contextvars
import heapq
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from carpool.sim.clock import SimClock


@dataclass(order=True)
class _Entry:
    at: float
    seq: int
    action: Callable[[], None] = field(compare=False)
    label: str = field(compare=False, default="")


class Agenda:
    """Timed actions in time order (ties in the order they were added)."""

    def __init__(self) -> None:
        self._heap: list[_Entry] = []
        self._seq = itertools.count()

    def at(self, when: float, action: Callable[[], None], label: str = "") -> None:
        # an action is due exactly at a moment the clock can show (`clock.RESOLUTION`)
        heapq.heappush(self._heap, _Entry(round(when, 6), next(self._seq), action, label))

    def next_time(self) -> float | None:
        return self._heap[0].at if self._heap else None

    def pop(self) -> tuple[float, Callable[[], None], str]:
        entry = heapq.heappop(self._heap)
        return entry.at, entry.action, entry.label

    def __len__(self) -> int:
        return len(self._heap)


#: The invocation whose context this is: set on its thread, and inherited by the worker threads it starts
#: through `carpool.together` (which runs each in a copy of the caller's context).
_current: contextvars.ContextVar[_Process | None] = contextvars.ContextVar("carpool_sim_process", default=None)


class ProcessKilled(BaseException):
    """Raised inside a waiting invocation when the simulation ends before it does (a BaseException, so a
    handler's `except Exception` does not swallow it)."""


class _Process:
    def __init__(self, name: str) -> None:
        self.name = name
        self.go = threading.Event()
        self.done = False
        self.killed = False
        self.wants_change: Callable[[], bool] | None = None
        self.on_resume: Callable[[], None] | None = None
        #: the current wait's identity: a wake-up of an earlier wait finds another token and does nothing
        self.token: object | None = None
        #: simulated seconds its worker threads spent, to be paid on its own thread (`owe`)
        self.debt = 0.0


class Processes:
    """Invocations running on threads, one at a time with the loop (see the module docstring)."""

    def __init__(self, clock: SimClock, agenda: Agenda) -> None:
        self._clock = clock
        self._agenda = agenda
        self._back = threading.Event()
        self._local = threading.local()
        self._running: list[_Process] = []
        self.failures: list[tuple[str, BaseException]] = []

    # -- from the loop ---------------------------------------------------------------------------------
    def start(self, name: str, body: Callable[[], Any], on_end: Callable[[], None] | None = None) -> None:
        """Run `body` as an invocation now; returns when it ended or first waits."""
        proc = _Process(name)
        self._running.append(proc)
        context = contextvars.copy_context()

        def main() -> None:
            self._local.proc = proc
            _current.set(proc)
            proc.go.wait()
            try:
                if not proc.killed:
                    body()
            except ProcessKilled:
                pass
            except BaseException as exc:  # noqa: BLE001 - reported to the loop, which logs it
                self.failures.append((name, exc))
            finally:
                proc.done = True
                if on_end is not None and not proc.killed:
                    on_end()
                self._back.set()

        thread = threading.Thread(target=context.run, args=(main,), name=f"sim-{name}", daemon=True)
        thread.start()
        self._resume(proc)

    def wake_changed(self) -> None:
        """Resume every invocation waiting for a change that has happened (a watch with news)."""
        for proc in list(self._running):
            if proc.wants_change is not None and not proc.done and proc.wants_change():
                self._resume(proc)

    def kill_all(self) -> None:
        """End every invocation still waiting (the simulation is over)."""
        for proc in list(self._running):
            if not proc.done:
                proc.killed = True
                self._resume(proc)

    @property
    def waiting(self) -> int:
        return sum(1 for p in self._running if not p.done)

    def _resume(self, proc: _Process) -> None:
        proc.wants_change = None
        self._back.clear()
        proc.go.set()
        self._back.wait()
        if proc.done:
            self._running.remove(proc)

    # -- from an invocation ------------------------------------------------------------------------------
    def inside(self) -> bool:
        """Whether the calling thread is an invocation (not the loop)."""
        return getattr(self._local, "proc", None) is not None

    def sleep(self, seconds: float) -> None:
        """Let `seconds` of simulated time pass for the calling invocation."""
        self.wait(self._clock.elapsed + max(0.0, seconds), None)

    def owe(self, seconds: float) -> bool:
        """Charge `seconds` to the invocation whose worker thread calls this (a worker cannot wait on the
        simulated clock itself: its invocation pays when it next reads, `pay`); False outside one."""
        proc = _current.get()
        if proc is None or proc not in self._running:
            return False
        proc.debt += seconds
        return True

    def pay(self, seconds: float = 0.0) -> None:
        """On an invocation's own thread: let `seconds` and what its workers owe pass."""
        proc: _Process = self._local.proc
        total, proc.debt = seconds + proc.debt, 0.0
        if total > 0:
            self.sleep(total)

    def wait(self, until: float, changed: Callable[[], bool] | None) -> None:
        """Give the baton back until simulated time `until`, or until `changed()` holds after an action.
        Waiting for a moment already reached would make no progress: that is refused."""
        proc: _Process = self._local.proc
        if round(until, 6) <= self._clock.elapsed and changed is not None:
            raise ValueError(f"{proc.name} waits for {until}, which has passed ({self._clock.elapsed})")
        token = object()
        proc.wants_change = changed

        def wake() -> None:
            if proc.token is token and not proc.done:
                self._resume(proc)

        proc.token = token
        self._agenda.at(until, wake, f"wake {proc.name}")
        proc.go.clear()
        self._back.set()
        proc.go.wait()
        if proc.killed:
            raise ProcessKilled(proc.name)
        if proc.on_resume is not None:
            proc.on_resume()

    def on_resume(self, action: Callable[[], None]) -> None:
        """Run `action` on the calling invocation's thread each time it gets the baton back (it restores
        what the loop changed meanwhile, such as whose log lines these are)."""
        self._local.proc.on_resume = action
