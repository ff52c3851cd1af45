"""The simulated Lambda context counts down from the deployed timeout, as Lambda's does."""

from __future__ import annotations

from carpool import delivery
from carpool.sim.localaws.lambda_runtime import LambdaContext


def test_remaining_time_counts_down_from_the_deployed_timeout() -> None:
    now = [1000.0]
    ctx = LambdaContext.deployed("provisioner")
    ctx.started = now[0]
    import carpool.sim.localaws.lambda_runtime as lambda_runtime

    original = lambda_runtime.time.monotonic
    lambda_runtime.time.monotonic = lambda: now[0]  # type: ignore[assignment]
    try:
        assert ctx.get_remaining_time_in_millis() == delivery.TIMEOUT_SECONDS["provisioner"] * 1000
        now[0] += 45.5
        assert ctx.get_remaining_time_in_millis() == (delivery.TIMEOUT_SECONDS["provisioner"] - 45.5) * 1000
        now[0] += 10_000
        assert ctx.get_remaining_time_in_millis() == 0
    finally:
        lambda_runtime.time.monotonic = original  # type: ignore[assignment]


def test_every_function_has_a_timeout() -> None:
    assert set(delivery.TIMEOUT_SECONDS) == {"watcher", "provisioner", "registrar", "interruption", "disruption"}
    assert LambdaContext.deployed("disruption").timeout_seconds == delivery.TIMEOUT_SECONDS["disruption"]
