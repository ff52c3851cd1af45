"""A claim's `karpenter.sh/v1` NodeClaim, as Karpenter would have written it, and what to patch on one read.

carpool's claim (`carpool.state.models.Claim`, in DynamoDB) stays the transactional truth: reservations,
exactly-once launches, pool usage. The NodeClaim is its public face in the cluster (`kubectl get
nodeclaims`, eks-node-viewer, Karpenter's own tooling), so it is built from the claim alone, plus what the
claim points at (its NodePool, its instance type's labels, its node), every time, and never read back as a
fact. Pure: `carpool.app.nodeclaims` reads and writes.

Modelled on Karpenter v1.14.1 core:
- `pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go` (`NewNodeClaimTemplate`, `ToNodeClaim`):
  the NodePool template's labels and annotations, `karpenter.sh/nodepool` and the node class label,
  the `karpenter.sh/nodepool-hash` annotations, the template's requirements layered with its labels and
  the instance types (cheapest first, at most 600) and capacity types, taints, startupTaints,
  nodeClassRef, expireAfter, terminationGracePeriod, an ownerReference to the NodePool with
  blockOwnerDeletion; `resources.requests` from the pods packed onto it (`scheduling/nodeclaim.go`);
- `pkg/apis/v1/nodeclaim.go`, `nodeclaim_status.go`: the shape, status providerID, imageID, capacity,
  allocatable, nodeName, lastPodEventTime; the finalizer `karpenter.sh/termination`;
- `pkg/controllers/nodeclaim/lifecycle/launch.go` (`PopulateNodeClaimDetails`: the provider's labels, one
  value each, from the instance type, zone and capacity type), `registration.go`, `initialization.go`:
  conditions `Launched`, `Registered`, `Initialized` with their reasons and messages;
- `pkg/controllers/nodeclaim/disruption/` (`Drifted`, `Consolidatable`) and `disruption/queue.go`
  (`DisruptionReason`, True with the disruption's reason while the node is being disrupted; Karpenter
  v1.14.1 has no condition named `Disrupting`);
- conditions follow awslabs/operatorpkg `status/condition_set.go` (the version v1.14.1 pins): a
  `lastTransitionTime` moves only when the status changes, `observedGeneration` is the object's
  generation, and the root `Ready` is True when `Launched`, `Registered` and `Initialized` all are, else
  False (`UnhealthyDependents`) when one is False, else Unknown (`ReconcilingDependents`), its message
  the unhealthy ones (`Initialized=Unknown, ...`), latest first. A small algebra of its own, private here.

Deliberate differences, each for a reason:
- the name is the claim's (`<nodepool>-<10 hex>`), not `generateName`'s `<nodepool>-<5 random>`: one name
  for the claim, the instance's `karpenter.sh/nodeclaim` tag and the object, so a retried create is a 409;
- `karpenter.sh/nodepool-hash` is carpool's hash of the template (`template_hash`) with hash version
  `carpool-v1`, not Karpenter's hashstructure value: Karpenter's drift check compares hashes only when the
  versions agree, and its hash controller rewrites a NodeClaim whose version differs from its own `v3`, so
  handing the cluster back to Karpenter never marks carpool's nodes drifted by a hash it cannot compute;
- the ownerReference is written only when the NodePool object exists (its uid is known): a reference to
  a uid the API server does not hold makes the garbage collector delete the NodeClaim;
- `status.capacity`/`allocatable` follow the node once it reports them (carpool's pool usage does the same,
  `carpool.state.charges.registered`); before, the launched type's estimate;
- labels carry `carpool.dev/owned-by: <cluster>`: what tells carpool's NodeClaims from Karpenter's, which
  carpool never deletes (the migration adopts them).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from carpool import labels as wk
from carpool import lifecycle, quantity
from carpool.api.k8s import Node
from carpool.api.nodepool import NodePool
from carpool.karpenter_objects import NODECLAIM, NODEPOOL, TERMINATION_FINALIZER
from carpool.requirements import Requirement, Requirements
from carpool.resources import CPU, EPHEMERAL_STORAGE, MEMORY
from carpool.state.models import Claim, ClaimStatus

__all__ = [
    "CONSOLIDATABLE",
    "DISRUPTION_REASON",
    "DRIFTED",
    "HASH_VERSION",
    "INITIALIZED",
    "LAUNCHED",
    "READY",
    "REGISTERED",
    "ClaimFacts",
    "Changes",
    "build",
    "changes",
    "condition",
    "creation_body",
    "drift_reason",
    "instance_of",
    "is_carpools",
    "template_hash",
]

LAUNCHED: Final = "Launched"
REGISTERED: Final = "Registered"
INITIALIZED: Final = "Initialized"
READY: Final = "Ready"
DRIFTED: Final = "Drifted"
CONSOLIDATABLE: Final = "Consolidatable"
DISRUPTION_REASON: Final = "DisruptionReason"
#: the root condition's dependents (`NodeClaim.StatusConditions`)
_DEPENDENTS: Final = (LAUNCHED, REGISTERED, INITIALIZED)

HASH_ANNOTATION: Final = "karpenter.sh/nodepool-hash"
HASH_VERSION_ANNOTATION: Final = "karpenter.sh/nodepool-hash-version"
#: carpool's hash version (see the module docstring: never Karpenter's `v3`)
HASH_VERSION: Final = "carpool-v1"
#: Karpenter's `NodeClaimTerminationTimestampAnnotationKey`: when the drain's grace runs out
TERMINATION_TIMESTAMP_ANNOTATION: Final = "karpenter.sh/nodeclaim-termination-timestamp"
#: Karpenter's `MaxInstanceTypes`: the instance types a NodeClaim's requirement lists at most
MAX_INSTANCE_TYPES: Final = 600
#: requirement keys Karpenter keeps out of a NodeClaim (scheduling simulation only, restricted by the CRD)
_SIMULATION_KEYS: Final = frozenset({wk.REGISTERED, wk.NODE_INITIALIZED})
_AWAITING = ("AwaitingReconciliation", "object is awaiting reconciliation")
#: the byte-sized resources, written as binary quantities
_BYTES: Final = frozenset({MEMORY, EPHEMERAL_STORAGE})


@dataclass(frozen=True)
class ClaimFacts:
    """Everything a claim's NodeClaim is built from (the caller reads; nothing here does)."""

    claim: Claim
    #: carpool's cluster name (the `carpool.dev/owned-by` label)
    cluster: str
    #: the claim's NodePool as carpool serves it; None when it is gone (the NodeClaim keeps what it had)
    pool: NodePool | None
    now: datetime
    #: the NodePool object's uid in the cluster (None: not there, so no ownerReference)
    pool_uid: str | None = None
    #: the launched instance type's labels (`karpenter.k8s.aws/instance-*`, arch, os, region...)
    type_labels: Mapping[str, str] = field(default_factory=dict)
    #: the launched instance type's estimated capacity (cpu millis, bytes, counts)
    capacity: Mapping[str, int] = field(default_factory=dict)
    #: the claim's node once it joined
    node: Node | None = None
    #: the requirements the scheduler planned the claim with (at launch); None: rebuilt from the pool,
    #: the claim's labels and its instance types (a NodeClaim created later, by the reconcile)
    requirements: Requirements | None = None
    #: why the claim's node has drifted (a Karpenter drift reason such as `NodePoolDrifted`), None if not
    drift: str | None = None


@dataclass(frozen=True)
class Changes:
    """What one read NodeClaim lacks: a merge patch of its metadata and one of its status (None: nothing).
    `locked`: the metadata patch replaces a list (finalizers, ownerReferences), so it must be written under
    the resourceVersion read."""

    metadata: dict[str, Any] | None = None
    status: dict[str, Any] | None = None
    locked: bool = False

    def __bool__(self) -> bool:
        return self.metadata is not None or self.status is not None


def build(facts: ClaimFacts) -> dict[str, Any]:
    """The claim's NodeClaim (metadata, spec, status) as it should be now."""
    return {
        "apiVersion": NODECLAIM.api_version,
        "kind": NODECLAIM.kind,
        "metadata": _metadata(facts),
        "spec": _spec(facts),
        "status": _status(facts, generation=1),
    }


def creation_body(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What to POST: the object without its status (the status subresource takes that afterwards)."""
    return {k: v for k, v in obj.items() if k != "status"}


def is_carpools(obj: Mapping[str, Any], cluster: str) -> bool:
    """Whether carpool (for this cluster) created the NodeClaim: Karpenter's are never carpool's to delete."""
    return ((obj.get("metadata") or {}).get("labels") or {}).get(wk.OWNED_BY) == cluster


def instance_of(obj: Mapping[str, Any]) -> str | None:
    """The EC2 instance a NodeClaim's `status.providerID` names (`aws:///us-east-1a/i-0abc`), None if none."""
    provider_id = str((obj.get("status") or {}).get("providerID") or "")
    last = provider_id.rstrip("/").rsplit("/", 1)[-1]
    return last if provider_id.startswith("aws://") and last.startswith("i-") else None


def changes(current: Mapping[str, Any], facts: ClaimFacts) -> Changes:
    """What to patch on `current` (one read of the claim's NodeClaim) so that it says what the claim says.
    The spec is immutable (the CRD's `self == oldSelf`) and never patched; labels and annotations carpool
    owns are set, others left alone; the finalizer is not added back to an object being deleted (the API
    server refuses new finalizers then); conditions keep their `lastTransitionTime` while their status
    holds."""
    meta = current.get("metadata") or {}
    generation = int(meta.get("generation") or 1)
    desired = build(facts)
    metadata, locked = _metadata_changes(meta, desired["metadata"])
    status = _status(facts, generation)
    status["conditions"] = _settled(status["conditions"], (current.get("status") or {}).get("conditions") or [])
    return Changes(metadata, _status_changes(current.get("status") or {}, status), locked)


# -- metadata ------------------------------------------------------------------------------------------
def _metadata(facts: ClaimFacts) -> dict[str, Any]:
    claim, pool = facts.claim, facts.pool
    template = pool.spec.template.metadata if pool is not None else None
    annotations = {**(template.annotations if template else {})}
    annotations.update(_owned_annotations(claim))
    if pool is not None:
        annotations.update({HASH_ANNOTATION: template_hash(pool), HASH_VERSION_ANNOTATION: HASH_VERSION})
    meta: dict[str, Any] = {
        "name": claim.name,
        "labels": _labels(facts),
        "annotations": annotations,
        "finalizers": [TERMINATION_FINALIZER],
    }
    if facts.pool_uid:
        meta["ownerReferences"] = [_owner(claim.nodepool, facts.pool_uid)]
    return meta


def _labels(facts: ClaimFacts) -> dict[str, str]:
    """The labels Karpenter's NodeClaim carries (the provider's single-valued instance-type labels under
    the template's and the claim's own), the same set registration puts on the node, plus carpool's owner."""
    out = lifecycle.claimed_labels(facts.claim, facts.pool, facts.type_labels)
    out[wk.OWNED_BY] = facts.cluster
    return out


def _owned_annotations(claim: Claim) -> dict[str, str]:
    """Annotations that follow the claim's life (set whenever they change)."""
    deadline = claim.disruption.termination_deadline if claim.disruption else None
    return {TERMINATION_TIMESTAMP_ANNOTATION: _time(deadline)} if deadline is not None else {}


def _owner(nodepool: str, uid: str) -> dict[str, Any]:
    return {"apiVersion": NODEPOOL.api_version, "kind": NODEPOOL.kind, "name": nodepool, "uid": uid,
            "blockOwnerDeletion": True}


def _metadata_changes(meta: Mapping[str, Any], desired: Mapping[str, Any]) -> tuple[dict[str, Any] | None, bool]:
    patch: dict[str, Any] = {}
    labels = _missing(meta.get("labels") or {}, desired["labels"])
    if labels:
        patch["labels"] = labels
    owned = {k: v for k, v in desired["annotations"].items() if k == TERMINATION_TIMESTAMP_ANNOTATION}
    annotations = _missing(meta.get("annotations") or {}, owned)
    if annotations:
        patch["annotations"] = annotations
    locked = False
    finalizers = list(meta.get("finalizers") or [])
    if TERMINATION_FINALIZER not in finalizers and not meta.get("deletionTimestamp"):
        patch["finalizers"], locked = [*finalizers, TERMINATION_FINALIZER], True
    owners = list(meta.get("ownerReferences") or [])
    wanted = desired.get("ownerReferences") or []
    if wanted and not any(o.get("kind") == NODEPOOL.kind and o.get("uid") == wanted[0]["uid"] for o in owners):
        patch["ownerReferences"], locked = [*owners, *wanted], True
    return (patch or None), locked


def _missing(have: Mapping[str, str], want: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in want.items() if have.get(k) != v}


def drift_reason(current: Mapping[str, Any] | None, claim: Claim, pool: NodePool | None,
                 spec_hash_now: str | None) -> str | None:
    """Why the claim's node has drifted, in the words of Karpenter's `Drifted` condition, or None: its
    NodeClaim's `karpenter.sh/nodepool-hash` (carpool's version) is not the pool's template now
    (`NodePoolDrifted`, Karpenter's static drift); else the claim's launch-time hash of template and node
    class (`Claim.spec_hash`) is not `spec_hash_now` (`NodeClassDrift`); else a disruption for drift is in
    progress (the planner also found requirement or AMI drift: `Drifted`). A pool gone is not drift: its
    NodeClaims go with it (the owner reference)."""
    if pool is None:
        return None
    annotations = ((current or {}).get("metadata") or {}).get("annotations") or {}
    stored = annotations.get(HASH_ANNOTATION)
    if annotations.get(HASH_VERSION_ANNOTATION) == HASH_VERSION and stored and stored != template_hash(pool):
        return "NodePoolDrifted"
    if claim.spec_hash and spec_hash_now and claim.spec_hash != spec_hash_now:
        return "NodeClassDrift"
    if claim.disruption is not None and claim.disruption.reason == DRIFTED:
        return DRIFTED
    return None


def template_hash(pool: NodePool) -> str:
    """carpool's hash of what a node of `pool` is (its template without what Karpenter's hash ignores:
    requirements, expireAfter, terminationGracePeriod), for the `karpenter.sh/nodepool-hash` annotation."""
    template = pool.spec.template.model_dump(by_alias=True, exclude_none=True, mode="json")
    spec = {k: v for k, v in template.get("spec", {}).items()
            if k not in ("requirements", "expireAfter", "terminationGracePeriod")}
    text = json.dumps({"metadata": template.get("metadata", {}), "spec": spec}, sort_keys=True, separators=(",", ":"))
    return str(int(hashlib.sha256(text.encode()).hexdigest()[:16], 16))


# -- spec ----------------------------------------------------------------------------------------------
def _spec(facts: ClaimFacts) -> dict[str, Any]:
    claim, pool = facts.claim, facts.pool
    spec: dict[str, Any] = {
        "requirements": _requirements(facts),
        "nodeClassRef": _node_class_ref(claim, pool),
    }
    requests = _quantities(claim.requested)
    if requests:
        spec["resources"] = {"requests": requests}
    if pool is not None:
        template = pool.spec.template.spec
        if template.taints:
            spec["taints"] = [_taint(t) for t in pool.taints()]
        if template.startup_taints:
            spec["startupTaints"] = [_taint(t) for t in pool.startup_taints()]
        spec["expireAfter"] = template.expire_after
        if template.termination_grace_period is not None:
            spec["terminationGracePeriod"] = template.termination_grace_period
    return spec


def _node_class_ref(claim: Claim, pool: NodePool | None) -> dict[str, str]:
    if pool is not None:
        ref = pool.spec.template.spec.node_class_ref
        return {"group": ref.group, "kind": ref.kind, "name": ref.name}
    return {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": claim.nodeclass}


def _requirements(facts: ClaimFacts) -> list[dict[str, Any]]:
    """The template's requirements layered with its labels, the node class label and the claim's instance
    types (cheapest first, at most `MAX_INSTANCE_TYPES`), one entry a key, as `ToNodeClaim` writes them.
    A `minValues` the listed values cannot meet is dropped (the CRD refuses it; Karpenter would have
    relaxed it and said so in `karpenter.sh/nodeclaim-min-values-relaxed`)."""
    claim, pool = facts.claim, facts.pool
    reqs = facts.requirements
    if reqs is None:
        reqs = pool.requirements() if pool is not None else Requirements([Requirement.in_(wk.NODEPOOL, claim.nodepool)])
        reqs = reqs.add(*(Requirement.in_(k, v) for k, v in claim.labels.items() if not k.startswith("carpool.dev/")))
    reqs = reqs.add(Requirement.in_(wk.EC2NODECLASS, claim.nodeclass))
    if claim.instance_types:
        reqs = reqs.add(Requirement.in_(wk.INSTANCE_TYPE, *claim.instance_types[:MAX_INSTANCE_TYPES]))
    out = []
    for spec in reqs.specs():
        if spec["key"] in _SIMULATION_KEYS:
            continue
        if spec.get("minValues") and len(spec.get("values") or ()) < spec["minValues"]:
            spec = {k: v for k, v in spec.items() if k != "minValues"}
        out.append(spec)
    return out


def _taint(t: Any) -> dict[str, str]:
    return {"key": t.key, "effect": t.effect, **({"value": t.value} if t.value else {})}


def _quantities(values: Mapping[str, int]) -> dict[str, str]:
    """carpool's integers as Kubernetes quantities (cpu "1500m", memory "7577Mi", pods "29")."""
    out = {}
    for name in sorted(values):
        v = values[name]
        if name == CPU:
            out[name] = quantity.format_cpu(v)
        elif name in _BYTES or name.startswith("hugepages-"):
            out[name] = quantity.format_bytes(v)
        else:
            out[name] = str(v)
    return out


# -- status --------------------------------------------------------------------------------------------
def _status(facts: ClaimFacts, generation: int) -> dict[str, Any]:
    claim, node = facts.claim, facts.node
    status: dict[str, Any] = {}
    if claim.instance_id:
        status["providerID"] = f"aws:///{claim.zone or ''}/{claim.instance_id}"
    if node is not None and node.provider_id:
        status["providerID"] = node.provider_id
    if claim.image_id:
        status["imageID"] = claim.image_id
    capacity, allocatable = dict(facts.capacity), dict(claim.allocatable)
    if node is not None:  # the node's own figures, a resource it does not report (yet) at the estimate's
        capacity.update({k: v for k, v in node.capacity().items() if v})
        allocatable.update({k: v for k, v in node.allocatable().items() if v})
    if capacity:
        status["capacity"] = _quantities(capacity)
    if allocatable:
        status["allocatable"] = _quantities(allocatable)
    node_name = node.name if node is not None else claim.node_name
    if node_name and _registered(facts):
        status["nodeName"] = node_name
    if claim.pods_changed_at is not None:
        status["lastPodEventTime"] = _time(claim.pods_changed_at)
    status["conditions"] = _conditions(facts, generation)
    return status


def _registered(facts: ClaimFacts) -> bool:
    node = facts.node
    if node is not None:
        return lifecycle.is_registered(node)
    return facts.claim.status == ClaimStatus.REGISTERED


def _initialized(facts: ClaimFacts) -> bool:
    node = facts.node
    if node is not None:
        return lifecycle.is_initialized(node)
    return False


def condition(kind: str, status: str, reason: str, message: str, since: datetime, generation: int) -> dict[str, Any]:
    """One condition as operatorpkg writes it."""
    return {"type": kind, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": _time(since), "observedGeneration": generation}


def _conditions(facts: ClaimFacts, generation: int) -> list[dict[str, Any]]:
    claim, created = facts.claim, facts.claim.created_at
    launched = claim.instance_id is not None and claim.status in (ClaimStatus.LAUNCHED, ClaimStatus.REGISTERED)
    registered = _registered(facts)
    out = [
        condition(LAUNCHED, "True", LAUNCHED, "", claim.launched_at or facts.now, generation) if launched
        else condition(LAUNCHED, "Unknown", *_AWAITING, created, generation),
        condition(REGISTERED, "True", REGISTERED, "", _registered_at(facts), generation) if registered
        else condition(REGISTERED, "Unknown", "NodeNotFound", "Node not registered with cluster", created, generation)
        if launched else condition(REGISTERED, "Unknown", *_AWAITING, created, generation),
        _initialized_condition(facts, registered, generation),
    ]
    out.append(_ready(out, generation))
    out.extend(_disruption_conditions(facts, generation))
    return _sorted(out)


def _registered_at(facts: ClaimFacts) -> datetime:
    node = facts.node
    if node is not None and node.metadata.creation_timestamp is not None:
        return node.metadata.creation_timestamp
    return facts.claim.registered_at or facts.now


def _initialized_condition(facts: ClaimFacts, registered: bool, generation: int) -> dict[str, Any]:
    """Karpenter's initialization: Unknown with the first reason it is not done yet (its wording), True once
    the node is labelled initialized (`carpool.lifecycle`, applied by the registrar)."""
    created = facts.claim.created_at
    if _initialized(facts):
        return condition(INITIALIZED, "True", INITIALIZED, "", facts.now, generation)
    if not registered or facts.node is None:
        return condition(INITIALIZED, "Unknown", *_AWAITING, created, generation)
    startup = facts.pool.startup_taints() if facts.pool is not None else ()
    blocked = lifecycle.initialization_blocked(facts.node, facts.claim, startup)
    reason, message = blocked if blocked is not None else _AWAITING
    return condition(INITIALIZED, "Unknown", reason, message, created, generation)


def _ready(conditions: Sequence[Mapping[str, Any]], generation: int) -> dict[str, Any]:
    """The root condition from its dependents (operatorpkg `recomputeRootCondition`)."""
    unhealthy = [c for c in conditions if c["type"] in _DEPENDENTS and c["status"] != "True"]
    if not unhealthy:
        since = max(_parse_time(c["lastTransitionTime"]) for c in conditions if c["type"] in _DEPENDENTS)
        return condition(READY, "True", READY, "", since, generation)
    unhealthy.sort(key=lambda c: c["lastTransitionTime"], reverse=True)
    status = "False" if any(c["status"] == "False" for c in unhealthy) else "Unknown"
    reason = "UnhealthyDependents" if status == "False" else "ReconcilingDependents"
    message = ", ".join(f"{c['type']}={c['status']}" for c in unhealthy)
    return condition(READY, status, reason, message, min(_parse_time(c["lastTransitionTime"]) for c in unhealthy),
                     generation)


def _disruption_conditions(facts: ClaimFacts, generation: int) -> list[dict[str, Any]]:
    """`Drifted`, `Consolidatable` and `DisruptionReason`: present only while true, as Karpenter clears them."""
    claim, now = facts.claim, facts.now
    out = []
    if facts.drift:
        out.append(condition(DRIFTED, "True", facts.drift, facts.drift, now, generation))
    consolidatable_at = _consolidatable_at(facts)
    if consolidatable_at is not None and consolidatable_at <= now:
        out.append(condition(CONSOLIDATABLE, "True", CONSOLIDATABLE, "", consolidatable_at, generation))
    if claim.disruption is not None:
        reason = claim.disruption.reason
        out.append(condition(DISRUPTION_REASON, "True", reason, reason, claim.disruption.decided_at or now, generation))
    return out


def _consolidatable_at(facts: ClaimFacts) -> datetime | None:
    """When the node became consolidatable (Karpenter's `Consolidatable` controller): consolidateAfter past
    the last change of its pods, or past its initialization; None while consolidation is off or the node
    is not initialized."""
    pool, claim = facts.pool, facts.claim
    after = pool.consolidate_after_seconds() if pool is not None else None
    if after is None or not _initialized(facts):
        return None
    base = claim.pods_changed_at or claim.registered_at
    return base + timedelta(seconds=after) if base is not None else None


def _settled(desired: list[dict[str, Any]], current: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`desired` with each condition whose status did not change keeping its `lastTransitionTime`, sorted
    as operatorpkg sorts (by transition, the root last)."""
    held = {c.get("type"): c for c in current}
    out = []
    for c in desired:
        was = held.get(c["type"])
        if was is not None and was.get("status") == c["status"] and was.get("lastTransitionTime"):
            c = {**c, "lastTransitionTime": was["lastTransitionTime"]}
        out.append(c)
    return _sorted(out)


def _sorted(conditions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(conditions, key=lambda c: (c["type"] == READY, c["lastTransitionTime"], c["type"]))


def _status_changes(current: Mapping[str, Any], desired: dict[str, Any]) -> dict[str, Any] | None:
    """The status fields that differ (conditions compared by type, as the list-map they are; written whole,
    since a merge patch replaces a list)."""
    patch = {k: v for k, v in desired.items() if k != "conditions" and current.get(k) != v}
    have = {c.get("type"): _comparable(c) for c in current.get("conditions") or []}
    want = {c["type"]: _comparable(c) for c in desired["conditions"]}
    if have != want:
        patch["conditions"] = desired["conditions"]
    return patch or None


def _comparable(c: Mapping[str, Any]) -> tuple[Any, ...]:
    return (c.get("status"), c.get("reason"), c.get("message") or "", c.get("lastTransitionTime"),
            c.get("observedGeneration"))


def _time(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
