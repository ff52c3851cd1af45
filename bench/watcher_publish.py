"""The watcher's first run of the 10,000-pod burst alone: `examples/burst-10k.yaml` set up as the
simulation sets it up (local AWS, the event path, the Deployment's 10,000 pending pods), then one
watcher invocation through the real handler, which publishes 10,000 Pod Unschedulable events in 1,000
PutEvents calls. The run is CPU-bound on one core (local AWS serves from threads of the same process),
so what it costs is process CPU, split by thread:

- publisher: the publisher's calls (botocore: validation, serialization, signing; the HTTP exchange);
- PutEvents handler: local AWS's EventBridge handler (the entries decoded, matched, sent to SQS);
- rest: the watcher's own work (listing, building the entries), local AWS's request handling (server,
  routing, response), the thread pool.

`python -m bench.watcher_publish` prints one line per repetition.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "examples" / "burst-10k.yaml"


class _ThreadCpu:
    """CPU seconds spent inside wrapped functions, on whichever thread runs them."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._lock = threading.Lock()

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        self.seconds.setdefault(name, 0.0)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                with self._lock:
                    self.seconds[name] += time.thread_time() - start

        return timed


@contextlib.contextmanager
def _wrapped(owner: Any, name: str, cpu: _ThreadCpu, label: str) -> Iterator[None]:
    original = owner.__dict__[name]
    setattr(owner, name, cpu.wrap(label, original))
    try:
        yield
    finally:
        setattr(owner, name, original)


def measure(repeat: int = 1) -> list[dict[str, Any]]:
    """One row per watcher run: process CPU and wall seconds, the split, what was published."""
    from carpool.adapters.aws.events import EventBridgePublisher
    from carpool.sim.localaws.in_process import eventbridge_request_handler
    from carpool.sim.run.runner import SimRunner
    from carpool.sim.run.scenario import load_scenario

    rows: list[dict[str, Any]] = []

    class FirstWatcherRun(SimRunner):
        def _loop(self) -> None:
            for step in self.scenario.workload:
                if step.at <= 0:
                    self._step(step)
            self.cluster.bind()
            for _ in range(repeat):
                rows.append(self._one_run())
            self.clock.advance(self.scenario.duration + 1)

        def _one_run(self) -> dict[str, Any]:
            cpu = _ThreadCpu()
            with (_wrapped(EventBridgePublisher, "_send_batch", cpu, "publisher"),
                  _wrapped(eventbridge_request_handler(), "put_events", cpu, "handler")):
                start_cpu, start_wall = time.process_time(), time.perf_counter()
                answer = self._invoke_scheduled_answer("watcher")
                total, wall = time.process_time() - start_cpu, time.perf_counter() - start_wall
            split = {k: round(v, 3) for k, v in cpu.seconds.items()}
            split["rest"] = round(total - sum(cpu.seconds.values()), 3)
            return {"cpuSeconds": round(total, 3), "wallSeconds": round(wall, 3), "split": split,
                    "published": (answer or {}).get("published"), "failed": (answer or {}).get("failed")}

        def _invoke_scheduled_answer(self, name: str) -> Any:
            from carpool.sim.localaws import lambda_runtime

            return self._invoke(name, lambda_runtime.scheduled_event(f"carpool-{name}", self.clock.now(), self.region,
                                                              self.account))

    FirstWatcherRun(load_scenario(SCENARIO), record_requests=False).run()
    return rows


def print_rows(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        split = ", ".join(f"{k} {v:.2f}" for k, v in r["split"].items())
        print(f"watcher first run (10,000 events)   {r['cpuSeconds']:6.2f} s CPU  {r['wallSeconds']:6.2f} s wall  "
              f"({split})  published {r['published']}, failed {r['failed']}")


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    with contextlib.redirect_stdout(io.StringIO()):  # the handler's log lines, as in Lambda
        found = measure(count)
    print_rows(found)
