"""The disruption function releases a reservation without an instance after `launch_deadline_seconds`:
that must be longer than any provisioner invocation can live, or a provisioner still running would have
its claim released under it (and launch an instance no claim knows)."""

from infra.functions import SPECS

from carpool.app.settings import Settings


def test_the_launch_deadline_outlives_the_provisioner_lambda() -> None:
    deadline = Settings(cluster_name="c").launch_deadline_seconds
    assert deadline > SPECS["provisioner"].timeout.to_seconds()
    assert deadline < Settings(cluster_name="c").registration_timeout_seconds  # "a few minutes, not 15"


def test_the_launch_deadline_outlives_every_function_that_launches() -> None:
    """Interruption pre-launches replacements and consolidation launches them (both through
    `provision_pods`): their reservations are counted from their invocation's start as well."""
    deadline = Settings(cluster_name="c").launch_deadline_seconds
    for name in ("provisioner", "interruption", "disruption"):
        assert deadline > SPECS[name].timeout.to_seconds(), name
