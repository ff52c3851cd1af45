"""Taints and tolerations, with the Kubernetes matching rules."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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


def tolerates_all(taints: Iterable[Taint], tolerations: Sequence[Toleration]) -> bool:
    return untolerated(taints, tolerations) is None
