"""What one provisioning call reports: what it launched or nominated, and why every other pod was not."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from carpool.launch.failures import Cause
from carpool.state.models import Claim


@dataclass(frozen=True)
class NotReady:
    """A launch refused for a part of the pool's node class (`carpool.launch.failures`): the pool is not
    tried again in this call (Karpenter skips a NodePool whose EC2NodeClass is not ready)."""

    nodepool: str
    nodeclass: str
    cause: Cause
    #: what was refused, naming the field (`spec.role: IAM role 'x' does not exist`)
    message: str
    #: read from the EC2NodeClass's status (`Ready=False` at its generation), not met by this call: not
    #: recorded again as a refusal (`carpool.app.not_ready`), so the record lapses and the class is retried
    from_status: bool = False

    @property
    def reason(self) -> str:
        """The pool's reason on the pods it could not launch for (`FailedScheduling`, `carpool status`)."""
        return f"EC2NodeClass {self.nodeclass!r} is not ready ({self.cause}): {self.message}"


@dataclass
class ProvisionOutcome:
    launched: list[Claim] = field(default_factory=list)
    nominated_in_flight: dict[str, list[str]] = field(default_factory=dict)
    already_nominated: list[str] = field(default_factory=list)
    unschedulable: dict[str, dict[str, str]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    #: pod key -> (claim, the offerings EC2 had no capacity for) of a launch that fell back for it
    capacity_errors: dict[str, tuple[str, list[tuple[str, str, str]]]] = field(default_factory=dict)
    launch_failures: list[str] = field(default_factory=list)
    ignored: dict[str, str] = field(default_factory=dict)
    #: pod key -> why its event was dropped after confirming it against the cluster
    dropped: dict[str, str] = field(default_factory=dict)
    #: pod key -> why it must be retried (its claim failed, or was not started before the deadline)
    failed: dict[str, str] = field(default_factory=dict)
    decisions: list[str] = field(default_factory=list)
    rounds: int = 0
    #: claim name -> when the CreateFleet that launched it answered (read once its round's launches are done)
    launched_at: dict[str, datetime] = field(default_factory=dict)
    #: pool -> why its node class is not ready in this call (the first cause met: no subnet or AMI selected,
    #: or a launch refused); the pool is not tried again and its reason on the pods says so
    not_ready: dict[str, NotReady] = field(default_factory=dict)

    @property
    def hourly_cost(self) -> float:
        return sum(c.price or 0.0 for c in self.launched)

    def served(self) -> dict[str, str | None]:
        """The pods a node is coming for, with its claim: launched for, or nominated to one already coming
        (None: nominated by an earlier batch, its claim not read here)."""
        out: dict[str, str | None] = dict.fromkeys(self.already_nominated)
        out.update({p: claim for claim, pods in self.nominated_in_flight.items() for p in pods})
        out.update({p: c.name for c in self.launched for p in c.pods})
        return out

    def fail(self, keys: Iterable[str], reason: str) -> None:
        """The pods to retry, each with the first reason it failed for."""
        for key in keys:
            self.failed.setdefault(key, reason)

    def forget_overcome_refusals(self) -> None:
        """A pod refused (or left unschedulable) in one round and placed in a later one (or found nominated)
        was not refused."""
        placed = {p for c in self.launched for p in c.pods}
        placed.update(self.already_nominated)
        placed.update(p for keys in self.nominated_in_flight.values() for p in keys)
        for key in placed:
            self.refused.pop(key, None)
            self.unschedulable.pop(key, None)
