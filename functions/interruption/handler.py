"""Interruption Lambda: EC2 spot/rebalance/state-change and AWS Health events for carpool's instances."""

from typing import Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from carpool import observability
from carpool.app import batch, interrupt, parsing, wiring

logger = Logger(service="carpool-interruption")
tracer = Tracer(service="carpool-interruption", auto_patch=False)
observability.trace_calls(tracer)


@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    deps = wiring.get()
    outcome = batch.process(event, parsing.aws_event, lambda parsed: interrupt.run(parsed, deps))
    return outcome.response()
