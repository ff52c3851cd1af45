"""What a disruption rule decides, in a shape the executor can carry out and a person can read."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from carpool.scheduling.result import PlannedClaim


class Reason(StrEnum):
    """Why a node goes. The first three are Karpenter's budget reasons; `Expired` is budgeted only by
    budgets without `reasons` (Karpenter v1 does not budget expiry at all); `Unhealthy` (node repair) is
    forceful and not budgeted, like Karpenter's repair."""

    EMPTY = "Empty"
    UNDERUTILIZED = "Underutilized"
    DRIFTED = "Drifted"
    EXPIRED = "Expired"
    UNHEALTHY = "Unhealthy"
    #: a spot warning or scheduled change: drained by `carpool.app.interrupt`, not budgeted
    INTERRUPTED = "Interrupted"
    #: its NodeClaim or Node was deleted (`kubectl delete`, its NodePool deleted): Karpenter's termination,
    #: not a disruption method, so not budgeted and never replaced (`carpool.app.termination`)
    DELETED = "Deleted"


class Kind(StrEnum):
    DELETE = "delete"
    REPLACE = "replace"


@dataclass(frozen=True, slots=True)
class Replacement:
    """The new capacity a decision needs before its nodes drain: the pods that need it (what the executor
    hands to `provision_pods`) and the claims the simulation planned for them (cheapest option first)."""

    pods: tuple[str, ...]
    claims: tuple[PlannedClaim, ...]

    @property
    def price(self) -> float:
        return sum(c.price for c in self.claims)

    def describe(self) -> str:
        parts = [f"{c.instance_types[0].name} ({c.instance_types[0].capacity_type}, ${c.price:.4f}/h)"
                 for c in self.claims if c.instance_types]
        return " + ".join(parts) or "nothing"


@dataclass(frozen=True, slots=True)
class Decision:
    """Disrupt `nodes` (their claims in `claims`, same order) for `reason`.

    `savings` is the hourly price of the nodes minus the replacement's (what consolidation optimises;
    informative for the other reasons). `message` is the sentence logged and put in the run summary.
    """

    kind: Kind
    reason: Reason
    nodes: tuple[str, ...]
    claims: tuple[str, ...]
    pools: tuple[str, ...]
    replacement: Replacement | None = None
    savings: float = 0.0
    message: str = ""

    @property
    def forceful(self) -> bool:
        """Forceful disruptions drain without honouring do-not-disrupt (the node is broken anyway)."""
        return self.reason == Reason.UNHEALTHY

    @property
    def replacement_pods(self) -> tuple[str, ...]:
        return self.replacement.pods if self.replacement else ()
