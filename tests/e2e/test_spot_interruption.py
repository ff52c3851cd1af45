"""Spot interruption: the replacement registers before the interrupted instance is reclaimed."""

from carpool.sim.runner import SPOT_NOTICE_SECONDS

SCENARIO = "005-spot-interruption.yaml"
BOOT_AND_REGISTER = 40 + 15  # the scenario's truth: bootSeconds + registrationSeconds
WARNING_AT = 300


def _interrupted(result):
    return [i for i in result.launches if i.terminated_at is not None and i.launched_at < WARNING_AT]


def test_the_interrupted_instance_is_reclaimed_after_the_notice(scenario_result):
    gone = _interrupted(scenario_result)
    assert len(gone) == 1
    assert gone[0].terminated_at >= WARNING_AT + SPOT_NOTICE_SECONDS - 10


def test_replacement_launched_at_the_warning_and_registered_before_reclaim(scenario_result):
    (gone,) = _interrupted(scenario_result)
    replacements = [i for i in scenario_result.launches if WARNING_AT <= i.launched_at < WARNING_AT + 30]
    assert replacements, "no replacement launched when the warning arrived"
    assert all(r.node_name for r in replacements), "replacement never registered"
    registered_by = min(r.launched_at for r in replacements) + BOOT_AND_REGISTER
    assert registered_by < gone.terminated_at
    # the interrupted offering is not used for the replacement
    assert all((r.instance_type, r.zone) != (gone.instance_type, gone.zone) for r in replacements)


def test_no_pod_is_left_pending(scenario_result):
    assert scenario_result.pods.pending == 0
    assert scenario_result.pods.total == 6
