"""The registrar: a node joined (or left); settle its claim and learn what it really offers.

Learning is the fix for the capacity-cache seed bug: the observation is keyed by the instance type and
the AMI the node actually runs, and it is stored only when that AMI is the one the strict mapping picks
for the node, so a node on an unexpected image can never poison the estimates for the right one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from carpool import capacity, labels
from carpool.api.events import NodeDeletedEvent, NodeRegisteredEvent
from carpool.api.k8s import Node
from carpool.app import images
from carpool.app.wiring import Dependencies
from carpool.state.models import Claim, ClaimStatus

log = logging.getLogger(__name__)


@dataclass
class RegisterSummary:
    registered: list[str] = field(default_factory=list)
    learned: list[str] = field(default_factory=list)
    not_learned: dict[str, str] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    ignored: dict[str, str] = field(default_factory=dict)


def run(batch: dict[str, NodeRegisteredEvent | NodeDeletedEvent], deps: Dependencies) -> tuple[RegisterSummary, dict[str, str]]:
    summary = RegisterSummary()
    for event in batch.values():
        if event.detail.cluster != deps.settings.cluster_name:
            summary.ignored[event.id] = f"event for cluster {event.detail.cluster!r}"
            log.info("ignoring %s for another cluster %s", event.detail_type, event.detail.cluster)
        elif isinstance(event, NodeRegisteredEvent):
            _registered(event.detail.node, deps, summary)
        else:
            _deleted(event.detail.node_name, deps, summary)
    return summary, {}


def _registered(node: Node, deps: Dependencies, summary: RegisterSummary) -> None:
    cluster = deps.settings.cluster_name
    if node.labels.get(labels.OWNED_BY) != cluster:
        summary.ignored[node.name] = "node not launched by carpool"
        log.info("node %s is not carpool's; left alone", node.name)
        return
    known = claim_of(node, deps)
    if known is not None and known.status == ClaimStatus.REGISTERED and known.node_name == node.name:
        summary.ignored[node.name] = "already registered"  # a repeated event: learn once per node
        return
    claim = deps.ledger.mark_registered(known.name, node.name, deps.clock()) if known else None
    if claim is None:
        summary.ignored[node.name] = f"no claim for instance {node.instance_id()}"
        log.warning("node %s (instance %s) has no claim carpool knows", node.name, node.instance_id())
        return
    summary.registered.append(node.name)
    reason = learn(node, claim.nodeclass, claim.image_id, deps)
    if reason:
        summary.not_learned[node.name] = reason
        log.info("capacity of node %s not learned: %s", node.name, reason)
    else:
        summary.learned.append(node.name)


def claim_of(node: Node, deps: Dependencies) -> Claim | None:
    """The node's claim: the instance in its providerID decides (always there); a claim label is only a
    shortcut (one read by key instead of a search of the claims) and is trusted when its claim names the
    same instance or none yet."""
    instance_id = node.instance_id()
    labelled = deps.ledger.get(node.labels[labels.CLAIM]) if node.labels.get(labels.CLAIM) else None
    if labelled is not None and (not instance_id or labelled.instance_id in (None, instance_id)):
        return labelled
    found = deps.ledger.find_by_instance(instance_id) if instance_id else None
    return found if found is not None else labelled


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
    expected = images.expected_for_node(node.labels, catalog.types.get(instance_type), images.resolve(nodeclass, deps))
    if expected is None:
        return f"no AMI of EC2NodeClass {nodeclass_name} maps to {instance_type}"
    if expected.id != image_id:
        return f"node runs {image_id} but the mapping picks {expected.id} for {instance_type}"
    record = capacity.from_node(node.labels, node.status.capacity, node.status.allocatable, image_id,
                                nodeclass.ami_family(), deps.clock())
    deps.capacity.observe(record, deps.clock())
    return None


def _deleted(node_name: str, deps: Dependencies, summary: RegisterSummary) -> None:
    claim = next((c for c in deps.ledger.active() if c.node_name == node_name), None)
    if claim is None:
        summary.ignored[node_name] = "no claim for node"
        return
    deps.ledger.release(claim)
    summary.deleted.append(node_name)
