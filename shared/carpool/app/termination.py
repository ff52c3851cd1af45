"""Deletes do what Karpenter does: `kubectl delete nodeclaim X`, `kubectl delete node X` and a deleted
NodePool cordon, drain, terminate the instance, then let the objects go (Karpenter v1.14.1's
`pkg/controllers/node/termination/` and `pkg/controllers/nodeclaim/lifecycle/controller.go` `finalize`).

`carpool.disruption.deletion` decides from one read; this module carries its decisions out, at the start
of every disruption run (`carpool.app.disruption_executor.run`), each its own failure unit:
- a termination becomes the claim's disruption in progress, of reason `Deleted` (the termination
  deadline stamped: the deletion plus the NodeClaim's `terminationGracePeriod`, Karpenter's
  `karpenter.sh/nodeclaim-termination-timestamp`, written on the NodeClaim too); the other object of the
  pair is deleted; the node is cordoned and tainted. The executor's drain then carries it on as any
  disruption without a replacement: evictions through the Eviction API (PodDisruptionBudgets hold,
  do-not-disrupt pods wait) until the deadline, when what is left is deleted; once empty the instance is
  terminated, the claim released, and the finalizers go (`let_go`). Nothing is launched for it, as
  Karpenter launches nothing: the evicted pods go pending and are provisioned like any other;
- a node not Ready whose instance EC2 no longer runs is not drained (its kubelet is gone; Karpenter
  removes the finalizer at once): the claim is released and the Node let go;
- a Node or NodeClaim left behind by any other end of a claim has its finalizer removed once EC2 says the
  instance is gone (`terminated`, or unknown); Karpenter waits the same way (`awaitInstanceTermination`:
  `shutting-down` still counts as running).

Why here and not on the watcher's watch (Karpenter reacts to the deletion at once): the drain is the
disruption function's, in steps a minute apart, and so is every other termination; a second function
reacting to the watch would race the scheduled run over the same claim for a gain of under a minute on a
flow that takes minutes (see docs/design.md section 3.13).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from datetime import datetime
from functools import partial
from typing import Any

from carpool import k8s_events
from carpool.api.k8s import Node
from carpool.app import drain, instances, recorder
from carpool.app.disruption_summary import DisruptSummary
from carpool.app.isolation import isolated
from carpool.app.nodeclaims import release_nodeclaim
from carpool.app.wiring import Dependencies
from carpool.disruption import deletion
from carpool.disruption.decision import Kind, Reason
from carpool.karpenter_objects import NODECLAIM, TERMINATION_FINALIZER, KindNotServed, ObjectGone
from carpool.ports import NodeGone, NodePatch
from carpool.state import saving
from carpool.state.models import Claim, DisruptionProgress

log = logging.getLogger(__name__)

#: Karpenter's annotation on a deleted NodeClaim: when its node's remaining pods are deleted regardless
TERMINATION_TIMESTAMP = "karpenter.sh/nodeclaim-termination-timestamp"
#: EC2 states in which an instance still exists for Karpenter (`instanceStateFilter`): not gone yet
_RUNNING_STATES = frozenset({"pending", "running", "stopping", "stopped", "shutting-down"})
#: removes the termination finalizer and nothing else
_RELEASE = NodePatch(remove_finalizers=frozenset({TERMINATION_FINALIZER}))


def begin(nodes: Mapping[str, Node], claims: list[Claim], deps: Dependencies, now: datetime,
          summary: DisruptSummary) -> set[str]:
    """Carry out `deletion.decide` for one read (module docstring). The claims that take a termination
    over are amended in place (their disruption in progress is now `Deleted`, for the executor to advance
    in this same run); returns the names of the claims released here (nothing to drain)."""
    decisions = deletion.decide(nodes.values(), claims, list_nodeclaims(deps), deps.settings.cluster_name)
    released: set[str] = set()
    for t in decisions.terminations:
        isolated(summary, "terminate-deleted", f"{t.why} (claim {t.claim.name})",
                 partial(_start, t, nodes, deps, now, summary, released))
    for g in decisions.let_go:
        isolated(summary, "release-finalizer", f"node {g.node}", partial(_let_go_node, g, deps, summary))
    for gone in decisions.nodeclaims_gone:
        isolated(summary, "release-finalizer", f"NodeClaim {gone.name}", partial(_let_go_nodeclaim, gone, deps, summary))
    for name in decisions.finalize:
        isolated(summary, "add-finalizer", f"node {name}", partial(_finalize, name, deps))
    return released


def list_nodeclaims(deps: Dependencies) -> list[dict[str, Any]]:
    """The cluster's NodeClaims; none when carpool has no access to them or the CRD is not installed (the
    Nodes' own finalizers are handled all the same)."""
    if deps.karpenter is None:
        return []
    try:
        return deps.karpenter.list_objects(NODECLAIM).items
    except KindNotServed as exc:
        log.warning("deleted NodeClaims are not looked at: %s", exc)
        return []


# -- a termination starts ---------------------------------------------------------------------------------
def _start(t: deletion.Termination, nodes: Mapping[str, Node], deps: Dependencies, now: datetime,
           summary: DisruptSummary, released: set[str]) -> None:
    node = nodes.get(t.node) if t.node is not None else None
    if node is None or _dead(node, deps):
        _end_undrained(t, node, deps, summary)
        released.add(t.claim.name)
        return
    takes_over = t.takes_over  # read before the claim says `Deleted`
    deadline = _deadline(t, deps) if takes_over else None
    if takes_over and saving.amend(deps.ledger, t.claim, partial(_record, deadline, now)) is None:
        return  # released meanwhile: its node is the other paths' (the finalizer goes with its instance)
    if t.delete_nodeclaim is not None and deps.karpenter is not None:
        deps.karpenter.delete_object(NODECLAIM, t.delete_nodeclaim)
    if t.delete_node:
        deps.cluster.delete_node(node.name)
    drain.cordon(deps.cluster, node.name)
    stamped = t.claim.disruption.termination_deadline if t.claim.disruption is not None else None
    if stamped is not None and takes_over:
        _stamp_nodeclaim(t.nodeclaim, stamped, deps)
        recorder.record([k8s_events.termination_grace_period_expiring(node.name, stamped)], deps)
    _note(summary, f"{t.why}: node {node.name} is cordoned and drained, then its instance terminated "
                   f"(claim {t.claim.name}; nothing launched in its place)")


def _deadline(t: deletion.Termination, deps: Dependencies) -> datetime | None:
    """The deletion plus the NodeClaim's terminationGracePeriod (its NodePool's when the NodeClaim has
    none: claims carpool launched before NodeClaims existed)."""
    grace = t.grace_seconds
    if grace is None:
        pool = next((p for p in deps.config.load().nodepools if p.name == t.claim.nodepool), None)
        grace = pool.termination_grace_period_seconds() if pool is not None else None
    return deletion.deadline(t.deleted_at, grace)


def _record(deadline: datetime | None, now: datetime, claim: Claim) -> None:
    """The termination as the claim's disruption in progress; an earlier drain deadline stands."""
    stamped = claim.disruption.termination_deadline if claim.disruption is not None else None
    kept = min((d for d in (stamped, deadline) if d is not None), default=None)
    claim.disruption = DisruptionProgress(reason=Reason.DELETED.value, action=Kind.DELETE.value, replaced_by=[],
                                          decided_at=now, termination_deadline=kept)
    claim.abandoned_for = []


def _stamp_nodeclaim(name: str | None, deadline: datetime, deps: Dependencies) -> None:
    """Karpenter's termination timestamp annotation on the NodeClaim, so `kubectl describe nodeclaim` shows
    when the drain stops waiting."""
    if name is None or deps.karpenter is None:
        return
    value = deadline.isoformat().replace("+00:00", "Z")
    with contextlib.suppress(ObjectGone):
        deps.karpenter.patch_object(NODECLAIM, name, {"metadata": {"annotations": {TERMINATION_TIMESTAMP: value}}})


def _dead(node: Node, deps: Dependencies) -> bool:
    """A node whose kubelet is gone with its instance: not Ready, and EC2 no longer runs the instance."""
    return not node.is_ready() and instance_gone(node.instance_id(), deps)


def _end_undrained(t: deletion.Termination, node: Node | None, deps: Dependencies, summary: DisruptSummary) -> None:
    """A deleted claim with nothing to drain (its node never joined, or is dead): its instance terminated,
    the claim released, the Node deleted and let go once the instance is gone, as is the NodeClaim."""
    instance = t.claim.instance_id or (node.instance_id() if node is not None else None)
    if instance and not instance_gone(instance, deps):
        deps.compute.terminate_instances([instance])
    deps.ledger.release(t.claim)
    if node is not None:
        deps.cluster.delete_node(node.name)
        let_go(deps, node, instance, t.nodeclaim)
    elif t.nodeclaim is not None and (not instance or instance_gone(instance, deps)):
        release_nodeclaim(deps, t.nodeclaim)
    _note(summary, f"{t.why}: nothing to drain ({'node ' + node.name + ' is not Ready' if node else 'no node joined'}):"
                   f" instance {instance or '?'} terminated, claim {t.claim.name} released")


# -- objects left behind ----------------------------------------------------------------------------------
def let_go(deps: Dependencies, node: Node | str, instance_id: str | None, nodeclaim: str | None = None) -> bool:
    """Once EC2 says `instance_id` is gone: the Node's termination finalizer removed (the API server then
    deletes a Node being deleted) and the NodeClaim `nodeclaim` released. False (nothing done) while the
    instance still exists: a later disruption run lets them go (`LetGo`). Every path that ends a node
    calls this after deleting the Node (`node` as read, or its name: then it is read)."""
    found = deps.cluster.get_node(node) if isinstance(node, str) else node
    holds = found is not None and TERMINATION_FINALIZER in found.metadata.finalizers
    if (holds or nodeclaim is not None) and instance_id and not instance_gone(instance_id, deps):
        log.info("node %s stays until instance %s is terminated", found.name if found else node, instance_id)
        return False
    if found is not None and holds:
        with contextlib.suppress(NodeGone):
            deps.cluster.patch_node(found.name, _RELEASE)
    if nodeclaim is not None:
        release_nodeclaim(deps, nodeclaim)
    return True


def _let_go_node(g: deletion.LetGo, deps: Dependencies, summary: DisruptSummary) -> None:
    """A deleted Node no claim holds: its instance ended first when carpool launched it (Karpenter's
    `awaitInstanceTermination`; one that is not carpool's is waited for), then the Node let go."""
    iid = g.instance_id
    state = _state(iid, deps) if iid else None
    if iid and state in _RUNNING_STATES:
        if g.ours and state != "shutting-down":
            deps.compute.terminate_instances([iid])
            _note(summary, f"node {g.node} is being deleted with no claim: instance {iid} terminated")
        return
    let_go(deps, g.node, None)
    _note(summary, f"node {g.node} let go: instance {g.instance_id or '?'} is gone")


def _let_go_nodeclaim(gone: deletion.NodeClaimGone, deps: Dependencies, summary: DisruptSummary) -> None:
    if gone.instance_id and not instance_gone(gone.instance_id, deps):
        log.info("NodeClaim %s stays until instance %s is gone", gone.name, gone.instance_id)
        return
    release_nodeclaim(deps, gone.name)
    _note(summary, f"NodeClaim {gone.name} let go: its node and instance are gone")


def _finalize(name: str, deps: Dependencies) -> None:
    """The termination finalizer on a registered carpool Node that lacks it (registered before carpool
    added it), so a delete of it waits for the drain."""
    with contextlib.suppress(NodeGone):
        deps.cluster.patch_node(name, NodePatch(add_finalizers=frozenset({TERMINATION_FINALIZER})))


def instance_gone(instance_id: str | None, deps: Dependencies) -> bool:
    """Whether EC2 no longer runs the instance: terminated, or unknown to it (Karpenter's `Get` answers
    NotFound then); no instance at all is gone too."""
    return not instance_id or _state(instance_id, deps) not in _RUNNING_STATES


def _state(instance_id: str, deps: Dependencies) -> str | None:
    found = instances.describe(instance_id, deps)
    return ((found or {}).get("State") or {}).get("Name") if found is not None else None


def _note(summary: DisruptSummary, message: str) -> None:
    summary.decisions.append(message)
    log.info(message)
