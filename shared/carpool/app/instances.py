"""The EC2 instance behind a node, and the claim it was launched for.

A provisioner that stops between CreateFleet and writing the launch to its claim leaves a claim that never
learns its instance id. An instance launched for one claim alone still says which claim it is for: its
CreateFleet request tags it with the claim's name (`karpenter.sh/nodeclaim`) and with carpool's ownership
tag for the cluster. From the node's `spec.providerID` (its instance id), DescribeInstances gives both, and
the claim can be repaired with the instance's facts instead of the instance being taken for an orphan.
Instances launched together by one request carry the request's claims instead (`fleet.FLEET_CLAIMS_TAG`):
the instance's claim is the one the launch paired it with, computed again from the request's instances
(`fleet.claims_of_instances`), as the orphan sweep computes it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from carpool.app.wiring import Dependencies
from carpool.disruption import orphans
from carpool.launch import fleet
from carpool.resources import Resources
from carpool.sizing.allocatable import size_node
from carpool.state import charges
from carpool.state.models import ACTIVE_STATUSES, Claim

log = logging.getLogger(__name__)


def describe(instance_id: str, deps: Dependencies) -> dict[str, Any] | None:
    """The instance (DescribeInstances shape), or None when EC2 does not know it."""
    found = deps.compute.describe_instances([{"Name": "instance-id", "Values": [instance_id]}])
    return next((i for i in found if i.get("InstanceId") == instance_id), None)


def _claim_named(instance: orphans.InstanceView, deps: Dependencies) -> str | None:
    """The claim the instance was launched for: its claim tag, or its batched request's pairing, from the
    request's pending and running instances (the ones the orphan sweep pairs)."""
    if instance.nodeclaim:
        return instance.nodeclaim
    value = instance.tags.get(fleet.FLEET_CLAIMS_TAG)
    if not value:
        return None
    batch = deps.compute.describe_instances([
        {"Name": f"tag:{fleet.FLEET_CLAIMS_TAG}", "Values": [value]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]}])
    views = [orphans.InstanceView.from_ec2(i) for i in batch]
    owned = [(v.instance_id, v.tags) for v in views if v.owned_by(deps.settings.cluster_name)]
    return fleet.claims_of_instances(owned).get(instance.instance_id)


def claim_by_tag(instance_id: str, deps: Dependencies) -> tuple[Claim, bool] | None:
    """The claim the instance was launched for (`_claim_named`), and whether it had to be repaired
    (stored with the instance's facts because it never learned its instance). None when the instance is
    not carpool's for this cluster, names no live claim, or names a claim that belongs to another instance."""
    found = describe(instance_id, deps)
    instance = orphans.InstanceView.from_ec2(found) if found is not None else None
    if instance is None or not instance.owned_by(deps.settings.cluster_name):
        return None
    name = _claim_named(instance, deps)
    claim = deps.ledger.get(name) if name else None
    if claim is None or claim.status not in ACTIVE_STATUSES or claim.instance_id not in (None, instance_id):
        return None
    if claim.instance_id is not None:
        return claim, False
    claim = orphans.repaired(claim, instance)
    capacity = capacities([instance.instance_type], deps, deps.clock()).get(instance.instance_type)
    deps.ledger.mark_launched(claim, charges.charged(capacity) if capacity is not None else None)
    log.warning("claim %s never recorded its instance; repaired from instance %s", claim.name, instance_id)
    return claim, True


def capacities(instance_types: Iterable[str], deps: Dependencies, now: datetime) -> dict[str, Resources]:
    """What a node of each of these types has, sized as a launch sizes it: what a claim launched as one
    holds against its pool (`carpool.state.charges`), GPUs included before their device plugin
    advertises them on the node. Types the catalog lacks are left out."""
    wanted = {t for t in instance_types if t}
    if not wanted:
        return {}
    catalog = deps.catalog.get(now).types
    return {name: size_node(catalog[name]).capacity for name in wanted if name in catalog}
