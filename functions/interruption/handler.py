"""Interruption Lambda: EC2 spot/rebalance/state-change and AWS Health events for carpool's instances."""

from typing import Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from carpool import observability
from carpool.adapters.aws.wiring import build_from_env
from carpool.app import batch, interrupt, parsing, wiring

logger = Logger(service="carpool-interruption")
tracer = Tracer(service="carpool-interruption", auto_patch=False)
observability.trace_calls(tracer)
wiring.provide(build_from_env)


@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    deps = wiring.get()
    follow_up = _follow_up(event)
    outcome = batch.process(event, parsing.aws_event, lambda parsed: interrupt.run(parsed, deps, follow_up))
    return outcome.response()


def _follow_up(event: dict[str, Any]) -> Any:
    """Next drain steps go back to the queue this batch came from (see `carpool.app.interrupt`)."""
    records = event.get("Records") if isinstance(event, dict) else None
    arn = next((r.get("eventSourceARN") for r in records or [] if isinstance(r, dict) and r.get("eventSourceARN")), None)
    if not arn:
        return None
    from carpool.adapters.aws.sqs import SqsFollowUp

    try:
        return SqsFollowUp(arn)
    except ValueError:
        return None
