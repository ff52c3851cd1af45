"""A NodeClaim Karpenter created, as a carpool claim: how carpool takes over a cluster Karpenter built (pure).

With Karpenter's controller scaled to zero (`carpool.karpenter_lease` says when it is), its NodeClaims stay
in the cluster, each naming the instance it launched (`status.providerID`) and the node that joined from it
(`status.nodeName`). carpool adopts each into its own claim state so that no node is replaced and no pod
moved: the claim is what carpool would have recorded had it launched the node itself, read from the
NodeClaim first (its name, `karpenter.sh/nodepool` label, `spec.nodeClassRef`, instance, instance type,
capacity type, zone, `status.imageID`, `status.capacity`/`allocatable`) and from the node second (the
capacity it reports). It is charged against its NodePool's limits what a registered node is
(`carpool.state.charges.registered`), as Karpenter's NodePool usage sums its NodeClaims' capacity.

What Karpenter froze onto the NodeClaim at its creation travels with the claim (`Claim.adopted`,
`NodeClaimOrigin`): expiry counts the NodeClaim's own `spec.expireAfter` from its `creationTimestamp`
(Karpenter's `pkg/controllers/nodeclaim/expiration/controller.go`).

Static drift is judged as Karpenter judges it: Karpenter's `pkg/controllers/nodeclaim/disruption/drift.go`
`areStaticFieldsDrifted` compares the NodeClaim's `karpenter.sh/nodepool-hash` with the NodePool's, and
the AWS provider's `pkg/cloudprovider/drift.go` the NodeClaim's `karpenter.k8s.aws/ec2nodeclass-hash` with
the EC2NodeClass's, each only when both carry the same hash version. carpool computes the NodePool's hash
as Karpenter does (`carpool.karpenter_hash`, hash version v3), so a NodePool edited since Karpenter stopped
counts; where its figure disagrees with the hash Karpenter wrote on the NodePool for the same generation it
gives no verdict (a wrong "drifted" would replace the pool's every node). Where it has no figure, and for the EC2NodeClass (whose hash carpool does not
compute), the object's annotation stands for its hash: what Karpenter last wrote, true only while the
object's `metadata.generation` is the one its status conditions observed (no spec change since). So at
adoption (`drift_baseline`): both verdicts known and equal hashes mean the node is in step with its pool
and class as they are now: the claim stores carpool's own spec hash of them
(`carpool.disruption.drift.spec_hash`), and a later edit drifts it as it drifts a node carpool launched;
a differing hash means Karpenter would call it drifted, and the claim stores `KARPENTER_DRIFTED`, which no
spec hash equals. In any other case carpool cannot tell, and static drift is not checked for that node
(requirement and AMI drift still are).

Which NodeClaims are adopted, and when (`decide`):
- one the ledger knows by name or by instance is carpool's already (the NodeClaims carpool writes for
  its own claims, or one adopted before), and is left alone;
- one with no instance yet (`status.providerID` empty: Karpenter stopped before its launch came back) is
  not adopted: there is nothing to keep, and its pods are pending again for carpool to serve;
- one whose NodeClaim says `Registered` while no node runs its instance waits (the node may be joining
  again, or be gone with its instance; the next run sees which);
- otherwise it is adopted: REGISTERED with its node when the node has joined and lost its
  `karpenter.sh/unregistered` taint, else LAUNCHED, so carpool's registrar finishes the registration
  Karpenter began (as Karpenter's `pkg/controllers/nodeclaim/lifecycle/registration.go` would).
A NodeClaim whose fields cannot be read (no nodepool label, no nodeClassRef, a providerID that names no
EC2 instance, a quantity the API server would not hold) is refused with the field named, and nothing is
written for it.

Modelled on Karpenter v1.14.1's `pkg/apis/v1/nodeclaim.go` (the object), `pkg/apis/v1/labels.go` (its
labels) and the AWS provider's `pkg/utils/utils.go` `GetTags` and `pkg/controllers/nodeclaim/tagging`
(the tags on its instances). The step that applies the decisions is `carpool.app.adopt`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from carpool import karpenter_hash, labels, resources
from carpool.api.durations import DurationError, parse_duration
from carpool.api.k8s import Node
from carpool.quantity import QuantityError
from carpool.resources import Resources
from carpool.state import charges
from carpool.state.models import Claim, ClaimStatus, NodeClaimOrigin

__all__ = [
    "HASH_ANNOTATION",
    "HASH_VERSION_ANNOTATION",
    "KARPENTER_DRIFTED",
    "NODECLASS_HASH_ANNOTATION",
    "NODECLASS_HASH_VERSION_ANNOTATION",
    "Adoption",
    "Decisions",
    "Refusal",
    "Surroundings",
    "adopted_claim",
    "decide",
    "drift_baseline",
    "instance_of",
    "ownership_labels",
    "ownership_tags",
]

#: Karpenter's NodePool hash on a NodeClaim (`v1.NodePoolHashAnnotationKey`) and its version
HASH_ANNOTATION: Final = "karpenter.sh/nodepool-hash"
HASH_VERSION_ANNOTATION: Final = "karpenter.sh/nodepool-hash-version"
#: the AWS provider's EC2NodeClass hash on a NodeClaim (`v1.AnnotationEC2NodeClassHash`) and its version
NODECLASS_HASH_ANNOTATION: Final = "karpenter.k8s.aws/ec2nodeclass-hash"
NODECLASS_HASH_VERSION_ANNOTATION: Final = "karpenter.k8s.aws/ec2nodeclass-hash-version"
#: the spec hash stored on a claim Karpenter would call statically drifted (no spec hash equals it)
KARPENTER_DRIFTED: Final = "karpenter-drifted"
#: `aws:///<zone>/<instance id>` (the AWS cloud provider's providerID; the zone may be empty)
_PROVIDER_ID: Final = re.compile(r"^aws:///[^/]*/(i-[0-9a-f]+)$")


class Refusal(Exception):
    """A NodeClaim carpool cannot read as a claim; `field` is the path of the field at fault."""

    def __init__(self, name: str, field_path: str, message: str) -> None:
        super().__init__(f"NodeClaim {name!r}: {field_path}: {message}")
        self.name, self.field, self.message = name, field_path, message


@dataclass(frozen=True)
class Adoption:
    """Adopt `claim` (built from a NodeClaim, `adopted_claim`); `node` is the node that joined from its
    instance (None while it boots); `why` is the decision's sentence for the log."""

    claim: Claim
    node: str | None
    why: str


@dataclass
class Decisions:
    adoptions: list[Adoption] = field(default_factory=list)
    #: NodeClaim name -> why it is not adopted this run (it is looked at again next run)
    waiting: dict[str, str] = field(default_factory=dict)
    #: NodeClaims refused as unreadable, the field named
    refused: list[Refusal] = field(default_factory=list)


@dataclass(frozen=True)
class Surroundings:
    """What the cluster and carpool hold besides the NodeClaims, as one adoption run read it."""

    #: the NodePool and EC2NodeClass objects by name, as the API server holds them (annotations, status)
    nodepools: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    nodeclasses: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: (NodePool, EC2NodeClass) -> carpool's spec hash of them now (`carpool.disruption.drift.spec_hash`)
    spec_hashes: Mapping[tuple[str, str], str] = field(default_factory=dict)
    #: (instance type, zone, capacity type) -> the offering's hourly price
    prices: Mapping[tuple[str, str, str], float] = field(default_factory=dict)


def decide(nodeclaims: Iterable[Mapping[str, Any]], claims: Sequence[Claim], nodes: Iterable[Node],
           now: datetime, around: Surroundings | None = None) -> Decisions:
    """Which of the cluster's NodeClaims to adopt at `now`. `claims` are the ledger's live claims, `nodes`
    the cluster's nodes."""
    around = around or Surroundings()
    out = Decisions()
    named = {c.name for c in claims}
    instances = {c.instance_id for c in claims if c.instance_id}
    by_instance = {iid: n for n in nodes if (iid := n.instance_id())}
    for nodeclaim in nodeclaims:
        name = str((nodeclaim.get("metadata") or {}).get("name") or "")
        if name in named:
            continue  # carpool's own claim, or one adopted already
        try:
            instance = instance_of(nodeclaim)
        except Refusal as refusal:
            out.refused.append(refusal)
            continue
        if instance is None:
            out.waiting[name] = ("it has no instance (status.providerID is empty: Karpenter stopped before its "
                                 "launch); not adopted, its pods are served anew")
            continue
        if instance in instances:
            continue  # a claim of another name records the instance (adopted from the instance earlier)
        node = by_instance.get(instance)
        if node is None and _condition(nodeclaim, "Registered"):
            out.waiting[name] = (f"it is Registered but no node runs its instance {instance}; looked at again "
                                 "next run")
            continue
        try:
            claim = adopted_claim(nodeclaim, node, now, around.prices)
        except Refusal as refusal:
            out.refused.append(refusal)
            continue
        claim.spec_hash, drift = drift_baseline(
            nodeclaim, around.nodepools.get(claim.nodepool), around.nodeclasses.get(claim.nodeclass),
            around.spec_hashes.get((claim.nodepool, claim.nodeclass)))
        out.adoptions.append(Adoption(claim, node.name if node is not None else None, f"{_why(claim, node)}; {drift}"))
    return out


def drift_baseline(nodeclaim: Mapping[str, Any], nodepool: Mapping[str, Any] | None,
                   nodeclass: Mapping[str, Any] | None, spec_hash_now: str | None) -> tuple[str | None, str]:
    """The spec hash an adopted claim stores (see the module docstring: carpool's hash of its pool and class
    now, `KARPENTER_DRIFTED`, or None: static drift not checked) and a sentence saying why."""
    verdicts = [_nodepool_verdict(nodeclaim, nodepool),
                _hash_verdict(nodeclaim, nodeclass, "EC2NodeClass", NODECLASS_HASH_ANNOTATION,
                              NODECLASS_HASH_VERSION_ANNOTATION)]
    unknown = [why for same, why in verdicts if same is None]
    if unknown:
        return None, f"static drift not checked ({'; '.join(unknown)})"
    drifted = [why for same, why in verdicts if same is False]
    if drifted:
        return KARPENTER_DRIFTED, f"statically drifted as Karpenter judges it ({'; '.join(drifted)})"
    if spec_hash_now is None:
        return None, "static drift not checked (carpool's config has no such NodePool and EC2NodeClass)"
    agree = "; ".join(why for _same, why in verdicts)
    return spec_hash_now, f"in step with its NodePool and EC2NodeClass (Karpenter's hashes agree: {agree})"


def _nodepool_verdict(nodeclaim: Mapping[str, Any], nodepool: Mapping[str, Any] | None) -> tuple[bool | None, str]:
    """The NodeClaim's `karpenter.sh/nodepool-hash` against Karpenter's hash of the NodePool as it is now,
    computed (`carpool.karpenter_hash`), so an edit since Karpenter stopped counts. Computed only for the
    NodeClaim's hash version, and not trusted where it disagrees with the hash Karpenter itself wrote on the
    NodePool for this generation (then no verdict). Where carpool has no figure (a template it cannot hash),
    the NodePool's annotation decides (`_hash_verdict`)."""
    theirs: Mapping[str, str] = (nodeclaim.get("metadata") or {}).get("annotations") or {}
    computed = karpenter_hash.nodepool_hash(nodepool) if nodepool is not None else None
    if (nodepool is None or computed is None or not theirs.get(HASH_ANNOTATION)
            or theirs.get(HASH_VERSION_ANNOTATION) != karpenter_hash.NODEPOOL_HASH_VERSION):
        return _hash_verdict(nodeclaim, nodepool, "NodePool", HASH_ANNOTATION, HASH_VERSION_ANNOTATION)
    name = (nodepool.get("metadata") or {}).get("name")
    stamped: Mapping[str, str] = (nodepool.get("metadata") or {}).get("annotations") or {}
    if (stamped.get(HASH_VERSION_ANNOTATION) == karpenter_hash.NODEPOOL_HASH_VERSION and _observed(nodepool)
            and stamped.get(HASH_ANNOTATION) not in (None, computed)):
        # carpool's figure is not the one Karpenter wrote for this generation: either carpool's walk missed
        # something of this template, or the annotation is stale under conditions another writer observed;
        # neither can be told apart, and a wrong "drifted" would replace every node of the pool
        return None, (f"NodePool {name}'s {HASH_ANNOTATION} {stamped[HASH_ANNOTATION]} is not carpool's figure "
                      f"{computed} of its template")
    if theirs[HASH_ANNOTATION] != computed:
        return False, f"{HASH_ANNOTATION} {theirs[HASH_ANNOTATION]} is not NodePool {name}'s {computed} (computed)"
    return True, f"NodePool {name} hash {computed} (computed)"


def _hash_verdict(nodeclaim: Mapping[str, Any], owner: Mapping[str, Any] | None, kind: str, key: str,
                  version_key: str) -> tuple[bool | None, str]:
    """(whether the NodeClaim's hash of `owner` equals the owner's own, None when Karpenter's annotations
    cannot say; a sentence)."""
    if owner is None:
        return None, f"its {kind} is not in the cluster"
    name = (owner.get("metadata") or {}).get("name")
    theirs: Mapping[str, str] = (nodeclaim.get("metadata") or {}).get("annotations") or {}
    ours: Mapping[str, str] = (owner.get("metadata") or {}).get("annotations") or {}
    missing = [f"{what} has no {k}" for what, notes in ((f"{kind} {name}", ours), ("the NodeClaim", theirs))
               for k in (key, version_key) if not notes.get(k)]
    if missing:
        return None, missing[0]
    if ours[version_key] != theirs[version_key]:
        return None, f"{kind} {name}'s hash version {ours[version_key]} is not the NodeClaim's {theirs[version_key]}"
    if not _observed(owner):
        return None, f"{kind} {name} changed since Karpenter last hashed it (generation not observed)"
    if ours[key] != theirs[key]:
        return False, f"{key} {theirs[key]} is not {kind} {name}'s {ours[key]}"
    return True, f"{kind} {name} hash {ours[key]}"


def _observed(obj: Mapping[str, Any]) -> bool:
    """Whether the object's status conditions were written for its current generation."""
    generation = (obj.get("metadata") or {}).get("generation")
    conditions = (obj.get("status") or {}).get("conditions") or []
    seen = [c.get("observedGeneration") for c in conditions if isinstance(c, Mapping)]
    return generation is not None and bool(seen) and max((g for g in seen if isinstance(g, int)), default=-1) == generation


def instance_of(nodeclaim: Mapping[str, Any]) -> str | None:
    """The EC2 instance id in the NodeClaim's `status.providerID`; None when it has none yet."""
    provider_id = str(((nodeclaim.get("status") or {}).get("providerID")) or "")
    if not provider_id:
        return None
    match = _PROVIDER_ID.match(provider_id)
    if match is None:
        raise Refusal(_name(nodeclaim), "status.providerID",
                      f"{provider_id!r} names no EC2 instance (expected aws:///<zone>/i-...)")
    return match.group(1)


def adopted_claim(nodeclaim: Mapping[str, Any], node: Node | None, now: datetime,
                  prices: Mapping[tuple[str, str, str], float] | None = None) -> Claim:
    """The claim carpool keeps for a NodeClaim Karpenter created (see the module docstring); `node` is the
    node whose providerID names its instance, when one joined. Raises `Refusal` naming the field at fault."""
    name = _name(nodeclaim)
    meta = nodeclaim.get("metadata") or {}
    spec = nodeclaim.get("spec") or {}
    status = nodeclaim.get("status") or {}
    nc_labels: Mapping[str, str] = meta.get("labels") or {}
    pool = nc_labels.get(labels.NODEPOOL)
    if not pool:
        raise Refusal(name, f"metadata.labels[{labels.NODEPOOL!r}]", "missing: the NodeClaim names no NodePool")
    nodeclass = str((spec.get("nodeClassRef") or {}).get("name") or "")
    if not nodeclass:
        raise Refusal(name, "spec.nodeClassRef.name", "missing: the NodeClaim names no EC2NodeClass")
    instance = instance_of(nodeclaim)
    created = _time(meta.get("creationTimestamp"), name, "metadata.creationTimestamp") or now
    capacity = _resources(status.get("capacity"), name, "status.capacity")
    allocatable = _resources(status.get("allocatable"), name, "status.allocatable")
    expire_after = str(spec.get("expireAfter") or "")
    if expire_after:
        try:
            parse_duration(expire_after)
        except DurationError as exc:
            raise Refusal(name, "spec.expireAfter", str(exc)) from None
    node_labels = node.labels if node is not None else {}
    instance_type = nc_labels.get(labels.INSTANCE_TYPE) or node_labels.get(labels.INSTANCE_TYPE)
    zone = nc_labels.get(labels.ZONE) or node_labels.get(labels.ZONE)
    capacity_type = nc_labels.get(labels.CAPACITY_TYPE) or node_labels.get(labels.CAPACITY_TYPE)
    registered = node is not None and not any(t.key == labels.UNREGISTERED_TAINT for t in node.taints())
    launched = charges.charged(capacity)
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    return Claim(
        name=name,
        nodepool=pool,
        nodeclass=nodeclass,
        status=ClaimStatus.REGISTERED if registered else ClaimStatus.LAUNCHED,
        created_at=created,
        instance_types=[instance_type] if instance_type else [],
        capacity_type=capacity_type,
        zone=zone,
        reserved=charges.registered(node.capacity(), launched) if registered and node is not None else launched,
        instance_id=instance,
        instance_type=instance_type,
        image_id=str(status.get("imageID") or "") or None,
        max_pods=allocatable.get("pods") or None,
        # Karpenter counts a node's age (expiry, disruption cost) from the NodeClaim's creation
        launched_at=created,
        registered_at=(_condition_time(nodeclaim, "Registered") or now) if registered else None,
        node_name=node.name if registered and node is not None else None,
        price=(prices or {}).get((instance_type or "", zone or "", capacity_type or "")),
        labels=dict(nc_labels),
        allocatable=allocatable,
        adopted=NodeClaimOrigin(uid=str(meta.get("uid") or ""), expire_after=expire_after,
                                nodepool_hash=str(annotations.get(HASH_ANNOTATION) or ""),
                                nodepool_hash_version=str(annotations.get(HASH_VERSION_ANNOTATION) or ""),
                                adopted_at=now),
    )


def ownership_tags(cluster: str) -> dict[str, str]:
    """What carpool adds to an adopted instance's tags: its ownership tag, so every carpool read that finds
    its instances by tag (the clean-up, the registrar, the interruption) finds it. Karpenter's own tags
    stay, so a hand-back to Karpenter finds them as it left them."""
    return {labels.TAG_MANAGED_BY: cluster}


def ownership_labels(cluster: str, claim: Claim) -> dict[str, str]:
    """What carpool adds to an adopted node's labels: the two it knows its nodes by (the disruption
    candidates, `carpool.disruption.candidates.owner_of`), and the image the node runs."""
    out = {labels.OWNED_BY: cluster, labels.CLAIM: claim.name}
    if claim.image_id:
        out[labels.IMAGE_ID] = claim.image_id
    return out


# -- reading the object -------------------------------------------------------------------------------
def _name(nodeclaim: Mapping[str, Any]) -> str:
    return str((nodeclaim.get("metadata") or {}).get("name") or "")


def _condition(nodeclaim: Mapping[str, Any], kind: str) -> bool:
    conditions = (nodeclaim.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions if isinstance(c, Mapping))


def _condition_time(nodeclaim: Mapping[str, Any], kind: str) -> datetime | None:
    conditions = (nodeclaim.get("status") or {}).get("conditions") or []
    for c in conditions:
        if isinstance(c, Mapping) and c.get("type") == kind and c.get("status") == "True":
            try:
                return _time(c.get("lastTransitionTime"), _name(nodeclaim), f"status.conditions[{kind}]")
            except Refusal:
                return None
    return None


def _time(raw: object, name: str, field_path: str) -> datetime | None:
    if raw is None or raw == "":
        return None
    if isinstance(raw, datetime):
        return raw if raw.tzinfo else raw.replace(tzinfo=UTC)
    try:
        parsed = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError:
        raise Refusal(name, field_path, f"{raw!r} is not an RFC 3339 time") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _resources(raw: object, name: str, field_path: str) -> Resources:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise Refusal(name, field_path, f"expected a resource list, got {type(raw).__name__}")
    try:
        return resources.parse(raw)
    except (QuantityError, ValueError) as exc:
        raise Refusal(name, field_path, str(exc)) from None


def _why(claim: Claim, node: Node | None) -> str:
    where = (f"node {node.name}" if claim.status == ClaimStatus.REGISTERED and node is not None
             else f"node {node.name} (registration not finished)" if node is not None else "no node yet (booting)")
    return (f"NodeClaim {claim.name} (NodePool {claim.nodepool}, {claim.instance_type or 'unknown type'} "
            f"{claim.capacity_type or ''} in {claim.zone or 'unknown zone'}, instance {claim.instance_id}, {where}) "
            "created by Karpenter: adopted as it is, nothing replaced")
