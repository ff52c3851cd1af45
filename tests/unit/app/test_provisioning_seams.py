"""The provisioning package's own seams: which event speaks for a pod, and what an outcome keeps of the
pods it fails and refuses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from carpool.api.k8s import Pod
from carpool.app.provisioning import confirm
from carpool.app.provisioning.outcome import ProvisionOutcome
from carpool.state.models import Claim

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _pod(uid: str) -> Pod:
    raw: dict[str, Any] = {"metadata": {"name": "db-0", "namespace": "default", "uid": uid},
                           "spec": {"containers": [{"name": "c", "image": "x"}]}, "status": {"phase": "Pending"}}
    return Pod.model_validate(raw)


def test_the_live_pods_own_event_speaks_for_it_however_late_its_predecessors_was_stamped() -> None:
    old, new = _pod("uid-old"), _pod("uid-new")
    events = {(old.key, "uid-old"): (old, NOW + timedelta(seconds=30)), (new.key, "uid-new"): (new, NOW)}
    assert confirm.speaking(events, {new.key: new})[new.key] == (new, NOW)


def test_without_a_live_pod_the_newest_event_speaks() -> None:
    old, new = _pod("uid-old"), _pod("uid-new")
    events = {(old.key, "uid-old"): (old, NOW + timedelta(seconds=30)), (new.key, "uid-new"): (new, NOW)}
    assert confirm.speaking(events, {})[old.key][0] is old


def test_a_pod_keeps_the_first_reason_it_failed_for() -> None:
    outcome = ProvisionOutcome()
    outcome.fail(["default/a"], "first")
    outcome.fail(["default/a", "default/b"], "second")
    assert outcome.failed == {"default/a": "first", "default/b": "second"}


def test_a_refusal_a_later_round_overcame_is_forgotten() -> None:
    outcome = ProvisionOutcome(refused={"default/a": "taken", "default/b": "limit", "default/c": "taken"})
    outcome.launched.append(Claim(name="c1", nodepool="p", nodeclass="nc", created_at=NOW, pods=["default/a"]))
    outcome.nominated_in_flight["c0"] = ["default/c"]
    outcome.forget_overcome_refusals()
    assert outcome.refused == {"default/b": "limit"}
