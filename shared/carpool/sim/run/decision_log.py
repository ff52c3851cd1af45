"""The decision log: carpool's handlers' output, captured while they run in a simulation.

The handlers' log output (Powertools writes JSON lines to stdout) is captured as the decision log instead
of reaching the terminal. Several simulations may run in one process (one after another, or at once in
threads): output is routed by the context that writes it (`captured_output`), so each run's decision log
holds its own handlers' lines only.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

from carpool.sim.localaws.lambda_runtime import HANDLERS
from carpool.sim.run.result import Decision

#: Decision log lines kept per run; a 10,000-pod burst logs far more than a report can show.
MAX_DECISIONS = 5000


class DecisionLog(io.TextIOBase):
    """A text stream that turns each written line into a `Decision` (JSON lines keep their fields)."""

    def __init__(self, at: Callable[[], float]) -> None:
        super().__init__()
        self._at = at
        self._partial = ""
        self.source = "sim"
        self.decisions: list[Decision] = []
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._partial += text
        *lines, self._partial = self._partial.split("\n")
        for line in lines:
            if line.strip():
                self.add_line(line)
        return len(text)

    def add_line(self, line: str) -> None:
        try:
            doc = json.loads(line)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and "_aws" in doc:
            return  # a CloudWatch embedded-metrics document, not a decision
        if isinstance(doc, dict):
            message = str(doc.pop("message", "") or doc.get("msg", ""))
            level = str(doc.pop("level", "INFO"))
            for k in ("timestamp", "location", "service", "sampling_rate", "xray_trace_id", "cold_start",
                      "function_arn", "function_memory_size", "function_request_id", "function_name"):
                doc.pop(k, None)
            self.add(self.source, message, level, doc)
        else:
            self.add(self.source, line.rstrip())

    def add(self, source: str, message: str, level: str = "INFO", data: Mapping[str, Any] | None = None) -> None:
        if len(self.decisions) >= MAX_DECISIONS:
            self.dropped += 1
            return
        self.decisions.append(Decision(at=self._at(), source=source, level=level, message=message,
                                       data=_jsonable(dict(data or {}))))


def _jsonable(data: dict[str, Any]) -> dict[str, Any]:
    try:
        json.dumps(data)
        return data
    except (TypeError, ValueError):
        return json.loads(json.dumps(data, default=str))


#: The decision log of the simulation whose context is running (None: not inside a simulation).
_sink: ContextVar[DecisionLog | None] = ContextVar("carpool_sim_output", default=None)


class _Router(io.TextIOBase):
    """`sys.stdout` while any simulation runs: a write goes to the decision log of the simulation whose
    context makes it, any other write to the stream that was `sys.stdout` before."""

    def __init__(self) -> None:
        super().__init__()
        self.outer: Any = None

    def writable(self) -> bool:
        return True

    def _target(self) -> Any:
        if sys.stdout is not self:  # a handler that kept this stream after the simulations ended
            return sys.stdout
        return self.outer if self.outer is not None else sys.__stdout__

    def write(self, text: str) -> int:
        log = _sink.get()
        if log is not None:
            return log.write(text)
        return int(self._target().write(text))

    def flush(self) -> None:
        if _sink.get() is None:
            target = self._target()
            if target is not None:
                target.flush()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self._target(), "encoding", None) or "utf-8")


class _RecordHandler(logging.Handler):
    """Standard-library log records of `carpool.*` go to the decision log of the simulation that logs them."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)

    def emit(self, record: logging.LogRecord) -> None:
        log = _sink.get()
        if log is None:
            return
        if isinstance(record.msg, dict):
            log.add(log.source, str(record.msg.get("message", "")), record.levelname, record.msg)
        else:
            log.add(log.source, record.getMessage(), record.levelname)


class _OutputRouting:
    """The process-wide part of capturing output: `sys.stdout`, the streams of handlers writing to it and
    the `carpool` logger's record handler, installed by the first simulation that starts and put back by
    the last one that ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._router = _Router()
        self._records = _RecordHandler()
        self._swapped: list[tuple[logging.StreamHandler[Any], Any]] = []
        self._level = logging.NOTSET

    def acquire(self) -> None:
        with self._lock:
            self._users += 1
            if self._users == 1:
                self._install()

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0:
                self._uninstall()

    def _install(self) -> None:
        outs = {id(sys.stdout), id(sys.__stdout__)}
        functions = {f"carpool-{name}" for name in HANDLERS}  # the handlers' Powertools loggers
        for logger in [logging.getLogger(), *[lg for lg in logging.Logger.manager.loggerDict.values()
                                              if isinstance(lg, logging.Logger)]]:
            for h in logger.handlers:
                # Powertools' loggers keep the stream they were created with: stdout in Lambda, whatever
                # stood for it when they were first created in this process
                if isinstance(h, logging.StreamHandler) and h.stream is not self._router and (
                        id(h.stream) in outs or (logger.name in functions and type(h) is logging.StreamHandler)):
                    self._swapped.append((h, h.setStream(self._router)))
        self._router.outer = sys.stdout
        sys.stdout = self._router
        carpool_logger = logging.getLogger("carpool")
        carpool_logger.addHandler(self._records)
        self._level = carpool_logger.level
        if carpool_logger.level == logging.NOTSET or carpool_logger.level > logging.INFO:
            carpool_logger.setLevel(logging.INFO)

    def _uninstall(self) -> None:
        carpool_logger = logging.getLogger("carpool")
        carpool_logger.removeHandler(self._records)
        carpool_logger.setLevel(self._level)
        if sys.stdout is self._router:
            sys.stdout = self._router.outer
        self._router.outer = None
        for h, stream in self._swapped:
            if h.stream is self._router:
                h.setStream(stream)
        self._swapped.clear()


_ROUTING = _OutputRouting()


def routed_to(log: DecisionLog) -> bool:
    """Whether output of the running context goes to `log` (it runs inside that simulation)."""
    return _sink.get() is log


@contextlib.contextmanager
def captured_output(log: DecisionLog) -> Iterator[None]:
    """Route what this context writes to stdout (Powertools' JSON log lines and metrics) and logs through
    `carpool.*` loggers into `log`, until the block ends. Other simulations' contexts keep their own."""
    _ROUTING.acquire()
    token = _sink.set(log)
    try:
        yield
    finally:
        _sink.reset(token)
        _ROUTING.release()
