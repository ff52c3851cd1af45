"""A pool skipped because its class's status says `Ready=False` is no new refusal: `not_ready.note` does not
record it again, so the record of the launch that was refused lapses and the class is tried again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from carpool.app import not_ready
from carpool.app.provisioning.outcome import NotReady
from carpool.launch.failures import Cause
from carpool.state.not_ready import MemoryNotReady
from carpool.state.reasons import REFRESH

T0 = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
MESSAGE = "spec.role: IAM role 'x' does not exist"


def test_a_refusal_is_recorded_and_a_skip_for_the_status_is_not() -> None:
    store = MemoryNotReady()
    clock = SimpleNamespace(now=T0)
    deps = SimpleNamespace(clock=lambda: clock.now, not_ready=store)
    not_ready.note({"broken": NotReady("broken", "missing", Cause.ROLE, MESSAGE)}, [], deps)
    (entry,) = store.all(T0)
    assert (entry.nodeclass, entry.cause, entry.confirmed) == ("missing", "RoleNotFound", T0)
    clock.now = T0 + REFRESH + timedelta(minutes=1)  # a refusal met again would be confirmed now
    not_ready.note({"broken": NotReady("broken", "missing", Cause.ROLE, MESSAGE, from_status=True)}, [], deps)
    (entry,) = store.all(clock.now)
    assert entry.confirmed == T0
    not_ready.note({"broken": NotReady("broken", "missing", Cause.ROLE, MESSAGE)}, [], deps)
    (entry,) = store.all(clock.now)
    assert entry.confirmed == clock.now
