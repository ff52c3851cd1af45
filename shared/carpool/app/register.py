"""The registrar: a node joined (or changed, or left); take it through registration and initialization
(`carpool.lifecycle`), settle its claim and learn what it really offers.

Every event is handled as a reconcile of the node as the API has it now, so repeated, late or
out-of-order events are harmless: registration writes only what the node lacks, the claim is marked once,
the node is labelled initialized once and its capacity is learned at that moment only.

The claim leaves the in-flight set (`mark_registered`, after which its pods' nominations hold for
`NOMINATION_HOLD_AFTER_REGISTRATION` only) once the node is Ready, not as soon as it registers: until
then the kube-scheduler cannot bind those pods, and the provisioner must go on counting the node's room
for them rather than launch another node.

Once the node is registered its instance gets its claim's name (`karpenter.sh/nodeclaim`), as Karpenter's
nodeclaim tagging controller tags instances after registration instead of in the launch path: at launch
an instance of a batched CreateFleet carries only the claims of its request (`carpool.dev/fleet-claims`),
paired with its own claim by the same rule everywhere (`carpool.app.instances`). By then the claim records
its instance, so nothing in crash recovery waits on this tag; it is what operators filter instances by.

Learning is the fix for the capacity-cache seed bug: the observation is keyed by the instance type and
the AMI the node actually runs, and it is stored only when that AMI is the one the strict mapping picks
for the node, so a node on an unexpected image can never poison the estimates for the right one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from carpool import capacity, k8s_events, labels, lifecycle
from carpool.api.events import NodeDeletedEvent, NodeRegisteredEvent
from carpool.api.k8s import Node
from carpool.api.nodepool import NodePool
from carpool.app import config_guard, images, instances, nodeclaims, recorder, standstill, startup
from carpool.app.wiring import Dependencies
from carpool.ports import NodeConflict, NodeGone
from carpool.resources import Resources
from carpool.state import charges
from carpool.state.models import ACTIVE_STATUSES, Claim, ClaimStatus

log = logging.getLogger(__name__)


@dataclass
class RegisterSummary:
    #: nodes whose registration write ran (unregistered taint lifted, labels and taints synced)
    registered: list[str] = field(default_factory=list)
    #: nodes whose claim was marked registered (the node is Ready)
    claimed: list[str] = field(default_factory=list)
    initialized: list[str] = field(default_factory=list)
    #: node -> why it is not initialized yet
    waiting: dict[str, str] = field(default_factory=dict)
    #: claims that never recorded their instance, repaired from the instance's tags
    repaired: list[str] = field(default_factory=list)
    #: instances tagged with their claim's name once their node registered
    tagged: list[str] = field(default_factory=list)
    learned: list[str] = field(default_factory=list)
    not_learned: dict[str, str] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    ignored: dict[str, str] = field(default_factory=dict)


def run(batch: dict[str, NodeRegisteredEvent | NodeDeletedEvent], deps: Dependencies) -> tuple[RegisterSummary, dict[str, str]]:
    """Handler entry. A node whose registration failed (another writer kept changing it, an API or AWS
    error) is retried on its own: its message id is returned, the batch's other nodes go on."""
    summary = RegisterSummary()
    # while Karpenter's controller runs, its nodes are its own to register: every record comes back later
    stood = standstill.karpenter_active(deps, "registrar")
    stood = stood or config_guard.unusable_config(deps, "registrar")  # no pools to act for: the same
    if stood:
        return summary, dict.fromkeys(batch, stood)
    retry: dict[str, str] = {}
    for message_id, event in batch.items():
        if event.detail.cluster != deps.settings.cluster_name:
            summary.ignored[event.id] = f"event for cluster {event.detail.cluster!r}"
            log.info("ignoring %s for another cluster %s", event.detail_type, event.detail.cluster)
        elif isinstance(event, NodeRegisteredEvent):
            try:
                reconcile(event.detail.node.name, deps, summary)
            except NodeConflict as exc:
                retry[message_id] = str(exc)
            except Exception as exc:  # noqa: BLE001 - one node's trouble must not hold back the batch's others
                log.exception("registering node %s failed; the event will be retried", event.detail.node.name)
                retry[message_id] = f"{type(exc).__name__}: {exc}"
        else:
            _deleted(event.detail.node_name, event.detail.provider_id, deps, summary)
    return summary, retry


def reconcile(node_name: str, deps: Dependencies, summary: RegisterSummary) -> None:
    """Registration, then the claim, then initialization, for the node as it is now."""
    node = deps.cluster.get_node(node_name)
    if node is None:
        summary.ignored[node_name] = "node no longer exists"
        return
    owner = node.labels.get(labels.OWNED_BY)
    if owner not in (None, deps.settings.cluster_name):
        summary.ignored[node.name] = f"node launched by carpool for cluster {owner!r}"
        return
    claim = claim_of(node, deps, summary)
    if claim is None:
        summary.ignored[node.name] = f"no claim for instance {node.instance_id()}"
        log.info("node %s (instance %s) has no claim carpool knows; left alone", node.name, node.instance_id())
        return
    pool = _nodepool(claim.nodepool, deps)
    # the NodeClaim first (created if the launch could not), so the registration write owns the node by it
    nodeclaim = nodeclaims.read(deps, claim.name) or nodeclaims.node_changed(deps, claim, pool, node, None)
    try:
        node = _register(node, claim, pool, deps, summary, nodeclaims.owner_reference(nodeclaim))
        claim = _claim_registered(node, claim, deps, summary)
        node = _initialize(node, claim, pool, deps, summary)
    except NodeGone:
        summary.ignored[node.name] = "node deleted while carpool registered it"
        return
    if nodeclaim is not None:
        nodeclaims.node_changed(deps, claim, pool, node, nodeclaim)


def claim_of(node: Node, deps: Dependencies, summary: RegisterSummary | None = None) -> Claim | None:
    """The node's live claim. The instance in its providerID decides: a claim label is only a shortcut
    (one read by key instead of a search) trusted when its claim names the same instance; else the
    ledger is searched by instance; else the instance's own `karpenter.sh/nodeclaim` tag names the claim,
    which is repaired when it never learned its instance (see `carpool.app.instances`)."""
    instance_id = node.instance_id()
    label = node.labels.get(labels.CLAIM)
    labelled = deps.ledger.get(label) if label else None
    if labelled is not None and labelled.status in ACTIVE_STATUSES and labelled.instance_id == instance_id:
        return labelled
    if not instance_id:
        return None
    found = deps.ledger.find_by_instance(instance_id)
    if found is not None and found.status in ACTIVE_STATUSES:
        return found
    tagged = instances.claim_by_tag(instance_id, deps)
    if tagged is None:
        return None
    claim, repaired = tagged
    if repaired and summary is not None:
        summary.repaired.append(claim.name)
    return claim


def _register(node: Node, claim: Claim, pool: NodePool | None, deps: Dependencies, summary: RegisterSummary,
              owner: Mapping[str, Any] | None = None) -> Node:
    cluster = deps.settings.cluster_name
    if (lifecycle.is_registered(node) and node.labels.get(labels.CLAIM) == claim.name
            and node.labels.get(labels.OWNED_BY) == cluster):
        if owner is not None and not lifecycle.owned_by(node, owner):
            return deps.cluster.patch_node(node.name, lifecycle.ownership_patch(owner))
        return node
    if labels.REGISTERED not in node.labels and not lifecycle.has_unregistered_taint(node):
        log.warning("node %s joined without the %s taint: pods may have started before its labels and taints "
                    "were synced", node.name, labels.UNREGISTERED_TAINT)
    patch = lifecycle.registration_patch(node, claim, cluster, pool, _type_labels(node, claim, deps), owner)
    before, node = node, deps.cluster.patch_node(node.name, patch)
    startup.node_registered(before, node, claim.nodepool, deps.clock())
    summary.registered.append(node.name)
    log.info("registered node %s for claim %s", node.name, claim.name)
    instance = node.instance_id() or claim.instance_id or "-"
    instance_type = node.labels.get(labels.INSTANCE_TYPE) or claim.instance_type or "-"
    recorder.record([k8s_events.launched(node.name, claim.name, instance, instance_type, claim.launched_at),
                     k8s_events.registered(node.name, claim.name, instance, instance_type)], deps)
    _tag_instance(node, claim, deps, summary)
    return node


def _tag_instance(node: Node, claim: Claim, deps: Dependencies, summary: RegisterSummary) -> None:
    """CreateTags with the claim's name on the node's instance (Karpenter's nodeclaim tagging controller,
    which waits for the node too). Registration does not depend on it: a failure is only logged."""
    instance_id = node.instance_id() or claim.instance_id
    if not instance_id:
        return
    try:
        deps.compute.tag_instance(instance_id, {labels.TAG_NODECLAIM: claim.name})
    except Exception:
        log.exception("could not tag instance %s of node %s with its claim %s", instance_id, node.name, claim.name)
        return
    summary.tagged.append(instance_id)


def _claim_registered(node: Node, claim: Claim, deps: Dependencies, summary: RegisterSummary) -> Claim:
    if not node.is_ready() or (claim.status == ClaimStatus.REGISTERED and claim.node_name == node.name):
        return claim
    marked = deps.ledger.mark_registered(claim.name, node.name, deps.clock(), _node_charge(node, claim, deps))
    if marked is None:
        return claim
    summary.claimed.append(node.name)
    return marked


def _node_charge(node: Node, claim: Claim, deps: Dependencies) -> Resources:
    """What the registered node holds against its pool: its `status.capacity` (Karpenter's NodeClaim
    capacity follows its node), a resource it does not report yet at its instance type's figure."""
    name = node.labels.get(labels.INSTANCE_TYPE) or claim.instance_type or ""
    launched = instances.capacities([name], deps, deps.clock()).get(name)
    return charges.registered(node.capacity(), charges.charged(launched) if launched is not None else claim.reserved)


def _initialize(node: Node, claim: Claim, pool: NodePool | None, deps: Dependencies, summary: RegisterSummary) -> Node:
    """The node initialized once nothing holds it back; returns it as it is now."""
    if lifecycle.is_initialized(node):
        if node.name not in summary.registered and node.name not in summary.claimed:
            summary.ignored[node.name] = "already registered and initialized"
        return node
    why = lifecycle.initialization_blocker(node, claim, pool.startup_taints() if pool else ())
    if why is None and claim.status != ClaimStatus.REGISTERED:
        why = "its claim is not registered yet"
    if why is not None:
        summary.waiting[node.name] = why
        return node
    node = deps.cluster.patch_node(node.name, lifecycle.initialized_patch())
    summary.initialized.append(node.name)
    log.info("initialized node %s (allocatable %s)", node.name, node.status.allocatable)
    recorder.record([k8s_events.initialized(node.name, claim.name)], deps)
    reason = learn(node, claim.nodeclass, claim.image_id, deps)
    if reason:
        summary.not_learned[node.name] = reason
        log.info("capacity of node %s not learned: %s", node.name, reason)
    else:
        summary.learned.append(node.name)
    return node


def _nodepool(name: str, deps: Dependencies) -> NodePool | None:
    return next((p for p in deps.config.load().nodepools if p.name == name), None)


def _type_labels(node: Node, claim: Claim, deps: Dependencies) -> dict[str, str]:
    """The instance type's labels (`karpenter.k8s.aws/instance-*`...): launch templates are shared by
    instance types, so the user data cannot carry them."""
    name = node.labels.get(labels.INSTANCE_TYPE) or claim.instance_type
    it = deps.catalog.get(deps.clock()).types.get(name) if name else None
    return dict(it.labels) if it is not None else {}


def learn(node: Node, nodeclass_name: str, launched_image: str | None, deps: Dependencies) -> str | None:
    """Store the node's capacity under (type, AMI) if the AMI is the mapped one; else the reason not to."""
    instance_type = node.labels.get(labels.INSTANCE_TYPE)
    image_id = node.labels.get(labels.IMAGE_ID) or launched_image
    if not instance_type or not image_id:
        return "node has no instance-type or image-id label"
    manifests = deps.config.load()
    nodeclass = next((c for c in manifests.nodeclasses if c.metadata.name == nodeclass_name), None)
    if nodeclass is None:
        return f"EC2NodeClass {nodeclass_name!r} no longer exists"
    catalog = deps.catalog.get(deps.clock())
    if deps.settings.missing_cluster_facts():
        return "the cluster's facts are unresolved (its Kubernetes version picks the AMI)"
    expected = images.expected_for_node(node.labels, catalog.types.get(instance_type), images.resolve(nodeclass, deps))
    if expected is None:
        return f"no AMI of EC2NodeClass {nodeclass_name} maps to {instance_type}"
    if expected.id != image_id:
        return f"node runs {image_id} but the mapping picks {expected.id} for {instance_type}"
    record = capacity.from_node(node.labels, node.status.capacity, node.status.allocatable, image_id,
                                nodeclass.ami_family(), deps.clock())
    deps.capacity.observe(record, deps.clock())
    return None


def _deleted(node_name: str, provider_id: str | None, deps: Dependencies, summary: RegisterSummary) -> None:
    """A `Node Deleted` event is a hint, not a fact: the name may have been reused by another instance
    (EC2 private-IP names are) or the event may be a stale duplicate. A claim is released only when the
    event is about its instance (the event's providerID, when it carries one) and the API server confirms
    it: no node of that name exists, or the one that does runs another instance (its providerID). The
    claim of a node that still runs keeps its usage and nominations."""
    claims = [c for c in deps.ledger.active() if c.node_name == node_name]
    if not claims:
        summary.ignored[node_name] = "no claim for node"
        return
    live = deps.cluster.get_node(node_name)
    running = live.instance_id() if live is not None else None
    deleted = _instance_in(provider_id)
    for claim in claims:
        if deleted is not None and deleted != claim.instance_id:
            summary.ignored[node_name] = f"the deleted node ran {deleted}, not {claim.instance_id} of claim {claim.name}"
            continue
        if live is not None and running in (None, claim.instance_id):
            summary.ignored[node_name] = (f"node still exists (instance {running or 'unknown'}): the deletion "
                                          f"event is stale; claim {claim.name} kept")
            log.warning("Node Deleted for %s, which still exists; claim %s kept", node_name, claim.name)
            continue
        deps.ledger.release(claim)
        summary.deleted.append(node_name)


def _instance_in(provider_id: str | None) -> str | None:
    """The instance id a providerID names (`aws:///us-east-1a/i-0abc`), None when it names none."""
    if not provider_id or not provider_id.startswith("aws://"):
        return None
    last = provider_id.rstrip("/").rsplit("/", 1)[-1]
    return last if last.startswith("i-") else None
