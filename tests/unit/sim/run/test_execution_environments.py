"""The simulated Lambda's execution environments are as harsh as Lambda's: an idle one is reused only
within `WARM_SECONDS`, none outlives `ENVIRONMENT_LIFETIME_SECONDS` however busy, and what one keeps in
memory (the handler's dependencies and their caches) is its own: a new environment starts empty."""

from __future__ import annotations

from carpool.sim.localaws.requests import RequestRecorder
from carpool.sim.run import durations
from carpool.sim.run.lambda_service import Containers


def test_a_warm_environment_is_reused_and_a_retired_one_is_not() -> None:
    envs = Containers()
    first, cold = envs.acquire(0.0)
    assert cold
    envs.release(1.0, first)
    again, cold = envs.acquire(61.0)
    assert (again, cold) == (first, False)
    envs.release(62.0, again)
    later, cold = envs.acquire(62.0 + durations.WARM_SECONDS + 1)
    assert cold and later != first


def test_an_environment_invoked_every_minute_is_still_retired_after_its_lifetime() -> None:
    envs = Containers()
    number, _cold = envs.acquire(0.0)
    at = 0.0
    starts = 1
    while at < 3 * durations.ENVIRONMENT_LIFETIME_SECONDS:
        envs.release(at + 1, number)
        at += 60
        number, cold = envs.acquire(at)
        starts += cold
    assert starts == 1 + 3  # the first, then one at each lifetime's end (1 h, 2 h, 3 h)


def test_two_environments_at_once_are_two() -> None:
    envs = Containers()
    a, _ = envs.acquire(0.0)
    b, cold = envs.acquire(0.5)
    assert cold and a != b


def test_each_environment_has_its_own_dependencies() -> None:
    from carpool.app import wiring

    recorder = RequestRecorder(enabled=True)
    built: list[dict[str, object]] = []

    def build() -> object:
        deps = {"cache": {}}
        built.append(deps)
        return deps

    recorder.isolate(build)
    seen = []
    for environment in (1, 1, 2):
        with recorder.invocation("disruption", environment):
            seen.append(wiring.installed())
    assert seen[0] is seen[1] and seen[2] is not seen[0] and len(built) == 2
