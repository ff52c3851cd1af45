"""The EC2 instance behind a node, and the claim it was launched for.

A provisioner that stops between CreateFleet and writing the launch to its claim leaves a claim that never
learns its instance id. An instance launched for one claim alone still says which claim it is for: its
CreateFleet request tags it with the claim's name (`karpenter.sh/nodeclaim`) and with carpool's ownership
tag for the cluster. From the node's `spec.providerID` (its instance id), DescribeInstances gives both, and
the claim can be repaired with the instance's facts instead of the instance being taken for an orphan.
(Instances launched together by one request are named only once their nodes register; one whose claim
was never written is adopted when its node joins, `carpool.disruption.orphans`.)
"""

from __future__ import annotations

import logging
from typing import Any

from carpool.app.wiring import Dependencies
from carpool.disruption import orphans
from carpool.state.models import ACTIVE_STATUSES, Claim

log = logging.getLogger(__name__)


def describe(instance_id: str, deps: Dependencies) -> dict[str, Any] | None:
    """The instance (DescribeInstances shape), or None when EC2 does not know it."""
    found = deps.compute.describe_instances([{"Name": "instance-id", "Values": [instance_id]}])
    return next((i for i in found if i.get("InstanceId") == instance_id), None)


def claim_by_tag(instance_id: str, deps: Dependencies) -> tuple[Claim, bool] | None:
    """The claim the instance's `karpenter.sh/nodeclaim` tag names, and whether it had to be repaired
    (stored with the instance's facts because it never learned its instance). None when the instance is
    not carpool's for this cluster, names no live claim, or names a claim that belongs to another instance."""
    found = describe(instance_id, deps)
    instance = orphans.InstanceView.from_ec2(found) if found is not None else None
    if instance is None or not instance.owned_by(deps.settings.cluster_name):
        return None
    name = instance.nodeclaim
    claim = deps.ledger.get(name) if name else None
    if claim is None or claim.status not in ACTIVE_STATUSES or claim.instance_id not in (None, instance_id):
        return None
    if claim.instance_id is not None:
        return claim, False
    claim = orphans.repaired(claim, instance)
    deps.ledger.mark_launched(claim)
    log.warning("claim %s never recorded its instance; repaired from instance %s", claim.name, instance_id)
    return claim, True
