"""Expiry: a node older than its NodePool's `expireAfter` (default 720h; "Never" disables) is replaced.

Age counts from the launch, as Karpenter counts from the NodeClaim's creation. Unlike Karpenter v1, whose
expiry is forceful (it ignores budgets and do-not-disrupt), carpool replaces expired nodes like drifted
ones: replacement first, budgets without `reasons` apply, protected pods and PDBs are honoured unless the
NodePool sets `terminationGracePeriod` (then, as Karpenter's eventual disruption, they only delay the drain
until that deadline: `disruption.deadline`). A node kept alive by a do-not-disrupt pod is reported on every
run, so it is visible rather than silently old.

A node adopted from a Karpenter NodeClaim (`carpool.adoption`) expires as Karpenter would expire it: after
the NodeClaim's own `spec.expireAfter` (copied from its NodePool when Karpenter created it, so a later edit
of the pool does not move it), counted from the NodeClaim's creation (`Candidate.launched_at` is that
time; Karpenter v1.14.1 `pkg/controllers/nodeclaim/expiration/controller.go`).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from carpool.api.durations import format_duration, parse_duration
from carpool.api.nodepool import NodePool
from carpool.disruption.candidates import Candidate


def expired(c: Candidate, pool: NodePool, now: datetime) -> str | None:
    """Why the node has expired, or None."""
    limit = expire_after_seconds(c, pool)
    if limit is None:
        return None
    age = now - c.launched_at
    if age < timedelta(seconds=limit):
        return None
    return f"node {c.node} is {format_duration(int(age.total_seconds()))} old; expireAfter is {format_duration(limit)}"


def lifetime_remaining(c: Candidate, pool: NodePool, now: datetime) -> float:
    """Fraction (0..1) of its lifetime a node has left; 1 when it never expires. Nodes close to expiry
    are cheaper to disrupt now (Karpenter's disruption-cost weighting)."""
    limit = expire_after_seconds(c, pool)
    if not limit:
        return 1.0
    left = limit - (now - c.launched_at).total_seconds()
    return max(0.0, min(1.0, left / limit))


def expire_after_seconds(c: Candidate, pool: NodePool) -> int | None:
    """The node's lifetime (None: it never expires): its adopted NodeClaim's `spec.expireAfter` when it has
    one, else its NodePool's."""
    if c.adopted is not None and c.adopted.expire_after:
        return parse_duration(c.adopted.expire_after)
    return pool.expire_after_seconds()
