"""The Lambda service's side of an invocation: the handler's code, its context object and its events.

The simulation proves the production path, so it loads each `functions/<name>/handler.py` from its file
(exactly what Lambda runs) and hands it events in the shapes Lambda delivers: EventBridge scheduled
events, and SQS batches of the messages local SQS hands the event source mapping
(`carpool.sim.localaws.event_source`).
What becomes of the handlers' output is the run's business (`carpool.sim.run.decision_log`).
"""

from __future__ import annotations

import base64
import importlib.util
import os
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from carpool import delivery

HANDLERS = ("watcher", "provisioner", "registrar", "interruption", "disruption")
ACCOUNT = "123456789012"


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
    #: which execution environment runs the invocation (Lambda names one log stream per environment)
    environment: int = 0

    @classmethod
    def deployed(cls, function_name: str, region: str = "us-east-1", account: str = ACCOUNT, *,
                 spent: float = 0.0, elapsed: Callable[[], float] | None = None,
                 environment: int = 0) -> LambdaContext:
        """The context of an invocation with the function's deployed timeout and memory, `spent` seconds
        of which are gone already (the modelled work the simulation charged before the handler runs).
        With `elapsed` (simulated seconds), the time left counts down on the simulation's clock: for an
        invocation that waits in simulated time (the watcher following its watch)."""
        started = (elapsed() if elapsed else time.monotonic()) - spent
        return cls(function_name, memory_limit_in_mb=delivery.MEMORY_MIB.get(function_name, 512), region=region,
                   timeout_seconds=delivery.TIMEOUT_SECONDS.get(function_name, 60), account=account,
                   started=started, elapsed=elapsed, environment=environment)

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:{self.account}:function:carpool-{self.function_name}"

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/carpool-{self.function_name}"

    @property
    def log_stream_name(self) -> str:
        return f"sim/[$LATEST]{self.environment:032x}"

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
