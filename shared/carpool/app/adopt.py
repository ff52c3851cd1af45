"""The disruption run's first step: Karpenter's NodeClaims (and their instances and nodes) become carpool's.

Run by `carpool.app.disrupt` before the clean-up, so that an instance Karpenter launched is a claim of
carpool's before the orphan sweep judges instances: it is never terminated as an orphan, and from then on
carpool's registrar, disruption and interruption treat it as one of its own. What is adopted and when is
decided by `carpool.adoption` (pure); this module reads what that needs and carries it out, each adoption
its own failure unit (`carpool.app.isolation`):
1. the claim is written with `reserve` (no limit: the node exists), which adds its charge to its pool's
   usage and refuses when a claim of that name exists (written meanwhile by another run);
2. the instance gets carpool's ownership tag beside Karpenter's (`adoption.ownership_tags`);
3. the node gets the labels carpool knows its nodes by (`adoption.ownership_labels`): with them it is a
   disruption candidate like any other. Nothing else of the node or its pods changes.
A run stopped between these writes is finished by the next one: an adopted claim whose node lacks the
labels is tagged and labelled again (both writes are idempotent).

What it reads, and when: the nodes every run (handed on to the clean-up, which reads them anyway); the
NodeClaims only when a node carries Karpenter's `karpenter.sh/nodepool` label without carpool's
`carpool.dev/owned-by` (a node of Karpenter's not adopted yet); the NodePools, EC2NodeClasses, config and
catalog only when a NodeClaim is to be adopted. A cluster without Karpenter's CRDs, or a deployment
without `deps.karpenter`, adopts nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any

from carpool import adoption, labels, observability
from carpool.api.k8s import Node
from carpool.app.disruption_summary import DisruptSummary
from carpool.app.isolation import isolated
from carpool.app.wiring import Dependencies
from carpool.disruption import drift
from carpool.karpenter_objects import EC2NODECLASS, NODECLAIM, NODEPOOL, KindNotServed
from carpool.ports import NodePatch
from carpool.state.models import Claim
from carpool.state.ports import ReservationRefused

log = logging.getLogger(__name__)


def run(deps: Dependencies, now: datetime, summary: DisruptSummary) -> list[Node]:
    """Adopt the NodeClaims Karpenter left and finish adoptions a run left half-done; returns the nodes it
    read (the clean-up uses them rather than listing them again)."""
    nodes = deps.cluster.list_nodes()
    if deps.karpenter is None or not any(_karpenters(n) for n in nodes):
        return nodes
    claims = deps.ledger.active()
    by_instance = {iid: n for n in nodes if (iid := n.instance_id())}
    for claim in claims:
        node = by_instance.get(claim.instance_id or "")
        if claim.adopted is not None and node is not None and _karpenters(node):
            isolated(summary, "adopt-nodeclaim", f"NodeClaim {claim.name}",
                     partial(_own, claim, node.name, deps))
    try:
        listed = deps.karpenter.list_objects(NODECLAIM).items
    except KindNotServed as exc:
        log.warning("Karpenter's nodes are in the cluster but its NodeClaims cannot be read: %s", exc)
        return nodes
    known = {c.name for c in claims}
    if all(_name(nc) in known for nc in listed):
        return nodes
    decisions = adoption.decide(listed, claims, nodes, now, _surroundings(deps, listed, now))
    for adopting in decisions.adoptions:
        isolated(summary, "adopt-nodeclaim", f"NodeClaim {adopting.claim.name}",
                 partial(_adopt, adopting, deps, now, summary))
    for refused in decisions.refused:
        summary.failures.append(str(refused))
        log.error("%s: not adopted; fix or delete it (kubectl delete nodeclaim %s)", refused, refused.name)
    for name, why in sorted(decisions.waiting.items()):
        log.info("NodeClaim %s not adopted for now: %s", name, why)
    return nodes


def _adopt(adopting: adoption.Adoption, deps: Dependencies, now: datetime, summary: DisruptSummary) -> None:
    claim = adopting.claim
    try:
        deps.ledger.reserve(claim, None, now, deps.settings.nomination_ttl_seconds)
    except ReservationRefused as refused:
        log.info("adoption of NodeClaim %s skipped: %s", claim.name, refused.reason)
        return
    _own(claim, adopting.node, deps)
    summary.adopted.append(claim.instance_id or claim.name)
    summary.decisions.append(adopting.why)
    observability.emit("Disruptions", reason="adopt-nodeclaim")  # as the orphan sweep counts its adoptions
    log.info(adopting.why)


def _own(claim: Claim, node: str | None, deps: Dependencies) -> None:
    """Tag the claim's instance and label its node as carpool's (the instance first: a labelled node
    means both writes happened)."""
    cluster = deps.settings.cluster_name
    if claim.instance_id:
        deps.compute.tag_instance(claim.instance_id, adoption.ownership_tags(cluster))
    if node is not None:
        deps.cluster.patch_node(node, NodePatch(labels=adoption.ownership_labels(cluster, claim)))


def _surroundings(deps: Dependencies, nodeclaims: Sequence[Mapping[str, Any]],
                  now: datetime) -> adoption.Surroundings:
    """The NodePools and EC2NodeClasses as objects (their hash annotations), carpool's spec hash of each
    pair its config has, and the offerings' prices."""
    assert deps.karpenter is not None
    pools = {_name(o): o for o in _listed(deps, NODEPOOL)}
    classes = {_name(o): o for o in _listed(deps, EC2NODECLASS)}
    manifests = deps.config.load()
    hashes = {(p.name, c.name): drift.spec_hash(p, c) for p in manifests.nodepools for c in manifests.nodeclasses
              if p.node_class_name == c.name}
    return adoption.Surroundings(pools, classes, hashes, _prices(deps, nodeclaims, now))


def _listed(deps: Dependencies, kind: Any) -> list[dict[str, Any]]:
    assert deps.karpenter is not None
    try:
        return deps.karpenter.list_objects(kind).items
    except KindNotServed:
        return []


def _prices(deps: Dependencies, nodeclaims: Sequence[Mapping[str, Any]], now: datetime) -> dict[tuple[str, str, str], float]:
    """The hourly price of each offering the NodeClaims run on (what consolidation weighs a node by)."""
    wanted = {(lab.get(labels.INSTANCE_TYPE, ""), lab.get(labels.ZONE, ""), lab.get(labels.CAPACITY_TYPE, ""))
              for nc in nodeclaims if (lab := (nc.get("metadata") or {}).get("labels") or {})}
    try:
        types = deps.catalog.get(now).types
    except Exception:  # noqa: BLE001 - a price is an optimisation of consolidation, not a need of adoption
        log.warning("catalog unavailable: adopted claims get no price this run", exc_info=True)
        return {}
    out = {}
    for name, zone, capacity_type in wanted:
        offering = types[name].offering(zone, capacity_type) if name in types else None
        if offering is not None:
            out[(name, zone, capacity_type)] = offering.price
    return out


def _karpenters(node: Node) -> bool:
    """A node Karpenter launched that carpool has not made its own yet."""
    return bool(node.labels.get(labels.NODEPOOL)) and not node.labels.get(labels.OWNED_BY)


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")
