"""Provisioner Lambda: SQS batches of `Pod Unschedulable` events -> schedule -> CreateFleet -> claims."""

from typing import Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from carpool import observability
from carpool.adapters.aws.wiring import build_from_env
from carpool.app import batch, parsing, provision, wiring
from carpool.app.deadline import Deadline

logger = Logger(service="carpool-provisioner")
tracer = Tracer(service="carpool-provisioner", auto_patch=False)
observability.trace_calls(tracer)
wiring.provide(build_from_env)


@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    deps = wiring.get()
    deadline = Deadline.from_lambda_context(context)  # claims not started by then are retried, not timed out
    outcome = batch.process(event, parsing.pod_unschedulable, lambda parsed: provision.run(parsed, deps, deadline))
    return outcome.response()
