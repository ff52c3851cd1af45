"""Which of carpool's instances and claims lost track of each other, and what to do about it (pure).

A provisioner invocation writes its claim as RESERVED, calls CreateFleet, then records the instance on the
claim. The invocation can die at any point (a Lambda timeout, an out-of-memory kill): before CreateFleet
the claim holds its pods' nominations with no instance coming; after it, an instance boots and may join
the cluster and run pods while no claim knows it. These rules put each case right, and are written so a
node that runs pods is never the one that pays for the lost bookkeeping:

- **Repair**: an instance whose tags name a live claim without an instance id (its `karpenter.sh/nodeclaim`
  tag, or its batched request's claims paired as the launch paired them: `fleet.claims_of_instances`)
  gets recorded on that claim (once its node joined, or once the launch deadline has passed, so a
  provisioner still writing its claim is not raced).
- **Adopt**: an instance no claim knows whose node joined (has its providerID) or serves pods gets a claim
  again, built from its tags and its node: it is kept, never killed.
- **Release**: a reservation with no instance after the launch deadline (longer than a provisioner
  invocation can live) is given up, so its pods are provisioned again at once. EC2 is asked first: an
  instance tagged with the claim's name means CreateFleet succeeded, and that is a repair instead.
- **Terminate**: an orphan (our ownership tags, no live claim knows its id or its nodeclaim tag, no node
  joined from it) after a grace period; and a launched claim whose node never joined within the
  registration timeout. A node object that exists for such an instance without being registered (no
  providerID yet) is cordoned and drained before the instance goes.

Data in (DescribeInstances entries, claims, nodes, pod counts, the time), decisions out; the disruption
function (`carpool.app.cleanup`) carries them out.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from carpool import labels, resources
from carpool.api.k8s import Node
from carpool.launch import fleet
from carpool.resources import Resources
from carpool.state import charges
from carpool.state.models import IN_FLIGHT_STATUSES, Claim, ClaimStatus

#: EC2 tag carrying carpool's own clock at launch (instance age is judged with the clock claims use)
CREATED_AT_TAG = "carpool.dev/created-at"


@dataclass(frozen=True)
class Limits:
    """The clean-up's clocks (from `carpool.app.settings.Settings`)."""

    cluster: str
    #: an orphan is left alone this long after launch (EC2's eventual consistency, a slow claim write)
    orphan_grace: timedelta
    #: a reservation without an instance this old is dead: its provisioner invocation cannot be running
    launch_deadline: timedelta
    #: a launched claim whose node has not joined this long after the claim was made is given up
    registration_timeout: timedelta


@dataclass(frozen=True)
class InstanceView:
    """What the rules need of one DescribeInstances entry."""

    instance_id: str
    instance_type: str
    zone: str
    capacity_type: str
    image_id: str | None
    private_dns: str
    tags: Mapping[str, str]
    launched: datetime

    @classmethod
    def from_ec2(cls, inst: Mapping[str, Any]) -> InstanceView:
        tags = {str(t["Key"]): str(t["Value"]) for t in inst.get("Tags") or []}
        spot = inst.get("InstanceLifecycle") == "spot"
        return cls(
            instance_id=str(inst["InstanceId"]),
            instance_type=str(inst.get("InstanceType") or ""),
            zone=str((inst.get("Placement") or {}).get("AvailabilityZone") or ""),
            capacity_type=labels.CAPACITY_SPOT if spot else labels.CAPACITY_ON_DEMAND,
            image_id=inst.get("ImageId"),
            private_dns=str(inst.get("PrivateDnsName") or ""),
            tags=tags,
            launched=_created(tags, inst),
        )

    @property
    def nodeclaim(self) -> str | None:
        return self.tags.get(labels.TAG_NODECLAIM) or None

    def owned_by(self, cluster: str) -> bool:
        """Both ownership tags carpool writes at launch name this cluster."""
        return (self.tags.get(labels.TAG_MANAGED_BY) == cluster
                and self.tags.get(labels.TAG_CLUSTER_OWNED.format(cluster=cluster)) == "owned")


@dataclass(frozen=True)
class Repair:
    """Record `instance` on the live claim `claim` (which has no instance id)."""

    claim: Claim
    instance: InstanceView
    why: str


@dataclass(frozen=True)
class Adoption:
    """Give the instance of a joined node, which no live claim knows, a claim again."""

    claim: Claim
    instance: InstanceView
    node: str
    why: str


@dataclass(frozen=True)
class Release:
    """Give up a reservation whose instance never came (frees its pods' nominations and pool usage)."""

    claim: Claim
    why: str


@dataclass(frozen=True)
class Termination:
    """Terminate an instance; `node` (not registered, no providerID) is cordoned and drained first;
    `claim` is released once the instance is gone."""

    instance_id: str
    why: str
    reason: str  # "orphan" | "registration-timeout"
    node: str | None = None
    claim: Claim | None = None


@dataclass
class Decisions:
    repairs: list[Repair] = field(default_factory=list)
    adoptions: list[Adoption] = field(default_factory=list)
    releases: list[Release] = field(default_factory=list)
    terminations: list[Termination] = field(default_factory=list)
    #: instance id or claim name -> why it is left alone for now
    waiting: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Nodes:
    """Nodes by the instance in their providerID, and nodes without one by name."""

    by_instance: Mapping[str, Node]
    unregistered: Mapping[str, Node]

    @classmethod
    def of(cls, nodes: Iterable[Node]) -> _Nodes:
        by_instance: dict[str, Node] = {}
        unregistered: dict[str, Node] = {}
        for node in nodes:
            iid = node.instance_id()
            if iid:
                by_instance[iid] = node
            elif not node.provider_id:
                unregistered[node.name] = node
        return cls(by_instance, unregistered)

    def registered(self, inst: InstanceView) -> Node | None:
        """The node that joined from this instance (its providerID names it)."""
        return self.by_instance.get(inst.instance_id)

    def pending(self, inst: InstanceView) -> Node | None:
        """A node named after the instance that has no providerID yet (the cloud node controller has not
        initialized it), so it cannot be told apart from another instance of that name by id."""
        return self.unregistered.get(inst.private_dns) if inst.private_dns else None


def decide(instances: Sequence[InstanceView], claims: Sequence[Claim], nodes: Iterable[Node],
           serving: Mapping[str, int], now: datetime, limits: Limits,
           capacities: Mapping[str, Resources] | None = None) -> Decisions:
    """All clean-up decisions of one run.

    `instances` are the running/pending instances (only those carrying our ownership tags are judged),
    `claims` the live ones, `serving` the number of pods each node runs that would need a new home (not
    DaemonSet, static or finished pods), `capacities` what a node of each instance type has (as a launch
    sizes it), which an adopted claim is charged."""
    out = Decisions()
    known = _Nodes.of(nodes)
    owned = [i for i in instances if i.owned_by(limits.cluster)]
    # each instance's claim from its tags: its own claim tag, or its batched request's pairing
    named = fleet.claims_of_instances((i.instance_id, i.tags) for i in owned)
    by_instance = {c.instance_id: c for c in claims if c.instance_id}
    by_name = {c.name: c for c in claims}
    repaired: set[str] = set()
    for inst in owned:
        if inst.instance_id in by_instance:
            continue
        tagged = by_name.get(named.get(inst.instance_id, ""))
        if tagged is not None and not tagged.instance_id:
            if _repair(inst, tagged, known, now, limits, out):
                repaired.add(tagged.name)
                by_name[tagged.name] = out.repairs[-1].claim  # a second instance with that tag is not its
            continue
        _unclaimed(inst, tagged, known, serving, set(by_name), now, limits, out,
                   (capacities or {}).get(inst.instance_type, {}))
    # a claim keeps its reservation while an instance launched for it runs that no other claim records
    launched_for = {named[i.instance_id] for i in owned if i.instance_id in named and i.instance_id not in by_instance}
    _stale_reservations(claims, launched_for, repaired, now, limits, out)
    _registration_timeouts(claims, owned, known, serving, now, limits, out)
    return out


def _repair(inst: InstanceView, claim: Claim, known: _Nodes, now: datetime, limits: Limits, out: Decisions) -> bool:
    node = known.registered(inst)
    if node is None and now - claim.created_at < limits.launch_deadline:
        out.waiting[inst.instance_id] = (f"claim {claim.name} has no instance id yet; its provisioner may still be "
                                         "writing it")
        return False
    why = (f"node {node.name} joined from instance {inst.instance_id}" if node is not None
           else f"instance {inst.instance_id} was launched {_age(now, inst.launched)} ago")
    out.repairs.append(Repair(repaired(claim, inst), inst, f"{why}, tagged for claim {claim.name} which lacks it"))
    return True


def _unclaimed(inst: InstanceView, tagged: Claim | None, known: _Nodes, serving: Mapping[str, int],
               names: set[str], now: datetime, limits: Limits, out: Decisions, type_capacity: Resources) -> None:
    """An instance no live claim records: adopted when its node joined or serves pods, else an orphan."""
    registered = known.registered(inst)
    pending = known.pending(inst)
    node = registered or pending
    if node is not None and (registered is not None or serving.get(node.name, 0) > 0):
        name = inst.nodeclaim if inst.nodeclaim and inst.nodeclaim not in names else f"adopted-{inst.instance_id}"
        what = f"{serving.get(node.name, 0)} pods" if serving.get(node.name, 0) else "no pods yet"
        why = (f"instance {inst.instance_id} is known to no claim but node {node.name} joined from it ({what}): "
               f"adopted as claim {name}")
        out.adoptions.append(Adoption(adopted(inst, node, name, now, type_capacity), inst, node.name, why))
        return
    if tagged is not None:  # its tag names a claim that records another instance
        why = f"instance {inst.instance_id} is tagged for claim {tagged.name}, which records {tagged.instance_id}"
    else:
        why = f"instance {inst.instance_id} is known to no claim and no node joined from it"
    if now - inst.launched < limits.orphan_grace:
        out.waiting[inst.instance_id] = f"{why}; within the orphan grace period"
        return
    out.terminations.append(Termination(inst.instance_id, f"{why}: terminated as an orphan", "orphan",
                                        node=pending.name if pending is not None else None))


def _stale_reservations(claims: Sequence[Claim], tagged: set[str], repaired: set[str],
                        now: datetime, limits: Limits, out: Decisions) -> None:
    """RESERVED claims with no instance past the launch deadline: released unless EC2 has an instance
    launched for them, `tagged` (its claim tag, or its batched request's tag paired to them: then
    `_repair` takes care of them once the deadline passed or the node joined, however slowly it boots).
    The deadline counts from the invocation's start, and outlasts any invocation: past it, no CreateFleet
    for the claim can still be sent, and one that was sent launched an instance that carries the claim."""
    for claim in claims:
        if claim.status != ClaimStatus.RESERVED or claim.instance_id or claim.name in repaired:
            continue
        age = now - claim.created_at
        if age < limits.launch_deadline or claim.name in tagged:
            continue
        out.releases.append(Release(claim, f"claim {claim.name} reserved {_age(now, claim.created_at)} ago has no "
                                           f"instance (launch deadline {_age_text(limits.launch_deadline)}): released, "
                                           f"its {len(claim.pods)} pods are provisioned again"))


def _registration_timeouts(claims: Sequence[Claim], owned: Sequence[InstanceView], known: _Nodes,
                           serving: Mapping[str, int], now: datetime, limits: Limits, out: Decisions) -> None:
    """Launched claims whose node never joined: the instance is terminated (its unregistered node object,
    if any, drained first) and the claim released, so its pods can be provisioned again. A claim whose
    node joined is registered in Karpenter's sense (the registrar finishes it), and a node serving pods
    is never killed: neither is timed out."""
    views = {i.instance_id: i for i in owned}
    for claim in claims:
        if claim.status not in IN_FLIGHT_STATUSES or not claim.instance_id:
            continue
        if now - claim.created_at < limits.registration_timeout:
            continue
        inst = views.get(claim.instance_id)
        if inst is not None and known.registered(inst) is not None:
            out.waiting[claim.name] = f"node of claim {claim.name} joined; its registration is not finished yet"
            continue
        pending = known.pending(inst) if inst is not None else None
        if pending is not None and serving.get(pending.name, 0) > 0:
            out.waiting[claim.name] = f"node {pending.name} of claim {claim.name} serves pods; not timed out"
            continue
        out.terminations.append(Termination(
            claim.instance_id, f"claim {claim.name} never registered within {_age_text(limits.registration_timeout)}: "
                               "terminated", "registration-timeout",
            node=pending.name if pending is not None else None, claim=claim))


# -- building claims ------------------------------------------------------------------------------------
def repaired(claim: Claim, inst: InstanceView) -> Claim:
    """The claim with what CreateFleet would have told the provisioner recorded on it."""
    fixed = claim.model_copy(deep=True)
    fixed.instance_id = inst.instance_id
    fixed.instance_type = inst.instance_type or fixed.instance_type
    fixed.zone = inst.zone or fixed.zone
    fixed.capacity_type = inst.capacity_type
    fixed.image_id = inst.image_id or fixed.image_id
    fixed.launched_at = fixed.launched_at or inst.launched
    if fixed.status == ClaimStatus.RESERVED:
        fixed.status = ClaimStatus.LAUNCHED
    return fixed


def adopted(inst: InstanceView, node: Node, name: str, now: datetime, type_capacity: Resources | None = None) -> Claim:
    """A claim for a node no claim knows, from its instance's tags and the node's labels and capacity.

    It is REGISTERED when the node is past registration (no `karpenter.sh/unregistered` taint), else
    LAUNCHED so the registrar finishes registering it. It is charged against its pool's limits what a
    registered node is (`carpool.state.charges.registered`): the node's own reported capacity, where it
    reports a resource as zero or not at all its instance type's (`type_capacity`: GPUs before their
    device plugin advertises them), and one node (a node that exists counts, whatever the limit). It
    records no allocatable:
    that is what offers an in-flight claim's room to pending pods, and this node's room is whatever its
    running pods leave, which the scheduler sees on the node itself."""
    node_labels = node.labels
    unregistered = any(t.key == labels.UNREGISTERED_TAINT for t in node.taints())
    reserved = charges.registered(node.capacity(), charges.charged(type_capacity or {}))
    return Claim(
        name=name,
        nodepool=inst.tags.get(labels.TAG_NODEPOOL) or node_labels.get(labels.NODEPOOL, ""),
        nodeclass=inst.tags.get(labels.TAG_NODECLASS) or node_labels.get(labels.EC2NODECLASS, ""),
        status=ClaimStatus.LAUNCHED if unregistered else ClaimStatus.REGISTERED,
        created_at=inst.launched,
        instance_types=[inst.instance_type] if inst.instance_type else [],
        capacity_type=node_labels.get(labels.CAPACITY_TYPE) or inst.capacity_type,
        zone=inst.zone or node_labels.get(labels.ZONE),
        reserved=reserved,
        instance_id=inst.instance_id,
        instance_type=inst.instance_type or node_labels.get(labels.INSTANCE_TYPE),
        image_id=inst.image_id or node_labels.get(labels.IMAGE_ID),
        launched_at=inst.launched,
        registered_at=None if unregistered else now,
        node_name=None if unregistered else node.name,
    )


def charge_due(claim: Claim, node: Node | None, launched: Resources) -> Resources | None:
    """The charge a registered claim should hold and does not (a claim stored holding its largest option
    or missing a resource, before a launch or a registration re-charged it): its node's
    (`carpool.state.charges.registered`, `launched` what a node of its type holds:
    `carpool.state.charges.charged`). None when it holds it already, or when it is not registered or its
    node is not known (a launched claim is charged its type when its launch is recorded)."""
    if claim.status != ClaimStatus.REGISTERED or node is None or node.name != claim.node_name:
        return None
    due = charges.registered(_capacity(tuple(node.status.capacity.items())), launched or claim.reserved)
    if due == claim.reserved or not charges.difference(due, claim.reserved):
        return None
    return due


@functools.lru_cache(maxsize=1024)
def _capacity(raw: tuple[tuple[str, Any], ...]) -> Resources:
    """A node's capacity parsed once per distinct figure (nodes of a type report the same): every
    disruption run looks at every registered claim's node."""
    return resources.parse(dict(raw))


# -- time -------------------------------------------------------------------------------------------------
def _created(tags: Mapping[str, str], inst: Mapping[str, Any]) -> datetime:
    """Launch time by carpool's clock (the `carpool.dev/created-at` tag), EC2's LaunchTime otherwise."""
    raw = tags.get(CREATED_AT_TAG) or inst.get("LaunchTime")
    if isinstance(raw, datetime):
        return raw if raw.tzinfo else raw.replace(tzinfo=UTC)
    if isinstance(raw, str):
        try:
            parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            parsed = None
        if parsed is not None:
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return datetime.min.replace(tzinfo=UTC)


def _age(now: datetime, since: datetime) -> str:
    return _age_text(now - since)


def _age_text(delta: timedelta) -> str:
    return f"{int(delta.total_seconds())}s"
