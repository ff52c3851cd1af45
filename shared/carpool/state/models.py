"""What carpool remembers between invocations: claims, pod nominations, pool usage, unavailable
offerings and learned capacity.

These are plain pydantic models; `carpool.state.ports` says how they are stored and
`carpool.adapters.aws.dynamodb` stores them in one DynamoDB table. Their validators are built on
first use (`defer_build`), not while a Lambda handler imports them.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class ClaimStatus(StrEnum):
    """Life of a node claim. `RESERVED` is written before CreateFleet so a crash can be cleaned up."""

    RESERVED = "reserved"  # pods nominated and pool usage reserved; no instance yet
    LAUNCHED = "launched"  # CreateFleet returned an instance
    REGISTERED = "registered"  # the node joined the cluster
    TERMINATING = "terminating"
    FAILED = "failed"


ACTIVE_STATUSES = frozenset({ClaimStatus.RESERVED, ClaimStatus.LAUNCHED, ClaimStatus.REGISTERED})
IN_FLIGHT_STATUSES = frozenset({ClaimStatus.RESERVED, ClaimStatus.LAUNCHED})
#: what recording a launch writes onto a claim (`ClaimLedger.mark_launched`): only these, so a launch
#: recorded late never undoes what another function wrote meanwhile (pods nominated, labels)
LAUNCH_FACTS = ("status", "instance_id", "instance_type", "zone", "capacity_type", "image_id", "max_pods",
                "allocatable", "launched_at", "price")

#: How long a registered claim's nominations keep holding its pods, counted from the claim's
#: `registered_at` (see `holds_nominations`). A late duplicate of a `Pod Unschedulable` event (or a
#: watcher resync) that arrives after the node registered but before the kube-scheduler bound the pods
#: still finds them nominated and launches nothing. Why bounded, not until the nomination's own TTL: a
#: node is registered once it is Ready, and the kube-scheduler retries unschedulable pods on the node's
#: add/update events, so its pods bind within seconds (startup taints removed by an agent take longer,
#: hence minutes); a pod still pending after that did not fit the node (another pod took the room) and
#: must be provisioned again now, not when the nomination expires.
#: Bound pods need no nomination: the provisioner confirms every event against the cluster first.
NOMINATION_HOLD_AFTER_REGISTRATION = timedelta(minutes=2)


def holds_nominations(status: ClaimStatus | str, registered_at: datetime | None, now: datetime) -> bool:
    """Whether an existing claim still holds its (unexpired) nominations at `now`: every claim does,
    except a registered one once `NOMINATION_HOLD_AFTER_REGISTRATION` has passed since it registered.

    The hold follows the claim rather than being written onto each nomination, so registering a node is
    one write however many pods it was launched for (a burst's node holds hundreds). A nomination
    therefore holds iff it exists, has not expired, its claim exists and this returns True."""
    if status != ClaimStatus.REGISTERED or registered_at is None:
        return True
    return registered_at + NOMINATION_HOLD_AFTER_REGISTRATION > now


class Claim(BaseModel):
    """One node carpool decided to launch (Karpenter's NodeClaim)."""

    model_config = ConfigDict(frozen=False, defer_build=True)

    name: str
    nodepool: str
    nodeclass: str
    status: ClaimStatus = ClaimStatus.RESERVED
    created_at: datetime
    #: instance types still acceptable for the claim, cheapest first (what CreateFleet may choose from)
    instance_types: list[str] = Field(default_factory=list)
    capacity_type: str | None = None
    zone: str | None = None
    #: pods this claim was opened for ("namespace/name"); they are not provisioned again while it lives
    pods: list[str] = Field(default_factory=list)
    #: resources counted against the pool's limits (the largest option), cpu millis / memory bytes / nodes
    reserved: dict[str, int] = Field(default_factory=dict)
    #: requests of the pods already packed onto it (for in-flight room accounting)
    requested: dict[str, int] = Field(default_factory=dict)
    instance_id: str | None = None
    instance_type: str | None = None
    image_id: str | None = None
    max_pods: int | None = None
    launched_at: datetime | None = None
    registered_at: datetime | None = None
    node_name: str | None = None
    price: float | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    #: allocatable of the launched type (filled at launch) so in-flight room can be computed
    allocatable: dict[str, int] = Field(default_factory=dict)
    #: when the nominations `reserve` wrote for `pods` expire (its now + ttl), set by `reserve` on the
    #: claim it is given so the whole-claim writes after it (`mark_launched`) keep it. Pods `nominate`
    #: adds later expire later, so this is the earliest expiry of any nomination the claim holds: while
    #: the claim lives and holds (`holds_nominations`), its pods' nominations cannot lapse before it,
    #: which readers such as the watcher learn from the claim alone, without a read per pod. None for
    #: claims written before the field existed (they are treated as holding nothing).
    nominated_until: datetime | None = None
    #: how many times the stored claim was written: `ClaimLedger.save` writes the claim only while the
    #: stored one is still the version read, so a save never undoes another function's write (a release,
    #: a registration, pods nominated) nor brings a released claim back. 0 for a claim not stored yet
    #: and for claims written before the field existed.
    version: int = 0


class UnavailableOffering(BaseModel):
    """An (instance type, zone, capacity type) that failed with a capacity error, until `until`."""

    model_config = ConfigDict(defer_build=True)

    instance_type: str
    zone: str
    capacity_type: str
    until: datetime
    reason: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.instance_type, self.zone, self.capacity_type)


class CapacityRecord(BaseModel):
    """What nodes of one instance type running one AMI really report (the learned capacity cache)."""

    model_config = ConfigDict(defer_build=True)

    instance_type: str
    image_id: str
    ami_family: str = ""
    capacity: dict[str, int] = Field(default_factory=dict)
    allocatable: dict[str, int] = Field(default_factory=dict)
    samples: int = 1
    first_seen: datetime
    last_seen: datetime
    expires_at: datetime

    @property
    def key(self) -> tuple[str, str]:
        return (self.instance_type, self.image_id)


class PoolUsage(BaseModel):
    """Resources counted against a NodePool's limits: cpu millis, memory bytes, nodes."""

    model_config = ConfigDict(defer_build=True)

    nodepool: str
    usage: dict[str, int] = Field(default_factory=dict)
