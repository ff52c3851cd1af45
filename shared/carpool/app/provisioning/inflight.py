"""The room of launched claims whose nodes are not registered yet: the scheduler fills it before it opens
a claim, as Karpenter schedules onto its in-flight NodeClaims."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from carpool import labels
from carpool.api.k8s import Pod
from carpool.app.provisioning.placed import InFlight, Placed
from carpool.app.wiring import Dependencies
from carpool.resources import Resources, add
from carpool.scheduling import inputs as si
from carpool.state.models import IN_FLIGHT_STATUSES, Claim


def in_flight(deps: Dependencies, exclude: frozenset[str] | set[str], pending: dict[str, Pod],
              placed: Placed | None = None) -> tuple[list[si.InFlightClaim], tuple[si.ExistingNode, ...]]:
    """Launched claims not marked registered yet: their remaining room takes pods first. With `placed`,
    also where the pods the batch's topology constraints count are (`carpool.app.provisioning.placed`):
    those going to a claim count on it, the others on their nodes (bins with no room, returned second).

    Room held for pods that no longer exist (evicted by a drain, deleted by a scale-down) is given back,
    so the pods that replace them land on the node already coming for them instead of a second one.
    The claim keeps only aggregate requests, so the give-back is proportional to the pods gone.

    Once the claim's Node is Ready (`_ready_nodes`), the kube-scheduler may already bind to it, and it does not
    know carpool's plan: it can put there pods planned for another node and leave this claim's own pods
    for elsewhere. What the node holds is then what is bound to it (`_room_on_node`), as in Karpenter,
    whose in-flight NodeClaim becomes a node whose room is its allocatable less its bound pods."""
    # a claim being terminated (its NodeClaim or Node deleted while it joins) takes no pod: Karpenter leaves
    # a NodeClaim marked for deletion out of scheduling
    claims = [c for c in deps.ledger.active()
              if c.status in IN_FLIGHT_STATUSES and c.name not in exclude and c.allocatable and c.instance_type
              and c.disruption is None]
    if not claims:
        return [], (placed or Placed()).bins(pending, []).existing
    live = deps.cluster.pod_keys()
    ready = _ready_nodes(claims, deps)
    counted = (placed or Placed()).bins(pending, [InFlight(c.name, c.pods, ready.get(c.name)) for c in claims])
    out = []
    for c in claims:
        node = ready.get(c.name)
        if node is not None:
            remaining = _room_on_node(c, deps.cluster.pods_on_node(node), live)
        else:
            remaining = _less(c.allocatable, c.requested, _share(c.pods, live))
        node_labels = {**c.labels, labels.NODEPOOL: c.nodepool, labels.INSTANCE_TYPE: c.instance_type or "",
                       labels.ZONE: c.zone or "", labels.CAPACITY_TYPE: c.capacity_type or ""}
        out.append(si.InFlightClaim(c.name, c.nodepool, node_labels, remaining, pods=counted.held.get(c.name, ())))
    return out, counted.existing


def _ready_nodes(claims: Sequence[Claim], deps: Dependencies) -> dict[str, str]:
    """Claim name -> its node's name, for the claims whose node joined and is Ready (the kube-scheduler
    binds to it) before the registrar marked the claim. Read from the joining nodes only (registered for
    a claim, not initialized): a few nodes at a time, whatever the cluster's size."""
    by_instance = {c.instance_id: c.name for c in claims if c.instance_id}
    out = {}
    for node in deps.cluster.joining_nodes():
        claim = by_instance.get(node.instance_id() or "")
        if claim is not None and node.is_ready():
            out[claim] = node.name
    return out


def _room_on_node(claim: Claim, bound: Sequence[Pod], live: set[str]) -> Resources:
    """A claim's room once its node exists: its allocatable less every pod bound to the node, less the
    claim's share for its own pods that exist and are not bound there (still pending, they will come;
    bound elsewhere, they are counted anyway: telling the two apart would read every pending pod, and
    counting them only ever launches a node too many, which consolidation takes back, where counting
    too little leaves a pod waiting for a node that has no room for it)."""
    on_node = {p.key for p in bound}
    used = add(*(p.requests() for p in bound if p.status.phase not in ("Succeeded", "Failed")))
    elsewhere = [k for k in claim.pods if k not in on_node]
    share = _share(elsewhere, live) * len(elsewhere) / len(claim.pods) if claim.pods else 0.0
    return _less(_less(claim.allocatable, claim.requested, share), used, 1.0)


def _share(keys: Sequence[str], live: set[str]) -> float:
    return sum(1 for k in keys if k in live) / len(keys) if keys else 0.0


def _less(amounts: Mapping[str, int], used: Mapping[str, int], share: float) -> Resources:
    return {k: v - int(used.get(k, 0) * share) for k, v in amounts.items()}
