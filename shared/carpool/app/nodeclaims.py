"""Every claim carpool launches kept in the cluster as its `karpenter.sh/v1` NodeClaim
(`carpool.nodeclaims` builds it; this module reads and writes it through `deps.karpenter`).

The claim in DynamoDB stays the truth (reservations, exactly-once); the NodeClaim follows it at three moments:
- launch (`launched`, called by the provisioner once the launches are recorded): each claim's NodeClaim is
  created (spec, finalizer, owner), then its status (`Launched`, providerID, imageID, capacity,
  allocatable), the claims on worker threads together (`carpool.together`), so a batch of 100 claims waits
  for the slowest pair of requests, not 200 in turn;
- registration and initialization (`node_changed`, called by the registrar): nodeName, `Registered`,
  `Initialized`, the node's own capacity;
- every disruption run (`reconcile`): one list of the NodeClaims; the missing are created, those that
  differ patched (labels, status, `Drifted`, `Consolidatable`, `DisruptionReason`), and those carpool
  created whose claim is gone released (`release_nodeclaim`). A NodeClaim carpool did not create and has
  no claim for is Karpenter's: left alone (the migration adopts those).

A write that fails never fails what called it (a launch, a registration): it is logged, counted
(`NodeClaimSyncFailures`, `step`) and the next disruption run repairs it. Without `deps.karpenter` (unit
tests with fakes, a cluster without Karpenter's CRDs) nothing is written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from typing import Any

from carpool import nodeclaims, observability, together
from carpool.api.k8s import Node
from carpool.api.nodepool import NodePool
from carpool.app import instances
from carpool.app.disruption_summary import DisruptSummary
from carpool.app.isolation import isolated
from carpool.app.wiring import Dependencies
from carpool.disruption import drift
from carpool.karpenter_objects import (
    NODECLAIM,
    NODEPOOL,
    TERMINATION_FINALIZER,
    KarpenterObjects,
    KindNotServed,
    ObjectConflict,
    ObjectGone,
)
from carpool.nodeclaims import ClaimFacts
from carpool.requirements import Requirements
from carpool.state import charges
from carpool.state.models import ACTIVE_STATUSES, Claim

log = logging.getLogger(__name__)

#: how many times a write under a stale resourceVersion is read and made again
_ATTEMPTS = 3


@dataclass(frozen=True)
class Launched:
    """A claim just launched, with what its launch knew: its pool, its instance type's labels and capacity,
    the requirements the scheduler planned it with."""

    claim: Claim
    pool: NodePool
    type_labels: Mapping[str, str] = field(default_factory=dict)
    capacity: Mapping[str, int] = field(default_factory=dict)
    requirements: Requirements | None = None


#: NodeClaim writes one disruption run makes at most (creates, patches, releases): the first run after an
#: upgrade creates every node's NodeClaim over a few runs instead of spending the run's time on it
MAX_WRITES_PER_RUN = 100


@dataclass
class ReconcileSummary:
    created: list[str] = field(default_factory=list)
    patched: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    #: writes due but left for the next runs (`MAX_WRITES_PER_RUN`)
    deferred: int = 0


# -- launch --------------------------------------------------------------------------------------------
def launched(deps: Dependencies, claims: Sequence[Launched], now: datetime) -> list[str]:
    """Create each launched claim's NodeClaim and write its status, together. Returns the claims whose
    NodeClaim could not be written (logged and counted; the next disruption run creates them)."""
    karpenter = deps.karpenter
    if karpenter is None or not claims:
        return []
    try:
        uids = _pool_uids_of(karpenter, {c.claim.nodepool for c in claims})
    except Exception as exc:  # noqa: BLE001 - never fails the launch: the NodeClaims go without their owner
        log.warning("NodePools not read for their NodeClaims' owner: %s: %s", type(exc).__name__, exc)
        uids = {}
    facts = [ClaimFacts(claim=c.claim, cluster=deps.settings.cluster_name, pool=c.pool, now=now,
                        pool_uid=uids.get(c.claim.nodepool), type_labels=c.type_labels, capacity=c.capacity,
                        requirements=c.requirements) for c in claims]
    written = together.run([partial(_guarded, "create", f.claim.name, partial(_create, karpenter, f)) for f in facts])
    return [f.claim.name for f, ok in zip(facts, written, strict=True) if not ok]


def _create(karpenter: KarpenterObjects, facts: ClaimFacts) -> dict[str, Any] | None:
    """POST the NodeClaim (a 409 is a retry's: the stored one is brought in step instead), then its status."""
    body = nodeclaims.creation_body(nodeclaims.build(facts))
    try:
        stored = karpenter.create_object(NODECLAIM, body)
    except ObjectConflict:
        found = karpenter.get_object(NODECLAIM, facts.claim.name)
        if found is None:
            raise
        stored = found
    return _bring_in_step(karpenter, stored, facts)


# -- registration --------------------------------------------------------------------------------------
def read(deps: Dependencies, name: str) -> dict[str, Any] | None:
    """The claim's NodeClaim, None when there is none or it cannot be read (logged)."""
    if deps.karpenter is None:
        return None
    try:
        return deps.karpenter.get_object(NODECLAIM, name)
    except KindNotServed:
        return None  # no CRDs: nothing to keep (the config guard says so once per invocation)
    except Exception as exc:  # noqa: BLE001 - the NodeClaim is the claim's face; the registration goes on
        _failed("registration", name, exc)
        return None


def owner_reference(nodeclaim: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ownerReference a Karpenter node has to its NodeClaim (`UpdateNodeOwnerReferences`), None when the
    NodeClaim is not known."""
    meta = (nodeclaim or {}).get("metadata") or {}
    if not meta.get("uid") or not meta.get("name"):
        return None
    return {"apiVersion": NODECLAIM.api_version, "kind": NODECLAIM.kind, "name": meta["name"], "uid": meta["uid"],
            "blockOwnerDeletion": True}


def node_changed(deps: Dependencies, claim: Claim, pool: NodePool | None, node: Node,
                 current: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The claim's NodeClaim after the registrar moved its node on (registered, initialized): created if it
    is missing (`current` None), its status made to say what the node says. Returns the NodeClaim as
    stored (None: not written; logged and counted, never raised)."""
    karpenter = deps.karpenter
    if karpenter is None:
        return None
    now = deps.clock()
    facts = ClaimFacts(claim=claim, cluster=deps.settings.cluster_name, pool=pool, now=now, node=node,
                       type_labels=_type_labels(deps, claim, now), capacity=_capacity(deps, claim, now))
    stored: list[dict[str, Any] | None] = [None]

    def write() -> None:
        uid = _pool_uids_of(karpenter, {claim.nodepool}).get(claim.nodepool)
        with_uid = replace(facts, pool_uid=uid)
        stored[0] = _create(karpenter, with_uid) if current is None else _bring_in_step(karpenter, current, with_uid)

    _guarded("registration", claim.name, write)
    return stored[0]


# -- every disruption run ------------------------------------------------------------------------------
def reconcile(deps: Dependencies, now: datetime, claims: Sequence[Claim], nodes: Iterable[Node],
              running: set[str], gone: frozenset[str], summary: DisruptSummary) -> ReconcileSummary | None:
    """Bring every NodeClaim in step with the claims read this run (`claims`, less the ones this run
    released: `gone`), with the nodes and the ids of carpool's running instances read with them. One list
    of NodeClaims and one of NodePools; then a write only where one differs. Never raises: a failure is
    the run's `nodeclaims` action failure (`carpool.app.isolation`) and the next run tries again."""
    if deps.karpenter is None:
        return None
    done = ReconcileSummary()
    isolated(summary, "nodeclaims", "NodeClaims",
             partial(_reconcile_all, deps, deps.karpenter, now, claims, nodes, running, gone, summary, done))
    return done


def _reconcile_all(deps: Dependencies, karpenter: KarpenterObjects, now: datetime, claims: Sequence[Claim],
                   nodes: Iterable[Node], running: set[str], gone: frozenset[str], summary: DisruptSummary,
                   done: ReconcileSummary) -> None:
    try:
        listed = karpenter.list_objects(NODECLAIM).items
        uids = _uids(karpenter.list_objects(NODEPOOL).items)
    except KindNotServed as exc:
        log.warning("NodeClaims not kept: %s", exc)
        return
    current = {o["metadata"]["name"]: o for o in listed}
    manifests = deps.config.load()
    pools = {p.name: p for p in manifests.nodepools}
    classes = {c.name: c for c in manifests.nodeclasses}
    by_node = {n.name: n for n in nodes}
    by_instance = {n.instance_id(): n for n in by_node.values() if n.instance_id()}
    catalog = deps.catalog.get(now).types
    writes: list[tuple[str, Callable[[], object]]] = []
    for claim in claims:
        if claim.name in gone:
            continue
        existing = current.pop(claim.name, None)
        if claim.instance_id is None or claim.status not in ACTIVE_STATUSES:
            continue  # reserved: its NodeClaim is created once it launches
        pool, nodeclass = pools.get(claim.nodepool), classes.get(claim.nodeclass)
        it = catalog.get(claim.instance_type or "")
        facts = ClaimFacts(
            claim=claim, cluster=deps.settings.cluster_name, pool=pool, now=now, pool_uid=uids.get(claim.nodepool),
            type_labels=dict(it.labels) if it is not None else {}, capacity=_capacity(deps, claim, now),
            node=by_node.get(claim.node_name or "") or by_instance.get(claim.instance_id),
            drift=nodeclaims.drift_reason(existing, claim, pool,
                                          drift.spec_hash(pool, nodeclass) if pool and nodeclass else None))
        if _due(existing, facts):
            writes.append((f"NodeClaim {claim.name}", partial(_reconcile_one, karpenter, existing, facts, done)))
    for name, obj in sorted(current.items()):
        if _releasable(obj, deps, running):
            writes.append((f"NodeClaim {name}", partial(_release_one, deps, name, done)))
    for subject, write in writes[:MAX_WRITES_PER_RUN]:
        isolated(summary, "nodeclaim", subject, write)
    if len(writes) > MAX_WRITES_PER_RUN:
        done.deferred = len(writes) - MAX_WRITES_PER_RUN
        log.info("%d NodeClaim writes left for the next runs (at most %d a run)", done.deferred, MAX_WRITES_PER_RUN)


def _due(existing: Mapping[str, Any] | None, facts: ClaimFacts) -> bool:
    """Whether the claim's NodeClaim needs a write: it is missing, or it lacks something (one being
    deleted is the termination flow's now)."""
    if existing is None:
        return True
    return not (existing.get("metadata") or {}).get("deletionTimestamp") and bool(nodeclaims.changes(existing, facts))


def _reconcile_one(karpenter: KarpenterObjects, existing: Mapping[str, Any] | None, facts: ClaimFacts,
                   done: ReconcileSummary) -> None:
    name = facts.claim.name
    if existing is None:
        _create(karpenter, facts)
        done.created.append(name)
        log.info("NodeClaim %s created for claim %s (it had none)", name, name)
        return
    _bring_in_step(karpenter, existing, facts)
    done.patched.append(name)


def _releasable(obj: Mapping[str, Any], deps: Dependencies, running: set[str]) -> bool:
    """A NodeClaim with no claim in this run's read goes when carpool created it, its claim is still gone
    on a second read (a claim launched since the first has its NodeClaim already), and its instance is not
    running: an instance that runs is being ended by the clean-up or the termination flow (the NodeClaim
    stays until EC2 says it is gone, as Karpenter's does), or was adopted under another claim (whose node
    this NodeClaim may still own: deleting it would have the garbage collector delete the Node)."""
    if not nodeclaims.is_carpools(obj, deps.settings.cluster_name):
        return False  # Karpenter's: the migration adopts it
    name = obj["metadata"]["name"]
    claim = deps.ledger.get(name)
    if claim is not None and claim.status in ACTIVE_STATUSES:
        return False
    return nodeclaims.instance_of(obj) not in running


def _release_one(deps: Dependencies, name: str, done: ReconcileSummary) -> None:
    if release_nodeclaim(deps, name):
        done.released.append(name)
        log.info("NodeClaim %s released: its claim and instance are gone", name)


def release_nodeclaim(deps: Dependencies, name: str) -> bool:
    """Let the NodeClaim go: carpool's finalizer removed (under the resourceVersion read, as the list is
    replaced whole), then the object deleted. The one place carpool removes its NodeClaim finalizer: call
    it once the claim's instance is gone (or never existed). True when the object existed."""
    karpenter = deps.karpenter
    if karpenter is None:
        return False
    for _ in range(_ATTEMPTS):
        current = karpenter.get_object(NODECLAIM, name)
        if current is None:
            return False
        meta = current.get("metadata") or {}
        finalizers = list(meta.get("finalizers") or [])
        try:
            if TERMINATION_FINALIZER in finalizers:
                kept = [f for f in finalizers if f != TERMINATION_FINALIZER]
                karpenter.patch_object(NODECLAIM, name, {"metadata": {"finalizers": kept}},
                                       resource_version=meta.get("resourceVersion"))
            if not meta.get("deletionTimestamp"):
                karpenter.delete_object(NODECLAIM, name)
            return True
        except ObjectConflict:
            continue
        except ObjectGone:
            return True
    raise ObjectConflict(NODECLAIM, name, f"changed on each of {_ATTEMPTS} attempts to release it")


# -- shared steps --------------------------------------------------------------------------------------
def _bring_in_step(karpenter: KarpenterObjects, current: Mapping[str, Any], facts: ClaimFacts) -> dict[str, Any] | None:
    """Patch what `current` lacks (`nodeclaims.changes`); on a stale resourceVersion read it again and
    compute anew. Returns the NodeClaim as stored now (None: it is gone)."""
    name = facts.claim.name
    stored = dict(current)
    for _ in range(_ATTEMPTS):
        change = nodeclaims.changes(stored, facts)
        if not change:
            return stored
        version = (stored.get("metadata") or {}).get("resourceVersion")
        try:
            if change.metadata is not None:
                stored = karpenter.patch_object(NODECLAIM, name, {"metadata": change.metadata},
                                                resource_version=version if change.locked else None)
                version = (stored.get("metadata") or {}).get("resourceVersion")
            if change.status is not None:
                stored = karpenter.patch_status(NODECLAIM, name, change.status, resource_version=version)
            return stored
        except ObjectGone:
            return None
        except ObjectConflict:
            found = karpenter.get_object(NODECLAIM, name)
            if found is None:
                return None
            stored = found
    raise ObjectConflict(NODECLAIM, name, f"changed on each of {_ATTEMPTS} attempts to bring it in step")


def _guarded(step: str, name: str, write: Callable[[], object]) -> bool:
    """Run one NodeClaim write; a failure is logged and counted, never raised."""
    try:
        write()
    except KindNotServed as exc:  # no CRDs: not a failure of this write (the config guard says it once)
        log.info("NodeClaim %s not written: %s", name, exc)
        return False
    except Exception as exc:  # noqa: BLE001 - the NodeClaim follows the claim; the claim's path goes on
        _failed(step, name, exc)
        return False
    return True


def _failed(step: str, name: str, exc: Exception) -> None:
    log.warning("NodeClaim %s not written (%s): %s: %s; the next disruption run repairs it", name, step,
                type(exc).__name__, exc)
    observability.emit("NodeClaimSyncFailures", step=step)


def _pool_uids_of(karpenter: KarpenterObjects, names: Iterable[str]) -> dict[str, str]:
    """The uid of each named NodePool object in the cluster (absent: not there)."""
    out = {}
    for name in sorted(set(names)):
        try:
            obj = karpenter.get_object(NODEPOOL, name)
        except KindNotServed:
            return {}
        uid = ((obj or {}).get("metadata") or {}).get("uid")
        if uid:
            out[name] = uid
    return out


def _uids(objects: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    return {o["metadata"]["name"]: o["metadata"]["uid"] for o in objects if (o.get("metadata") or {}).get("uid")}


def _type_labels(deps: Dependencies, claim: Claim, now: datetime) -> dict[str, str]:
    it = deps.catalog.get(now).types.get(claim.instance_type or "") if claim.instance_type else None
    return dict(it.labels) if it is not None else {}


def _capacity(deps: Dependencies, claim: Claim, now: datetime) -> dict[str, int]:
    """The claim's capacity as its pool's usage holds it (what the launch charged, then the node's own:
    `carpool.state.charges`), so the NodeClaim and the pool's usage agree; the type's size when it holds
    nothing yet."""
    held = {k: v for k, v in claim.reserved.items() if k != charges.NODES and v}
    if held:
        return held
    return instances.capacities([claim.instance_type or ""], deps, now).get(claim.instance_type or "", {})
