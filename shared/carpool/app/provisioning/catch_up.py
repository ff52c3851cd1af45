"""Pods a NodePool's limit held back, given another round once this invocation's launches gave some of
the pool's charge back.

Until it launches, a claim is charged its largest option (Karpenter's scheduler does the same:
`subtractMax`), so a batch near a limit leaves pods pending that the instances EC2 really launched leave
room for: once launched, a claim holds only its instance type's capacity (`carpool.state.charges`).
Karpenter's next batch comes a second later; here the next batch would be the watcher's next minute, so
the same invocation schedules those pods again as soon as a launch lowered their pool's charge. Each
round of it follows a launch that gave charge back, so it ends.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass
class LimitCatchUp:
    """The pods each pool's limit held back in this invocation, and the pools whose charge fell since
    their pods were held."""

    #: pool -> pods left pending because that pool's limit excluded every instance type
    held: dict[str, set[str]] = field(default_factory=dict)
    #: pools whose charge a launch lowered since the last `again`
    lowered: set[str] = field(default_factory=set)

    def hold(self, pool: str, pods: Iterable[str]) -> None:
        self.held.setdefault(pool, set()).update(pods)

    def gave_back(self, pool: str) -> None:
        self.lowered.add(pool)

    def again(self) -> list[str]:
        """The held pods of the pools whose charge fell (each pod once), forgotten until held again."""
        out: set[str] = set()
        for pool in sorted(self.lowered):
            out |= self.held.pop(pool, set())
        self.lowered.clear()
        for pods in self.held.values():
            pods -= out
        return sorted(out)
