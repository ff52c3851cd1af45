"""The EC2 instance behind a node, and the claim it was launched for.

A provisioner that stops between CreateFleet and writing the launch to its claim leaves a claim that never
learns its instance id. The instance still says which claim it is for: CreateFleet tags it with the
claim's name (`karpenter.sh/nodeclaim`) and with carpool's ownership tag for the cluster. From the node's
`spec.providerID` (its instance id), DescribeInstances gives both, and the claim can be repaired with the
instance's facts instead of the instance being taken for an orphan.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from carpool import labels
from carpool.app.wiring import Dependencies
from carpool.state.models import ACTIVE_STATUSES, Claim, ClaimStatus

log = logging.getLogger(__name__)


def describe(instance_id: str, deps: Dependencies) -> dict[str, Any] | None:
    """The instance (DescribeInstances shape), or None when EC2 does not know it."""
    found = deps.compute.describe_instances([{"Name": "instance-id", "Values": [instance_id]}])
    return next((i for i in found if i.get("InstanceId") == instance_id), None)


def tags(instance: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in instance.get("Tags") or []}


def owned_by(instance: dict[str, Any], cluster: str) -> bool:
    """carpool launched it for this cluster (Karpenter tags its instances with `karpenter.sh/nodeclaim`
    too: the ownership tag is what tells carpool's apart)."""
    return tags(instance).get(labels.TAG_MANAGED_BY) == cluster


def claim_name(instance: dict[str, Any]) -> str | None:
    return tags(instance).get(labels.TAG_NODECLAIM) or None


def capacity_type(instance: dict[str, Any]) -> str:
    """EC2 says `InstanceLifecycle: spot` for spot instances and nothing for on-demand ones."""
    return labels.CAPACITY_SPOT if instance.get("InstanceLifecycle") == "spot" else labels.CAPACITY_ON_DEMAND


def repaired(claim: Claim, instance: dict[str, Any], now: datetime) -> Claim:
    """`claim` with the launch facts it missed, read from its instance: what `provision` writes after a
    CreateFleet it saw returning."""
    launched_at = instance.get("LaunchTime")
    return claim.model_copy(update={
        "status": ClaimStatus.LAUNCHED if claim.status == ClaimStatus.RESERVED else claim.status,
        "instance_id": instance["InstanceId"],
        "instance_type": instance.get("InstanceType") or claim.instance_type,
        "zone": (instance.get("Placement") or {}).get("AvailabilityZone") or claim.zone,
        "capacity_type": capacity_type(instance),
        "image_id": instance.get("ImageId") or claim.image_id,
        "launched_at": launched_at if isinstance(launched_at, datetime) else now,
    })


def claim_by_tag(instance_id: str, deps: Dependencies) -> tuple[Claim, bool] | None:
    """The claim the instance's `karpenter.sh/nodeclaim` tag names, and whether it had to be repaired
    (stored with the instance's facts because it never learned its instance). None when the instance is
    not carpool's for this cluster, names no live claim, or names a claim that belongs to another instance."""
    instance = describe(instance_id, deps)
    if instance is None or not owned_by(instance, deps.settings.cluster_name):
        return None
    name = claim_name(instance)
    claim = deps.ledger.get(name) if name else None
    if claim is None or claim.status not in ACTIVE_STATUSES or claim.instance_id not in (None, instance_id):
        return None
    if claim.instance_id is not None:
        return claim, False
    claim = repaired(claim, instance, deps.clock())
    deps.ledger.mark_launched(claim)
    log.warning("claim %s never recorded its instance; repaired from instance %s", claim.name, instance_id)
    return claim, True
