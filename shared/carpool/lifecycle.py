"""A launched node's life after it joins: registration and initialization, as Karpenter's NodeClaim
lifecycle controllers define them (pure rules; `carpool.app.register` applies them).

Registration (Karpenter's `registration.go`): as soon as the Node object exists, whatever its readiness,
the node gets what its claim and NodePool promise: the claim's labels, the NodePool template's labels,
annotations and taints, its instance type's labels. `karpenter.sh/unregistered:NoExecute` (put there by
the user data, so nothing runs before this sync) is removed, `karpenter.sh/registered=true` is set and
the termination finalizer `karpenter.sh/termination` added (`syncNode`: a `kubectl delete node` then waits
for carpool's drain and the instance's end, `carpool.app.termination`), in one write. The labels a kubelet may not set on its own Node (`node-restriction.kubernetes.io/`,
`kops.k8s.io/`, other `kubernetes.io`/`k8s.io` keys outside its allowed set: `labels.kubelet_may_set`) are
kept out of the user data, so this write is where they reach the node, before any pod can run on it.
Two deliberate differences from Karpenter:
- labels the node already has keep their value: the kubelet and the cloud controller set them from the
  instance itself, which is the truth about the node;
- startup taints are not added again: the user data already registered the node with them, and carpool
  registers a node up to a watcher period after it appears, by which time the agent that owns a startup
  taint may have removed it; added back, nothing would ever remove it.

Initialization (Karpenter's `initialization.go`): a registered node is initialized once it is Ready, none
of the NodePool's startup taints and none of the known ephemeral taints remain, and every resource its
claim was packed with (e.g. `nvidia.com/gpu`) is reported in its allocatable. Then it is labelled
`karpenter.sh/initialized=true`, which disruption requires of every candidate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from carpool import labels
from carpool.api.k8s import Node
from carpool.api.nodepool import NodePool
from carpool.karpenter_objects import TERMINATION_FINALIZER
from carpool.ports import NodePatch
from carpool.state.models import Claim
from carpool.taints import KNOWN_EPHEMERAL_TAINTS, Taint

TRUE = "true"
#: claim labels under carpool's prefix are bookkeeping (the launch template), not node labels; the node's
#: own carpool labels are set explicitly
_BOOKKEEPING_PREFIX = "carpool.dev/"

#: Karpenter's reasons for an `Initialized` condition still Unknown
NODE_NOT_READY = "NodeNotReady"
STARTUP_TAINTS_EXIST = "StartupTaintsExist"
KNOWN_EPHEMERAL_TAINTS_EXIST = "KnownEphemeralTaintsExist"
RESOURCE_NOT_REGISTERED = "ResourceNotRegistered"


def is_registered(node: Node) -> bool:
    """Registration already ran for this node (its label is written in the same patch that lifts the
    unregistered taint)."""
    return node.labels.get(labels.REGISTERED) == TRUE and not has_unregistered_taint(node)


def is_initialized(node: Node) -> bool:
    return node.labels.get(labels.NODE_INITIALIZED) == TRUE


def has_unregistered_taint(node: Node) -> bool:
    return any(t.key == labels.UNREGISTERED_TAINT for t in node.spec.taints)


def node_labels_of(claim: Claim) -> dict[str, str]:
    """The labels a node of this claim should carry: the claim's (without carpool's bookkeeping keys), the
    ones the user data sets, and the identity of the claim and cluster (which shared launch templates
    cannot carry)."""
    out = {k: v for k, v in claim.labels.items() if not k.startswith(_BOOKKEEPING_PREFIX)}
    out.update({labels.NODEPOOL: claim.nodepool, labels.EC2NODECLASS: claim.nodeclass})
    if claim.capacity_type:
        out[labels.CAPACITY_TYPE] = claim.capacity_type
    if claim.zone:
        out[labels.ZONE] = claim.zone
    if claim.instance_type:
        out[labels.INSTANCE_TYPE] = claim.instance_type
    if claim.image_id:
        out[labels.IMAGE_ID] = claim.image_id
    return out


def claimed_labels(claim: Claim, nodepool: NodePool | None, type_labels: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every label a node of `claim` gets at registration, and its NodeClaim carries (Karpenter's node gets
    its NodeClaim's labels: the provider's instance-type labels under the template's, under the claim's)."""
    template = nodepool.spec.template.metadata.labels if nodepool is not None else {}
    return {**(type_labels or {}), **template, **node_labels_of(claim)}


def registration_patch(node: Node, claim: Claim, cluster: str, nodepool: NodePool | None,
                       type_labels: Mapping[str, str] | None = None,
                       owner: Mapping[str, Any] | None = None) -> NodePatch:
    """The one write that registers `node` for `claim` (see the module docstring); `owner`: the
    ownerReference to the claim's NodeClaim (Karpenter's `syncNode`), when there is one."""
    template = nodepool.spec.template if nodepool is not None else None
    wanted = claimed_labels(claim, nodepool, type_labels)
    sync_taints = node.labels.get(labels.DO_NOT_SYNC_TAINTS) != TRUE
    return NodePatch(
        labels={labels.REGISTERED: TRUE, labels.OWNED_BY: cluster, labels.CLAIM: claim.name},
        labels_if_absent=wanted,
        annotations_if_absent=dict(template.metadata.annotations) if template else {},
        remove_taint_keys=frozenset({labels.UNREGISTERED_TAINT}),
        add_taints=tuple(nodepool.taints()) if nodepool is not None and sync_taints else (),
        add_finalizers=frozenset({TERMINATION_FINALIZER}),  # a delete of the Node waits for its drain
        add_owner_references=(owner,) if owner else (),
    )


def owned_by(node: Node, owner: Mapping[str, Any]) -> bool:
    """Whether the node already names `owner` (an ownerReference, matched by uid) among its owners."""
    return any(ref.uid == owner.get("uid") for ref in node.metadata.owner_references)


def ownership_patch(owner: Mapping[str, Any]) -> NodePatch:
    """The ownerReference to its NodeClaim, for a node registered before it had one."""
    return NodePatch(add_owner_references=(owner,))


def initialization_blocker(node: Node, claim: Claim, startup_taints: Iterable[Taint]) -> str | None:
    """Why `node` is not initialized yet, or None when it is (Karpenter's checks, in its order)."""
    blocked = _first_blocker(node, claim, startup_taints)
    if blocked is None:
        return None
    reason, subject = blocked
    return {
        NODE_NOT_READY: "node is not Ready",
        STARTUP_TAINTS_EXIST: f"startup taint {subject} still exists",
        KNOWN_EPHEMERAL_TAINTS_EXIST: f"known ephemeral taint {subject} still exists",
        RESOURCE_NOT_REGISTERED: f"resource {subject} was requested but is not reported by the node yet",
    }[reason]


def initialization_blocked(node: Node, claim: Claim, startup_taints: Iterable[Taint]) -> tuple[str, str] | None:
    """The same check as Karpenter's `Initialized` condition says it: (reason, message) in
    `initialization.go`'s words, or None when the node is initialized."""
    blocked = _first_blocker(node, claim, startup_taints)
    if blocked is None:
        return None
    reason, subject = blocked
    return reason, {
        NODE_NOT_READY: "Node status is NotReady",
        STARTUP_TAINTS_EXIST: f'StartupTaint "{subject}" still exists',
        KNOWN_EPHEMERAL_TAINTS_EXIST: f'KnownEphemeralTaint "{subject}" still exists',
        RESOURCE_NOT_REGISTERED: f'Resource "{subject}" was requested but not registered',
    }[reason]


def _first_blocker(node: Node, claim: Claim, startup_taints: Iterable[Taint]) -> tuple[str, object] | None:
    """The first of Karpenter's initialization checks that fails, with what it failed on."""
    if not node.is_ready():
        return NODE_NOT_READY, None
    present = node.taints()
    for startup in startup_taints:
        hit = next((t for t in present if t.key == startup.key and t.effect == startup.effect), None)
        if hit is not None:
            return STARTUP_TAINTS_EXIST, hit
    ephemeral = next((t for t in present if is_known_ephemeral(t)), None)
    if ephemeral is not None:
        return KNOWN_EPHEMERAL_TAINTS_EXIST, ephemeral
    allocatable = node.allocatable()
    for name, quantity in sorted(claim.requested.items()):
        if quantity and not allocatable.get(name):
            return RESOURCE_NOT_REGISTERED, name
    return None


def is_known_ephemeral(taint: Taint) -> bool:
    """A taint expected to go away by itself while a node comes up (not-ready, uninitialized...)."""
    if taint.key.startswith(labels.READINESS_TAINT_PREFIX):
        return True
    return any(t.key == taint.key and t.effect == taint.effect for t in KNOWN_EPHEMERAL_TAINTS)


def initialized_patch() -> NodePatch:
    return NodePatch(labels={labels.NODE_INITIALIZED: TRUE})
