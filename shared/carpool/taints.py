"""Taints and tolerations, with the Kubernetes matching rules."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from carpool import labels

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    effect: str
    value: str = ""

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


#: Karpenter's KnownEphemeralTaints (`pkg/scheduling/taints.go`), matched like Kubernetes'
#: `Taint.MatchTaint` (key and effect): taints a node sheds by itself while it comes up. Here, beside the
#: taint model, because both the scheduler (`carpool.scheduling.convert`) and the node lifecycle
#: (`carpool.lifecycle`) read them.
KNOWN_EPHEMERAL_TAINTS = (
    Taint(labels.NOT_READY_TAINT, NO_SCHEDULE),
    Taint(labels.NOT_READY_TAINT, NO_EXECUTE),
    Taint(labels.UNREACHABLE_TAINT, NO_SCHEDULE),
    Taint(labels.CLOUD_PROVIDER_UNINITIALIZED_TAINT, NO_SCHEDULE, "true"),
    Taint(labels.UNREGISTERED_TAINT, NO_EXECUTE),
)


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # empty = all effects

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            # an empty key with Exists tolerates everything
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


def untolerated(taints: Iterable[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first hard taint (NoSchedule/NoExecute) no toleration covers, or None.

    PreferNoSchedule is soft and never blocks scheduling.
    """
    for taint in taints:
        if taint.effect == PREFER_NO_SCHEDULE:
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


