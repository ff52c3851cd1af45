"""Bit masks over an ordered list: bit i stands for item i (a pool's instance types, a batch's bins).

Why masks: "which of these items still qualify" shrinks as pods are placed, and as a Python int it is
narrowed by a handful of ANDs instead of a loop over hundreds of items; "the first qualifying item" is
the lowest set bit.
"""

from __future__ import annotations

from collections.abc import Iterator


def lowest_bit(mask: int) -> int:
    """Index of the lowest set bit (mask must be non-zero)."""
    return (mask & -mask).bit_length() - 1


def bits(mask: int) -> Iterator[int]:
    """Indices of the set bits, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low
