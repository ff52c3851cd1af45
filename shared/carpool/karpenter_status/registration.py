"""NodeRegistrationHealthy: whether a NodePool's recent launches became nodes, as Karpenter keeps it
(kubernetes-sigs/karpenter v1.14.1 `pkg/state/nodepoolhealth/tracker.go`, written by
`pkg/controllers/nodeclaim/lifecycle/registration.go` and `liveness.go`, reset by
`pkg/controllers/nodepool/registrationhealth/controller.go`).

Karpenter's rule: a ring of the pool's last `BUFFER_SIZE` outcomes (a NodeClaim that registered: True;
one deleted because it did not launch or register in time: False). The pool is Unhealthy when at least
`THRESHOLD_FALSE` of the ring's size are failures, Healthy when it holds anything else, Unknown when
empty. A success sets the condition True when the ring with it is Healthy; a failure sets it False
(with the launch's reason, or `RegistrationFailed` when the instance launched but no node came) when the
ring with it is Unhealthy and it is not False already. An edit of the NodePool or of its EC2NodeClass
(a generation neither was seen at) empties the ring and sets the condition Unknown. Karpenter keeps the
ring in memory and, after a restart, fills it from the condition (True: one success; False: enough
failures to stay Unhealthy): carpool's functions are as short-lived, and do the same.

carpool's outcomes are its claims (`carpool.app.karpenter_status`): one that registered since the last
run is a success; one the clean-up terminated for never registering, or released for never launching,
is a failure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from carpool.karpenter_status.conditions import FALSE, TRUE, ConditionSet

__all__ = ["BUFFER_SIZE", "NODE_REGISTRATION_HEALTHY", "Health", "Outcome", "apply", "health", "hydrated", "recorded"]

NODE_REGISTRATION_HEALTHY: Final = "NodeRegistrationHealthy"
BUFFER_SIZE: Final = 4
THRESHOLD_FALSE: Final = 0.5
#: Karpenter's reason and message for a claim that launched but whose node never registered
REGISTRATION_FAILED: Final = ("RegistrationFailed", "Failed to register node")


class Health(Enum):
    UNKNOWN = "Unknown"
    HEALTHY = "Healthy"
    UNHEALTHY = "Unhealthy"


@dataclass(frozen=True, slots=True)
class Outcome:
    """One claim of the pool: it registered, or it was given up (with the launch's reason when it never
    launched; Karpenter's `RegistrationFailed` when it launched)."""

    registered: bool
    reason: str = REGISTRATION_FAILED[0]
    message: str = REGISTRATION_FAILED[1]


def health(ring: tuple[bool, ...]) -> Health:
    if not ring:
        return Health.UNKNOWN
    failures = sum(1 for ok in ring if not ok)
    return Health.UNHEALTHY if failures / BUFFER_SIZE >= THRESHOLD_FALSE else Health.HEALTHY


def recorded(ring: tuple[bool, ...], registered: bool) -> tuple[bool, ...]:
    """The ring with one more outcome (the oldest falls out past `BUFFER_SIZE`)."""
    return (*ring, registered)[-BUFFER_SIZE:]


def hydrated(condition: Mapping[str, Any] | None) -> tuple[bool, ...]:
    """The ring a restarted controller starts from: what the condition says (Karpenter's `SetStatus`)."""
    status = condition.get("status") if condition else None
    if status == TRUE:
        return (True,)
    if status == FALSE:
        return (False,) * int(BUFFER_SIZE * THRESHOLD_FALSE)
    return ()


def apply(conditions: ConditionSet, ring: tuple[bool, ...], outcomes: Iterable[Outcome]) -> tuple[bool, ...]:
    """Each outcome in turn, as registration.go and liveness.go apply one: the condition set when the
    ring with it crosses, the ring returned."""
    for outcome in outcomes:
        trial = recorded(ring, outcome.registered)
        if outcome.registered:
            if health(trial) is Health.HEALTHY:
                conditions.set_true(NODE_REGISTRATION_HEALTHY)
        elif health(trial) is Health.UNHEALTHY:
            current = conditions.get(NODE_REGISTRATION_HEALTHY)
            if current is None or current.get("status") != FALSE:
                conditions.set_false(NODE_REGISTRATION_HEALTHY, outcome.reason, outcome.message)
        ring = trial
    return ring
