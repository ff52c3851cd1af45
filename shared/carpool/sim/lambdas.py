"""Running carpool's Lambda handlers in-process the way the Lambda service would.

The simulation proves the production path, so it loads each `functions/<name>/handler.py` from its file
(exactly what Lambda runs), hands it events in the shapes Lambda delivers (EventBridge scheduled events,
SQS batches of the messages local SQS hands the event source mapping, `carpool.sim.event_source`) and
applies SQS's partial-batch semantics to the answer. The handlers' log output (Powertools writes JSON lines to stdout) is captured as the decision log
instead of reaching the terminal.

Several simulations may run in one process (one after another, or at once in threads): output is routed
by the context that writes it (`captured_output`), so each run's decision log holds its own handlers'
lines only.
"""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import io
import json
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from carpool import delivery
from carpool.sim.result import Decision

HANDLERS = ("watcher", "provisioner", "registrar", "interruption", "disruption")
ACCOUNT = "123456789012"
#: Decision log lines kept per run; a 10,000-pod burst logs far more than a report can show.
MAX_DECISIONS = 5000


def functions_dir() -> Path:
    """Where `functions/<name>/handler.py` live: `CARPOOL_FUNCTIONS_DIR`, else the repository root
    found above the installed package (an editable install) or the working directory."""
    env = os.environ.get("CARPOOL_FUNCTIONS_DIR")
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for parent in [*here.parents, Path.cwd()]:
        if (parent / "functions" / "provisioner").is_dir():
            return parent / "functions"
    raise FileNotFoundError("functions/ not found; set CARPOOL_FUNCTIONS_DIR to the repository's functions folder")


def load_handler(name: str, root: Path | None = None) -> Callable[[Any, Any], Any]:
    """Import `functions/<name>/handler.py` from its path (it is not a package) and return `handler`."""
    path = (root or functions_dir()) / name / "handler.py"
    if not path.is_file():
        raise FileNotFoundError(f"handler for {name!r} not found at {path}")
    spec = importlib.util.spec_from_file_location(f"carpool_sim_functions_{name}", path)
    assert spec is not None and spec.loader is not None
    module: ModuleType = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.handler  # type: ignore[no-any-return]


@dataclass
class LambdaContext:
    """The parts of the Lambda context object Powertools reads."""

    function_name: str
    memory_limit_in_mb: int = 512
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    region: str = "us-east-1"
    timeout_seconds: float = 60.0
    started: float = field(default_factory=time.monotonic)
    account: str = ACCOUNT
    #: simulated seconds (when given, the time left counts on the simulation's clock from `started`)
    elapsed: Callable[[], float] | None = None

    @classmethod
    def deployed(cls, function_name: str, region: str = "us-east-1", account: str = ACCOUNT, *,
                 spent: float = 0.0, elapsed: Callable[[], float] | None = None) -> LambdaContext:
        """The context of an invocation with the function's deployed timeout and memory, `spent` seconds
        of which are gone already (the modelled work the simulation charged before the handler runs).
        With `elapsed` (simulated seconds), the time left counts down on the simulation's clock: for an
        invocation that waits in simulated time (the watcher following its watch)."""
        started = (elapsed() if elapsed else time.monotonic()) - spent
        return cls(function_name, memory_limit_in_mb=delivery.MEMORY_MIB.get(function_name, 512), region=region,
                   timeout_seconds=delivery.TIMEOUT_SECONDS.get(function_name, 60), account=account,
                   started=started, elapsed=elapsed)

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:{self.account}:function:carpool-{self.function_name}"

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/carpool-{self.function_name}"

    @property
    def log_stream_name(self) -> str:
        return "sim"

    @property
    def function_version(self) -> str:
        return "$LATEST"

    def get_remaining_time_in_millis(self) -> int:
        """Counts down from the deployed timeout: in wall time, as Lambda does (the handler's own work, the
        part a deadline protects, takes real time even while the simulation's clock stands still), or on
        the simulation's clock for an invocation that waits in simulated time."""
        now = self.elapsed() if self.elapsed is not None else time.monotonic()
        return max(0, int((self.timeout_seconds - (now - self.started)) * 1000))


def scheduled_event(rule: str, at: datetime, region: str, account: str = ACCOUNT) -> dict[str, Any]:
    """What EventBridge Scheduler/rules deliver to a scheduled Lambda."""
    return {
        "version": "0", "id": str(uuid.uuid4()), "detail-type": "Scheduled Event", "source": "aws.events",
        "account": account, "time": at.strftime("%Y-%m-%dT%H:%M:%SZ"), "region": region,
        "resources": [f"arn:aws:events:{region}:{account}:rule/{rule}"], "detail": {},
    }


def sqs_record(message: Mapping[str, Any], queue_arn: str, region: str) -> dict[str, Any]:
    """One `ReceiveMessage` message (asked with `AttributeNames=All`, `MessageAttributeNames=All`) in the
    Lambda SQS event record shape."""
    attrs = message.get("Attributes") or {}
    account = queue_arn.split(":")[4] if queue_arn.count(":") >= 5 else ACCOUNT
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": {
            "ApproximateReceiveCount": attrs.get("ApproximateReceiveCount", "1"),
            "SentTimestamp": attrs.get("SentTimestamp", "0"),
            "SenderId": attrs.get("SenderId", account),
            "ApproximateFirstReceiveTimestamp": attrs.get("ApproximateFirstReceiveTimestamp", "0"),
        },
        "messageAttributes": _record_message_attributes(message.get("MessageAttributes") or {}),
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }


def received_message(message: Any) -> dict[str, Any]:
    """A message local SQS's backend just handed out (a moto `Message`, after `receive_message`) as
    `ReceiveMessage` with `AttributeNames=All` and `MessageAttributeNames=All` answers it: the same fields
    moto's response writes, from the same values, so `sqs_record` builds the same record either way."""
    answer: dict[str, Any] = {
        "MessageId": message.id,
        "ReceiptHandle": message.receipt_handle,
        "MD5OfBody": message.body_md5,
        "Body": message.body,
        "Attributes": {
            "SenderId": message.sender_id,
            "SentTimestamp": str(message.sent_timestamp),
            "ApproximateReceiveCount": str(message.approximate_receive_count),
            "ApproximateFirstReceiveTimestamp": str(message.approximate_first_receive_timestamp),
        },
    }
    if message.message_attributes:
        answer["MessageAttributes"] = message.message_attributes
        answer["MD5OfMessageAttributes"] = message.attribute_md5
    return answer


def _record_message_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Message attributes as Lambda writes them into a record: lower-camel keys, binary values in base64,
    and the (always empty) list members."""
    out: dict[str, Any] = {}
    for name, value in attributes.items():
        entry: dict[str, Any] = {}
        if value.get("StringValue") is not None:
            entry["stringValue"] = value["StringValue"]
        binary = value.get("BinaryValue")
        if binary is not None:
            entry["binaryValue"] = base64.b64encode(binary).decode() if isinstance(binary, bytes) else str(binary)
        out[name] = {**entry, "stringListValues": [], "binaryListValues": [], "dataType": value.get("DataType", "")}
    return out


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
