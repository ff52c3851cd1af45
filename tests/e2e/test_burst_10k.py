"""10,000 pods at once, through the whole event path, in well under a minute of wall time."""

import pytest

SCENARIO = "burst-10k.yaml"



def test_all_ten_thousand_pods_are_scheduled(scenario_result):
    assert scenario_result.pods.total == 10_000
    assert scenario_result.pods.scheduled == 10_000


def test_completes_in_under_a_minute(scenario_result):
    assert scenario_result.wall_seconds < 60, f"took {scenario_result.wall_seconds}s"


def test_no_message_was_dead_lettered(scenario_result):
    assert not any(scenario_result.dead_letters.values())
