"""One provisioning call's state, handed to each step instead of the same six parameters."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from carpool.app.deadline import Deadline, allows_a_claim
from carpool.app.provisioning.catch_up import LimitCatchUp
from carpool.app.provisioning.outcome import ProvisionOutcome
from carpool.app.wiring import Dependencies

#: why pods are retried when their claims could not start in time
DEADLINE_REASON = "not started before the invocation's deadline; retried on redelivery"


@dataclass
class Invocation:
    """What every step of one call reads (its dependencies, its clock reading, its deadline, the claims it
    replaces) and the two things the steps share as they go: the offerings found unavailable and the outcome."""

    deps: Dependencies
    #: the one clock reading of the call: claims are named, reserved and stamped with it
    now: datetime
    #: why the call launches (`provisioning`, or a disruption's reason), for metrics and logs
    reason: str
    deadline: Deadline | None = None
    #: claims this call replaces: their nominations and room do not count as serving a pod
    exclude: frozenset[str] | set[str] = frozenset()
    #: USD/hour every launch must stay under (replacements that must be cheaper), or None
    price_ceiling: float | None = None
    #: (type, zone, capacity type) offerings not to launch: read once, then grown by capacity errors, so a
    #: later round and a later claim of the same round avoid what EC2 just refused
    unavailable: set[tuple[str, str, str]] = field(default_factory=set)
    outcome: ProvisionOutcome = field(default_factory=ProvisionOutcome)
    #: pods a pool's limit held back, scheduled again once a launch lowered the pool's charge
    limited: LimitCatchUp = field(default_factory=LimitCatchUp)

    def allows_a_claim(self) -> bool:
        """Whether a claim's worst case still fits before the deadline."""
        return allows_a_claim(self.deadline)
