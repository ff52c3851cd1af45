"""Registrar Lambda: `Node Registered` / `Node Deleted` -> claim settled, real capacity learned."""

from typing import Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from carpool import observability
from carpool.adapters.aws.wiring import build_from_env
from carpool.app import batch, parsing, register, wiring

logger = Logger(service="carpool-registrar")
tracer = Tracer(service="carpool-registrar", auto_patch=False)
observability.trace_calls(tracer)
wiring.provide(build_from_env)


@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    deps = wiring.get()
    outcome = batch.process(event, parsing.node_lifecycle, lambda parsed: register.run(parsed, deps))
    return outcome.response()
