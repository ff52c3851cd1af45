"""A snapshot of the cluster as disruption sees it: one `Candidate` per node carpool launched, and the
scheduler inputs (existing nodes' free room, pending pods) consolidation simulates with.

Ownership is checked twice, on purpose (Cluster Autoscaler coexistence): a node is a candidate only if it
carries `carpool.dev/owned-by=<cluster>` **and** names a claim the ledger knows. A managed node group's node,
another cluster's node, or a node whose claim was lost is never disrupted by carpool; it still counts as
room other nodes' pods may move to, because the kube-scheduler would use it too.

Initialization gates voluntary disruption as it does in Karpenter (`StateNode.ValidateNodeDisruptable`):
a node carpool launched is a candidate for emptiness, drift, expiry and consolidation only once it is
labelled `karpenter.sh/initialized=true` (Ready, startup taints gone, extended resources reported; see
`carpool.lifecycle`). Until then its pods may still be arriving and its room is not what it will be, and
neither is it room to move other pods to (Karpenter refuses a consolidation whose pods would land on an
uninitialized node). Repair still sees it: a node that never becomes Ready is unhealthy either way.

Room already promised is not free room (Karpenter's consolidation simulation schedules pending and
nominated pods along with the candidates' pods). The pods nominated to a registered node's claim and not
bound yet take that node's room here: a node is initialized a moment before the kube-scheduler binds the
pods it was launched for (their backoff), and a disruption run in between would otherwise move another
node's pods into it, send the wave back to pending and launch again. Those of them the node has no room
for (the kube-scheduler packed other pods there) are pending pods like any other (`ClusterView.pending`):
they wait for a new node, and consolidation waits with them (`carpool.disruption.consolidation`). The other pending pods' room is
reserved by the simulation first (`ClusterView.pending`); pods nominated to a claim still in flight need
none, since that claim is never room for consolidation.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from carpool import labels, resources
from carpool.api.k8s import Node, Pod, PodDisruptionBudget
from carpool.disruption import podview, protection
from carpool.disruption.podview import PodView
from carpool.resources import CPU, MEMORY, Resources
from carpool.scheduling import inputs as si
from carpool.state.models import Claim, ClaimStatus, NodeClaimOrigin

DELETION_COST = podview.DELETION_COST


@dataclass(frozen=True)
class Candidate:
    """One node carpool launched, with everything a disruption rule looks at."""

    node: str
    claim: str
    pool: str
    nodeclass: str
    instance_type: str
    capacity_type: str
    zone: str
    #: hourly price of the offering it runs on (None when unknown: it can be deleted, not replaced)
    price: float | None
    launched_at: datetime
    registered: bool
    ready: bool
    not_ready_since: datetime | None
    labels: Mapping[str, str]
    allocatable: Resources
    #: requests of every pod on it (DaemonSet pods included)
    requested: Resources
    #: the pods that need a new home if it goes (not DaemonSet, static or finished pods)
    pods: tuple[si.PodSpec, ...]
    image_id: str | None
    spec_hash: str | None
    #: when its set of pods last changed: consolidateAfter counts from here
    quiet_since: datetime
    #: Karpenter's eviction cost of its pods (priority and pod-deletion-cost aware)
    eviction_cost: float
    #: why voluntary disruption is blocked by an annotation or a pod under two PDBs
    protected: str | None
    #: PDB key -> how many of its pods the PDB selects
    pdbs: Mapping[str, int] = field(default_factory=dict)
    #: the node object's own protection (its do-not-disrupt annotation), which no grace period overrides
    node_protected: str | None = None
    #: a disruption of this node is already in progress
    disrupting: bool = False
    #: why it must stay for now (it is the replacement of a disrupting node, or pods are nominated to it)
    reserved: str | None = None
    #: the Karpenter NodeClaim its claim was adopted from (`carpool.adoption`): expiry and static drift
    #: follow what the NodeClaim says; None for nodes carpool launched
    adopted: NodeClaimOrigin | None = None

    @property
    def empty(self) -> bool:
        return not self.pods

    @property
    def initialized(self) -> bool:
        """Registered, Ready and labelled initialized: what Karpenter may disrupt voluntarily."""
        return self.registered and self.ready and node_initialized(self.labels)

    def utilization(self) -> float:
        """The larger of its cpu and memory request ratios (0..1), for logs and ordering."""
        ratios = [self.requested.get(r, 0) / self.allocatable[r] for r in (CPU, MEMORY) if self.allocatable.get(r)]
        return max(ratios, default=0.0)


@dataclass
class ClusterView:
    """Candidates plus the scheduler inputs a consolidation simulation needs."""

    candidates: list[Candidate]
    #: every Ready, schedulable node (carpool's or not) with its free room
    existing: list[si.ExistingNode]
    #: pods waiting for a node and nominated to no claim still coming nor to a node here: consolidation
    #: reserves their room first (the room of pods nominated to a node's claim is already taken off that
    #: node's room in `existing`)
    pending: list[si.PodSpec]
    #: PDB key -> evictions allowed now
    pdb_allowed: dict[str, int]
    #: nodes that are not candidates, and why
    ignored: dict[str, str]

    def candidate(self, node: str) -> Candidate | None:
        return next((c for c in self.candidates if c.node == node), None)


def pods_digest(pod_keys: Iterable[str]) -> str:
    """A short digest of the set of pods on a node; when it changes, consolidateAfter starts again."""
    return hashlib.sha256("\n".join(sorted(pod_keys)).encode()).hexdigest()[:16]


def reschedulable(pod: Pod) -> bool:
    return not (pod.is_daemonset_pod() or pod.is_static_pod() or pod.is_terminal())


def eviction_cost(pod: Pod) -> float:
    """Karpenter's per-pod eviction cost (see `podview.eviction_cost`)."""
    return podview.eviction_cost(pod.annotations, pod.spec.priority)


def node_initialized(node_labels: Mapping[str, str]) -> bool:
    return node_labels.get(labels.NODE_INITIALIZED) == "true"


def owner_of(node: Node, cluster: str, claims: Mapping[str, Claim]) -> tuple[Claim | None, str | None]:
    """The node's claim when carpool owns it, else why it is not carpool's to disrupt."""
    owner = node.labels.get(labels.OWNED_BY)
    if owner is None:
        group = node.labels.get(labels.EKS_NODEGROUP)
        return None, f"managed node group {group} (not launched by carpool)" if group else "not launched by carpool"
    if owner != cluster:
        return None, f"launched by carpool for cluster {owner!r}, this is {cluster!r}"
    claim = claims.get(node.labels.get(labels.CLAIM, ""))
    if claim is None:
        return None, f"its claim {node.labels.get(labels.CLAIM)!r} is not in the ledger"
    if claim.node_name not in (None, node.name):
        return None, f"its claim {claim.name} belongs to node {claim.node_name}"
    return claim, None


def build(
    nodes: Sequence[Node],
    pods: Sequence[PodView | Pod],
    claims: Sequence[Claim],
    pdbs: Sequence[PodDisruptionBudget],
    cluster: str,
    now: datetime,
    nominated: Mapping[str, str] | None = None,
) -> ClusterView:
    """The view of one disruption run. `pods` are the unfinished pods (`PodView`s as the disruption pass
    reads them; `Pod` models are converted); `nominated` is the ledger's pod -> claim nominations."""
    nominated = nominated or {}
    views = [p if isinstance(p, PodView) else podview.from_pod(p) for p in pods]
    by_name = {c.name: c for c in claims}
    bound: dict[str, list[PodView]] = {}
    for p in views:
        if p.node and not p.terminal:
            bound.setdefault(p.node, []).append(p)
    targets = _replacement_targets(claims)
    held = set(nominated.values())
    selecting = protection.PdbIndex(pdbs)
    waiting = _waiting(views)
    coming = _coming_to(waiting, nominated, by_name)
    view = ClusterView([], [], _pending(waiting, nominated, by_name, {n.name for n in nodes}),
                       protection.allowances(pdbs, views, selecting), {})
    for node in sorted(nodes, key=lambda n: n.name):
        on_node = bound.get(node.name, [])
        claim, why_not = owner_of(node, cluster, by_name)
        allocatable = node.allocatable() or (dict(claim.allocatable) if claim else {})
        requested = resources.sum_all(p.requests for p in on_node)
        if _schedulable(node) and (claim is None or node_initialized(node.labels)):
            # the room of the pods nominated to this node's claim is theirs: the kube-scheduler binds them
            # here next, so consolidation must not move another node's pods into it (Karpenter's
            # simulation schedules pending and nominated pods along with the candidates' pods)
            incoming, overflow = _within(coming.get(node.name, []), resources.subtract(allocatable, requested))
            # nominated here but without room here (the kube-scheduler packed other pods onto the node): they
            # wait for a new node, as Karpenter's simulation of the pending pods finds
            view.pending.extend(p.spec for p in overflow if p.spec is not None)
            taken = resources.add(requested, resources.sum_all(p.requests for p in incoming))
            view.existing.append(si.ExistingNode(
                node.name, dict(node.labels), resources.subtract(allocatable, taken), tuple(node.taints()),
                tuple(p.spec for p in (*on_node, *incoming) if p.spec is not None), node.labels.get(labels.NODEPOOL)))
        if claim is None:
            view.ignored[node.name] = why_not or ""
            continue
        reserved = targets.get(claim.name) or ("pods are nominated to it" if claim.name in held else None)
        view.candidates.append(_candidate(node, claim, on_node, allocatable, requested, selecting, now, reserved))
    return view


def _candidate(node: Node, claim: Claim, on_node: list[PodView], allocatable: Resources, requested: Resources,
               selecting: protection.PdbIndex, now: datetime, reserved: str | None) -> Candidate:
    movable = sorted((p for p in on_node if p.reschedulable), key=lambda p: p.key)
    counts, multi = protection.membership(movable, selecting)
    node_protected = protection.node_protection(node)
    protected = node_protected or next((p.protection for p in movable if p.protection), None) or multi
    lab = node.labels
    return Candidate(
        node=node.name,
        claim=claim.name,
        pool=claim.nodepool,
        nodeclass=claim.nodeclass,
        instance_type=lab.get(labels.INSTANCE_TYPE) or claim.instance_type or "",
        capacity_type=lab.get(labels.CAPACITY_TYPE) or claim.capacity_type or "",
        zone=lab.get(labels.ZONE) or claim.zone or "",
        price=claim.price,
        launched_at=claim.launched_at or claim.created_at,
        registered=claim.status == ClaimStatus.REGISTERED,
        ready=node.is_ready(),
        not_ready_since=_not_ready_since(node, claim),
        labels=dict(lab),
        allocatable=allocatable,
        requested=requested,
        pods=tuple(p.spec for p in movable if p.spec is not None),
        image_id=lab.get(labels.IMAGE_ID) or claim.image_id,
        spec_hash=claim.spec_hash,
        quiet_since=quiet_since(claim, [p.key for p in movable], now),
        eviction_cost=sum(p.eviction_cost for p in movable),
        protected=protected,
        pdbs=counts,
        node_protected=node_protected,
        disrupting=claim.disruption is not None,
        reserved=reserved,
        adopted=claim.adopted,
    )


def quiet_since(claim: Claim, pod_keys: Iterable[str], now: datetime) -> datetime:
    """When the node's pods last changed, as the executor recorded it; `now` when they just changed (or
    were never recorded), so consolidateAfter never counts time nobody observed."""
    if claim.pods_changed_at is not None and claim.pods_digest == pods_digest(pod_keys):
        return claim.pods_changed_at
    return now


def _not_ready_since(node: Node, claim: Claim) -> datetime | None:
    if node.is_ready():
        return None
    cond = next((c for c in node.status.conditions if c.type == "Ready"), None)
    if cond is not None and cond.last_transition_time is not None:
        return cond.last_transition_time
    return node.metadata.creation_timestamp or claim.registered_at or claim.launched_at or claim.created_at


def _schedulable(node: Node) -> bool:
    """Room the kube-scheduler could put a moved pod into: Ready, not cordoned, not being disrupted."""
    if not node.is_ready() or node.spec.unschedulable:
        return False
    return not any(t.key == labels.DISRUPTED_TAINT for t in node.taints())


def _replacement_targets(claims: Sequence[Claim]) -> dict[str, str]:
    """Replacement claim -> why it must not be disrupted while the node it replaces drains."""
    out: dict[str, str] = {}
    for c in claims:
        for name in c.disruption.replaced_by if c.disruption is not None else ():
            out[name] = f"it replaces node {c.node_name or c.name}, which is still draining"
    return out


def _waiting(pods: Sequence[PodView]) -> list[PodView]:
    """Pods waiting for a node (not bound, not on their way out), in key order."""
    return [p for p in sorted(pods, key=lambda p: p.key) if p.spec is not None and not p.node and not p.terminating]


def _within(pods: Sequence[PodView], room: Resources) -> tuple[list[PodView], list[PodView]]:
    """The pods that fit `room` one after the other, and those that do not."""
    kept, over = [], []
    for p in pods:
        if resources.fits(p.requests, room):
            room = resources.subtract(room, p.requests)
            kept.append(p)
        else:
            over.append(p)
    return kept, over


def _coming_to(waiting: Sequence[PodView], nominated: Mapping[str, str],
               claims: Mapping[str, Claim]) -> dict[str, list[PodView]]:
    """Node name -> the waiting pods nominated to the claim of that (registered) node."""
    out: dict[str, list[PodView]] = {}
    for p in waiting:
        claim = claims.get(nominated.get(p.key, ""))
        if claim is not None and claim.node_name:
            out.setdefault(claim.node_name, []).append(p)
    return out


def _pending(waiting: Sequence[PodView], nominated: Mapping[str, str], claims: Mapping[str, Claim],
             nodes: set[str]) -> list[si.PodSpec]:
    """The waiting pods whose room consolidation must reserve on the existing nodes: every one but those
    nominated to a claim still coming (its node is not room for consolidation, and its room is theirs) or
    to a node of the cluster (their room is taken on that node, `_coming_to`)."""
    out = []
    for p in waiting:
        claim = claims.get(nominated.get(p.key, ""))
        if claim is None or (claim.node_name is not None and claim.node_name not in nodes):
            out.append(p.spec)
    return [s for s in out if s is not None]
