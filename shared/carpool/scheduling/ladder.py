"""One resource of a pool's instance types as a ladder: the distinct amounts, ascending, and for each the
mask of types with at least that much.

Why: "types that can hold `total`" is then one bisect and one AND per requested resource, and "the
largest amount any of these types offers" a binary search over masks instead of a loop over types.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence


class ResourceLadder:
    """Ascending distinct values of one resource and the `>= value` masks (last entry: the empty mask)."""

    __slots__ = ("values", "ge", "_maximum")

    def __init__(self, per_type: Sequence[int]) -> None:
        self.values: list[int] = sorted(set(per_type))
        # one pass from the largest value down, accumulating the types at or above each value
        at_value: dict[int, int] = {}
        for i, x in enumerate(per_type):
            at_value[x] = at_value.get(x, 0) | (1 << i)
        ge: list[int] = []
        acc = 0
        for v in reversed(self.values):
            acc |= at_value[v]
            ge.append(acc)
        ge.reverse()
        ge.append(0)
        self.ge: list[int] = ge
        #: mask -> maximum: a claim's options repeat across the pods and claims of a batch
        self._maximum: dict[int, int] = {}

    def at_least(self, amount: int) -> int:
        """Types with at least `amount`."""
        return self.ge[bisect_left(self.values, amount)]

    def at_most(self, amount: int, everything: int) -> int:
        """Types with at most `amount` (`everything`: the mask of all types)."""
        return everything & ~self.ge[bisect_right(self.values, amount)]

    def maximum(self, mask: int) -> int:
        """The largest value among types in `mask` (0 when mask is empty)."""
        got = self._maximum.get(mask)
        if got is not None:
            return got
        ge = self.ge
        if not mask or not (ge[0] & mask):
            got = 0
        else:
            lo, hi = 0, len(self.values) - 1
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if ge[mid] & mask:
                    lo = mid
                else:
                    hi = mid - 1
            got = self.values[lo]
        self._maximum[mask] = got
        return got


def ladders(per_type: Sequence[Mapping[str, int]]) -> dict[str, ResourceLadder]:
    """A ladder per resource any type names (a type without it counts as 0)."""
    names = {k for resources in per_type for k in resources}
    return {name: ResourceLadder([resources.get(name, 0) for resources in per_type]) for name in names}
