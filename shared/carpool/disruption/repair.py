"""Node repair: a node that is not Ready for `after` (default 30 minutes) is terminated, forcefully.

Why forceful: a NotReady node runs nothing useful, and waiting on do-not-disrupt or PDBs for pods that are
not running anyway only keeps them from being rescheduled. Why a cap: when many nodes of a pool turn
NotReady at once the cause is usually not the nodes (a CNI or control-plane problem), and replacing them all
makes it worse; like Karpenter, repair stops when more than `max_unhealthy` (20%) of a pool is unhealthy.
Nodes that never registered at all are handled by the registration timeout in `carpool.app.cleanup`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta

from carpool.disruption.candidates import Candidate
from carpool.disruption.decision import Decision, Kind, Reason

DEFAULT_AFTER = timedelta(minutes=30)
MAX_UNHEALTHY = 0.2


def unhealthy(c: Candidate, now: datetime, after: timedelta = DEFAULT_AFTER) -> str | None:
    """Why the node needs repair, or None."""
    if c.ready or c.not_ready_since is None:
        return None
    down = now - c.not_ready_since
    if down < after:
        return None
    return f"node {c.node} has not been Ready for {int(down.total_seconds() // 60)} minutes"


def repairable(pool_nodes: Sequence[Candidate], unhealthy_nodes: Sequence[Candidate],
               max_unhealthy: float = MAX_UNHEALTHY) -> str | None:
    """None when a pool may be repaired, else why not (too many unhealthy nodes at once)."""
    allowed = math.ceil(len(pool_nodes) * max_unhealthy)  # rounded up, as Karpenter: a small pool can repair
    if len(unhealthy_nodes) > allowed:
        return (f"{len(unhealthy_nodes)} of {len(pool_nodes)} nodes are unhealthy (more than "
                f"{int(max_unhealthy * 100)}%): not repairing, the cause is probably not the nodes")
    return None


def decide(c: Candidate, why: str) -> Decision:
    return Decision(Kind.DELETE, Reason.UNHEALTHY, (c.node,), (c.claim,), (c.pool,),
                    message=f"{why}: terminate it (its pods are provisioned again)")
