"""Provisioner Lambda: SQS batches of `Pod Unschedulable` events -> schedule -> CreateFleet -> claims."""

from carpool import cyclic_gc

# The import allocates a hundred-odd thousand objects (modules, classes, validators) that live as long as
# the process: the cyclic collector is paused while they load and they are then frozen out of its reach.
with cyclic_gc.paused(freeze=True):
    from typing import Any

    from aws_lambda_powertools import Logger, Tracer
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from carpool import observability
    from carpool.adapters.aws.wiring import build_from_env
    from carpool.app import batch, parsing, sources, wiring
    from carpool.app.deadline import Deadline
    from carpool.app.provisioning import provision

    logger = Logger(service="carpool-provisioner")
    tracer = Tracer(service="carpool-provisioner", auto_patch=False)
    observability.trace_calls(tracer)
    wiring.provide(build_from_env)


@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    deps = wiring.get()
    deadline = Deadline.from_lambda_context(context)  # claims not started by then are retried, not timed out

    def provision_batch(parsed: dict[str, Any]) -> Any:
        with sources.catalog_read_ahead(deps.catalog):  # a cold start decodes it while waiting on its reads
            return provision.run(parsed, deps, deadline)

    return batch.process(event, parsing.pod_unschedulable, provision_batch).response()
