"""What to send so a status becomes the one built: a JSON merge patch (RFC 7386), or nothing at all.

Why a diff and not the whole status every run: the writer runs every minute for every NodePool and
EC2NodeClass; a write when nothing moved would bump each object's resourceVersion once a minute, wake
every watch on them (carpool's own watcher, kubectl, GitOps controllers) and cost the API server a write
per object per minute. Karpenter patches only when `equality.Semantic.DeepEqual(stored, updated)` is
false; so does carpool. A key the new status drops is sent as null (merge patch's delete), a list is
sent whole (merge patch replaces lists, hence the resourceVersion precondition Karpenter's
`MergeFromWithOptimisticLock` adds, and carpool's writer too).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["merge_patch"]


def merge_patch(current: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch that turns `current` into `desired`; None when they are equal."""
    patch: dict[str, Any] = {}
    for key in current.keys() - desired.keys():
        patch[key] = None
    for key, value in desired.items():
        before = current.get(key)
        if key in current and before == value:
            continue
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            nested = merge_patch(before, value)
            if nested is not None:
                patch[key] = nested
        else:
            patch[key] = value
    return patch or None
