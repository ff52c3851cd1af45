"""What a claim holds against its NodePool's limits, at each step of its life (Karpenter's NodePool usage:
the sum of its NodeClaims' `status.capacity`).

- Reserved (before CreateFleet): its largest remaining option, as the scheduler charged it, so two
  provisioners cannot together pass a limit while neither knows which type EC2 will pick.
- Launched: the capacity of the instance type EC2 launched (`charged`), written in the same conditional
  write that records the launch, so a pool whose claims launched small types has room again at once.
- Registered: the node's own `status.capacity`, a resource the node reports as zero or not yet (a GPU
  before its device plugin runs) kept at the type's figure (`registered`, as Karpenter's state node
  fills a zero capacity from its NodeClaim until the node is initialized).

Every figure counts one node (`nodes`) and every resource the capacity names, limited or not, so a limit
added later counts what already runs. Pure: the ledgers write what these return.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from carpool.resources import CPU, MEMORY, Resources

#: the resource every claim holds one of (Karpenter's `nodes` limit)
NODES = "nodes"
#: resources every claim holds, as 0 when its capacity lacks them (Karpenter's limits: cpu, memory, nodes)
ALWAYS_CHARGED = (CPU, MEMORY)


def charged(capacity: Mapping[str, int], limited: Iterable[str] = ()) -> Resources:
    """What a node of `capacity` holds against its pool: every resource of it, one node, and 0 of each
    resource in `limited` it lacks (so it still takes part in a limit's condition)."""
    out = {name: 0 for name in (*ALWAYS_CHARGED, *limited)}
    out.update(capacity)
    out[NODES] = 1
    return out


def registered(node_capacity: Mapping[str, int], launched: Mapping[str, int]) -> Resources:
    """A registered node's charge: its reported capacity, where it reports a resource as zero or not at
    all the `launched` charge's figure (extended resources appear when their device plugin starts)."""
    out = dict(launched)
    out.update({k: v for k, v in node_capacity.items() if v})
    out[NODES] = 1
    return out


def difference(new: Mapping[str, int], old: Mapping[str, int]) -> Resources:
    """What changes in a pool's usage when a claim's charge goes from `old` to `new` (only the resources
    that change; a resource `new` lacks is given back)."""
    out = {k: new.get(k, 0) - old.get(k, 0) for k in {*new, *old}}
    return {k: v for k, v in out.items() if v}


def lowered(new: Mapping[str, int], old: Mapping[str, int]) -> bool:
    """Whether going from `old` to `new` gives any resource back to the pool."""
    return any(v < 0 for v in difference(new, old).values())
