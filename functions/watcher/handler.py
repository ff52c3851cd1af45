"""Watcher Lambda (every minute): resync the cluster, then follow its watch stream for about a minute,
publishing pending pods and node changes to the bus as it goes (`carpool.delivery.WATCH_SECONDS`)."""

import os
from dataclasses import asdict
from typing import Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.parser import parse
from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from aws_lambda_powertools.utilities.typing import LambdaContext

from carpool import delivery, observability
from carpool.adapters.aws.wiring import build_from_env
from carpool.app import watch, wiring

logger = Logger(service="carpool-watcher")
tracer = Tracer(service="carpool-watcher", auto_patch=False)
observability.trace_calls(tracer)
wiring.provide(build_from_env)
WATCH_SECONDS = float(os.environ.get("CARPOOL_WATCH_SECONDS", delivery.WATCH_SECONDS))
#: Seconds kept free before the Lambda timeout: the last micro-batch's PutEvents and the answer.
MARGIN_SECONDS = 10.0


@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    parse(event=event, model=EventBridgeModel)
    budget = context.get_remaining_time_in_millis() / 1000 - MARGIN_SECONDS
    summary = watch.run(wiring.get(), watch_seconds=max(0.0, min(WATCH_SECONDS, budget)))
    observability.emit("WatcherRuns")
    return asdict(summary)
