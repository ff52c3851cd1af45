"""Which deleted NodeClaims and Nodes carpool must carry through termination, and which may go (pure).

Karpenter v1.14.1 keeps its termination finalizer (`karpenter.sh/termination`) on every NodeClaim and on
each NodeClaim's Node (`pkg/controllers/nodeclaim/lifecycle/registration.go` `syncNode`), so a DELETE of
either only marks it (`deletionTimestamp`) until Karpenter lets it go:
- a deleted NodeClaim deletes its Node, waits for the Node to go, makes sure the instance is gone, then
  drops its finalizer (`pkg/controllers/nodeclaim/lifecycle/controller.go` `finalize`);
- a deleted Node deletes its NodeClaim, is tainted `karpenter.sh/disrupted:NoSchedule` and drained (the
  Eviction API, so PodDisruptionBudgets hold; `karpenter.sh/do-not-disrupt` pods wait) until the
  NodeClaim's `terminationGracePeriod` after its deletion, when what is left is deleted; then the instance
  is terminated and, once EC2 no longer lists it as running (`terminated`), the finalizer goes
  (`pkg/controllers/node/termination/controller.go`, `terminator/terminator.go`). A Node that is not
  Ready and whose instance is already gone goes at once, undrained;
- a deleted NodePool: the Kubernetes garbage collector deletes the NodeClaims whose ownerReferences name
  it, and the above follows. Nothing is launched in their place: their pods go pending and are
  provisioned like any pending pod.

The same decisions, from one read of the nodes, the NodeClaims and carpool's live claims:
- `Termination`: a live claim whose Node or NodeClaim is being deleted, and whose disruption in progress
  does not say so yet: it becomes a disruption of reason `Deleted` (carried out by the executor's drain,
  without a replacement), and the other object of the pair is deleted too (as each controller deletes
  the other). A claim whose node never joined has nothing to drain: its instance goes at once;
- `LetGo`: a Node being deleted with the finalizer that no live claim holds any more: its claim ended by
  any path (consolidation, drift, expiry, interruption, the orphan sweep, the instance ended outside
  carpool and the cloud node lifecycle controller deleted the Node). Its finalizer goes once EC2 says the
  instance is gone; the instance of a node carpool launched is terminated first;
- `NodeClaimGone`: a NodeClaim being deleted with the finalizer, no live claim and no Node left: its
  finalizer goes once its instance is not running (one still running is the orphan sweep's to adopt or
  terminate, `carpool.disruption.orphans`);
- `Finalize`: a Node registered for a live claim that lacks the finalizer (registered by a carpool
  before this one): it gets it, so a delete of it waits for the drain.

The claim-level progress a `Termination` starts lives where every disruption's does (`Claim.disruption`),
so each run of the stateless disruption function carries it on. `carpool.app.termination` acts on these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from carpool import labels, lifecycle
from carpool.api.durations import parse_duration
from carpool.api.k8s import Node
from carpool.disruption.decision import Reason
from carpool.karpenter_objects import TERMINATION_FINALIZER
from carpool.state.models import Claim

#: progress a user's delete does not take over: the node goes anyway, by a drain of its own (a spot
#: warning's evacuation, node repair's forceful drain), or it is already a termination
_KEPT = frozenset({Reason.DELETED.value, Reason.INTERRUPTED.value, Reason.UNHEALTHY.value})


@dataclass(frozen=True)
class Termination:
    """Terminate `claim`'s node because it or its NodeClaim was deleted."""

    claim: Claim
    #: the claim's Node (None: it never joined, nothing to drain)
    node: str | None
    #: the earliest deletionTimestamp of the pair: the NodeClaim's terminationGracePeriod counts from it
    deleted_at: datetime
    #: the NodeClaim's own `spec.terminationGracePeriod` in seconds, when it has one (None: the NodePool's)
    grace_seconds: int | None
    #: the Node still to delete (it holds the finalizer, so it stays until drained)
    delete_node: bool
    #: the NodeClaim still to delete
    delete_nodeclaim: str | None
    #: the NodeClaim of the pair, if any (its termination timestamp annotation is written on it)
    nodeclaim: str | None
    why: str

    @property
    def takes_over(self) -> bool:
        """Whether the claim's disruption in progress becomes this termination (not when its node goes
        anyway by a drain of its own, or already by this one: then only the pair's deletes are left)."""
        return self.claim.disruption is None or self.claim.disruption.reason not in _KEPT


@dataclass(frozen=True)
class LetGo:
    """A Node being deleted whose claim is gone: its finalizer goes once its instance is."""

    node: str
    instance_id: str | None
    #: carpool launched it for this cluster: its instance may be terminated
    ours: bool


@dataclass(frozen=True)
class NodeClaimGone:
    """A NodeClaim being deleted with nothing left behind it: its finalizer goes once its instance is."""

    name: str
    instance_id: str | None


@dataclass
class Decisions:
    terminations: list[Termination] = field(default_factory=list)
    let_go: list[LetGo] = field(default_factory=list)
    nodeclaims_gone: list[NodeClaimGone] = field(default_factory=list)
    #: Nodes that lack the finalizer (by name)
    finalize: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.terminations or self.let_go or self.nodeclaims_gone or self.finalize)


def decide(nodes: Iterable[Node], claims: Iterable[Claim], nodeclaims: Iterable[Mapping[str, Any]],
           cluster: str) -> Decisions:
    """The decisions (module docstring) for one read of the cluster's Nodes and NodeClaims and the live
    claims."""
    nodes, claims, nodeclaims = list(nodes), list(claims), list(nodeclaims)
    node_of = {id(c): _node_of(c, nodes) for c in claims}
    nodeclaim_of = {id(c): _nodeclaim_of(c, nodeclaims) for c in claims}
    out = Decisions()
    for claim in claims:
        termination = _termination(claim, node_of[id(claim)], nodeclaim_of[id(claim)])
        if termination is not None:
            out.terminations.append(termination)
    held_nodes = {n.name for n in node_of.values() if n is not None}
    held_nodeclaims = {str(o["metadata"]["name"]) for o in nodeclaim_of.values() if o is not None}
    for node in nodes:
        if node.name in held_nodes:
            if _lacks_finalizer(node, cluster):
                out.finalize.append(node.name)
        elif node.metadata.deletion_timestamp is not None and TERMINATION_FINALIZER in node.metadata.finalizers:
            out.let_go.append(LetGo(node.name, node.instance_id(), node.labels.get(labels.OWNED_BY) == cluster))
    instances = {n.instance_id() for n in nodes if n.instance_id()}
    names = {n.name for n in nodes}
    for obj in nodeclaims:
        name = str(obj["metadata"]["name"])
        if name in held_nodeclaims or not _being_deleted(obj) or TERMINATION_FINALIZER not in _finalizers(obj):
            continue
        instance = instance_in(_status(obj).get("providerID"))
        if (instance is not None and instance in instances) or _status(obj).get("nodeName") in names:
            continue  # its Node is still there: the NodeClaim goes after it (Karpenter waits for its nodes)
        out.nodeclaims_gone.append(NodeClaimGone(name, instance))
    return out


def _termination(claim: Claim, node: Node | None, nodeclaim: Mapping[str, Any] | None) -> Termination | None:
    node_deleted = node.metadata.deletion_timestamp if node is not None else None
    nodeclaim_deleted = deletion_timestamp(nodeclaim) if nodeclaim is not None else None
    stamps = [t for t in (node_deleted, nodeclaim_deleted) if t is not None]
    if not stamps:
        return None
    delete_node = (node is not None and node_deleted is None and TERMINATION_FINALIZER in node.metadata.finalizers)
    delete_nodeclaim = str(nodeclaim["metadata"]["name"]) if nodeclaim is not None and nodeclaim_deleted is None else None
    reason = claim.disruption.reason if claim.disruption is not None else ""
    if reason in _KEPT and not delete_node and not delete_nodeclaim:
        return None
    what = (f"NodeClaim {nodeclaim['metadata']['name']}" if nodeclaim_deleted is not None and nodeclaim is not None
            else f"Node {node.name}" if node is not None else f"claim {claim.name}")
    return Termination(
        claim=claim, node=node.name if node is not None else None, deleted_at=min(stamps),
        grace_seconds=grace_seconds(nodeclaim) if nodeclaim is not None else None,
        delete_node=delete_node, delete_nodeclaim=delete_nodeclaim,
        nodeclaim=str(nodeclaim["metadata"]["name"]) if nodeclaim is not None else None,
        why=f"{what} was deleted",
    )


def deadline(deleted_at: datetime, grace_seconds: int | None) -> datetime | None:
    """When a deleted node's remaining pods are deleted whatever blocks them: its deletion plus the
    terminationGracePeriod (Karpenter's `ensureTerminationGracePeriodTerminationTimeAnnotation`, which
    counts from the NodeClaim's deletionTimestamp); None without one."""
    return deleted_at + timedelta(seconds=grace_seconds) if grace_seconds is not None else None


def _node_of(claim: Claim, nodes: Sequence[Node]) -> Node | None:
    """The claim's Node: by its instance when both know it (a reused private-IP name is another node),
    else by the name the claim registered."""
    if claim.instance_id:
        found = next((n for n in nodes if n.instance_id() == claim.instance_id), None)
        if found is not None:
            return found
    return next((n for n in nodes if claim.node_name and n.name == claim.node_name and n.instance_id() in (None, claim.instance_id)), None)


def _nodeclaim_of(claim: Claim, nodeclaims: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The claim's NodeClaim: the one of its name, else the one whose providerID names its instance."""
    named = next((o for o in nodeclaims if o["metadata"]["name"] == claim.name), None)
    if named is not None:
        return named
    if not claim.instance_id:
        return None
    return next((o for o in nodeclaims if instance_in(_status(o).get("providerID")) == claim.instance_id), None)


def _lacks_finalizer(node: Node, cluster: str) -> bool:
    return (node.metadata.deletion_timestamp is None and TERMINATION_FINALIZER not in node.metadata.finalizers
            and node.labels.get(labels.OWNED_BY) == cluster and lifecycle.is_registered(node))


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("status") or {}


def _finalizers(obj: Mapping[str, Any]) -> list[str]:
    return list((obj.get("metadata") or {}).get("finalizers") or [])


def _being_deleted(obj: Mapping[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def deletion_timestamp(obj: Mapping[str, Any]) -> datetime | None:
    """An object's `metadata.deletionTimestamp` (RFC 3339, as the API server writes it), None when unset."""
    raw = (obj.get("metadata") or {}).get("deletionTimestamp")
    if not raw:
        return None
    return raw if isinstance(raw, datetime) else datetime.fromisoformat(str(raw).replace("Z", "+00:00"))


def grace_seconds(nodeclaim: Mapping[str, Any]) -> int | None:
    """The NodeClaim's `spec.terminationGracePeriod` in seconds (copied from its NodePool at creation, so
    it holds after the NodePool is gone); None when unset."""
    raw = (nodeclaim.get("spec") or {}).get("terminationGracePeriod")
    return parse_duration(str(raw)) if raw else None


def instance_in(provider_id: object) -> str | None:
    """The instance id a providerID names (`aws:///us-east-1a/i-0abc`), None when it names none."""
    if not isinstance(provider_id, str) or not provider_id.startswith("aws://"):
        return None
    last = provider_id.rstrip("/").rsplit("/", 1)[-1]
    return last if last.startswith("i-") else None
