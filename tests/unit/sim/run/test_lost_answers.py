"""A CreateFleet answer lost after EC2 launched (`LostAnswers`, and the scenario crash point
`answer-lost-after-create-fleet`): the instances exist, the caller gets botocore's `ReadTimeoutError`
(what it raises once its retries are spent), the invocation is not killed."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError

from carpool.sim.run.faults import LostAnswers

from .test_crash_faults import crashes, ec2, fleet, instances

__all__ = ["ec2"]  # the fixture, used by name


def test_the_answer_is_lost_after_the_launch(ec2: Any) -> None:
    client, subnet = ec2
    lost = LostAnswers(times=1)
    lost.register(client)
    with pytest.raises(ReadTimeoutError):
        fleet(client, subnet)
    (launched,) = lost.lost
    assert launched == instances(client) and len(launched) == 1
    assert fleet(client, subnet)["Instances"]  # `times: 1`: the next answer arrives
    lost.unregister(client)


def test_the_scenario_crash_point_loses_the_answer_and_lets_the_invocation_live(ec2: Any) -> None:
    client, subnet = ec2
    faults = crashes({"point": "answer-lost-after-create-fleet"})
    faults.register(client)
    with pytest.raises(ReadTimeoutError, match="answer lost after CreateFleet launched i-"):
        fleet(client, subnet)
    assert len(instances(client)) == 1
    assert faults.fired == [{"at": 0.0, "point": "answer-lost-after-create-fleet", "function": "provisioner"}]
    fleet(client, subnet)
    assert len(instances(client)) == 2
