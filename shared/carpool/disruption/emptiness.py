"""Emptiness: a node with no pods but DaemonSet ones for `consolidateAfter` is deleted.

It runs for both consolidation policies (`WhenEmpty` and `WhenEmptyOrUnderutilized`) and never when
`consolidateAfter: Never`. "For consolidateAfter" is measured from the last change of the node's pods
(Karpenter's last pod event), so a node that was just emptied, or just filled, waits the full period.
Deleting an empty node needs no simulation and no replacement: it is the cheapest disruption there is.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from carpool.api.nodepool import NodePool
from carpool.disruption.candidates import Candidate
from carpool.disruption.decision import Decision, Kind, Reason


def quiet_enough(c: Candidate, pool: NodePool, now: datetime) -> str | None:
    """None when consolidateAfter has passed since the node's pods last changed, else why not."""
    after = pool.consolidate_after_seconds()
    if after is None:
        return f"NodePool {pool.name} has consolidateAfter: Never"
    waited = now - c.quiet_since
    if waited < timedelta(seconds=after):
        return f"pods changed {int(waited.total_seconds())}s ago; consolidateAfter is {after}s"
    return None


def why_not_empty(c: Candidate, pool: NodePool, now: datetime) -> str | None:
    """None when the emptiness rule applies to `c`, else the reason it does not."""
    if not c.empty:
        return f"{len(c.pods)} pods"
    if c.protected:
        return c.protected
    return quiet_enough(c, pool, now)


def decide(c: Candidate) -> Decision:
    price = c.price or 0.0
    return Decision(
        Kind.DELETE, Reason.EMPTY, (c.node,), (c.claim,), (c.pool,), savings=price,
        message=f"node {c.node} ({c.instance_type}) has been empty: delete it (saves ${price:.4f}/h)",
    )
