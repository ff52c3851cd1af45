"""Disruption Lambda (scheduled): orphans, registration timeouts, and voluntary disruption; it also keeps
the shared instance-type catalog warm for every function's cold start."""

from dataclasses import asdict
from typing import Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.parser import parse
from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from aws_lambda_powertools.utilities.typing import LambdaContext

from carpool import observability
from carpool.adapters.aws.wiring import build_from_env
from carpool.app import catalog_refresh, disrupt, wiring

logger = Logger(service="carpool-disruption")
tracer = Tracer(service="carpool-disruption", auto_patch=False)
observability.trace_calls(tracer)
wiring.provide(build_from_env)


@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    parse(event=event, model=EventBridgeModel)
    deps = wiring.get()
    catalog_refresh.run(deps)  # first, so this run's consolidation already prices with the new one
    return asdict(disrupt.run(deps))
