"""What carpool remembers between invocations: claims, pod nominations, pool usage, unavailable
offerings and learned capacity.

These are plain pydantic models; `carpool.state.ports` says how they are stored and
`carpool.adapters.aws.dynamodb` stores them in one DynamoDB table. Their validators are built on
first use (`defer_build`), not while a Lambda handler imports them.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from carpool.state import legacy_labels


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
#: recorded late never undoes what another function wrote meanwhile (pods nominated, labels, disruption
#: progress)
LAUNCH_FACTS = ("status", "instance_id", "instance_type", "zone", "capacity_type", "image_id", "max_pods",
                "allocatable", "launched_at", "price")

#: How long a registered claim's nominations keep holding its pods, counted from the claim's
#: `registered_at` (see `holds_nominations`). A late duplicate of a `Pod Unschedulable` event (or a
#: watcher resync) that arrives after the node registered but before the kube-scheduler bound the pods
#: still finds them nominated and launches nothing. Why this short: a claim is registered once its node
#: is Ready, and the kube-scheduler retries unschedulable pods on the node's add/update events, so the
#: pods that fit bind within seconds; a pod still pending after that did not fit the node (the
#: kube-scheduler does not follow carpool's plan: it packed other pods there) and must be provisioned
#: again now. Karpenter's own nomination lasts `max(2 x BatchMaxDuration, 10 s)` = 20 s
#: (`state.nominationWindow`), and its provisioner simulates the pending pods against the node's real
#: room at its next batch. A node held back by startup taints (not initialized yet) is not in this
#: clock: the watcher keeps its pods until it initializes (`carpool.app.watch`). Until this was 2
#: minutes, a thousand-pod scale-out left the pods the kube-scheduler could not fit waiting 2 minutes
#: more (Karpenter's perf suite, `examples/025-karpenter-perf-basic.yaml`).
#: Bound pods need no nomination: the provisioner confirms every event against the cluster first.
NOMINATION_HOLD_AFTER_REGISTRATION = timedelta(seconds=20)


def holds_nominations(status: ClaimStatus | str, registered_at: datetime | None, now: datetime) -> bool:
    """Whether an existing claim still holds its (unexpired) nominations at `now`: every claim does,
    except a registered one once `NOMINATION_HOLD_AFTER_REGISTRATION` has passed since it registered.

    The hold follows the claim rather than being written onto each nomination, so registering a node is
    one write however many pods it was launched for (a burst's node holds hundreds). A nomination
    therefore holds iff it exists, has not expired, its claim exists and this returns True."""
    if status != ClaimStatus.REGISTERED or registered_at is None:
        return True
    return registered_at + NOMINATION_HOLD_AFTER_REGISTRATION > now


class DisruptionProgress(BaseModel):
    """A disruption in progress on a claim's node, as the function that started it recorded it.

    Why on the claim: the disruption Lambda is stateless and runs every minute, while a replacement takes
    minutes to register and a drain may wait on PodDisruptionBudgets, so any later run (of the disruption
    or the interruption function) carries the decision on from here (Karpenter keeps the same on the
    NodeClaim: its `Disrupted` condition, the termination timestamp annotation). The claim keeps status
    REGISTERED meanwhile (see `carpool.app.disruption_executor` for why not TERMINATING)."""

    model_config = ConfigDict(defer_build=True)

    #: why the node goes (a `carpool.disruption.decision.Reason` value: "Drifted", "Interrupted"...)
    reason: str
    #: "delete" or "replace" (a `carpool.disruption.decision.Kind` value)
    action: str = ""
    #: the replacement claims the node waits for before it drains
    replaced_by: list[str] = Field(default_factory=list)
    #: when the decision was taken (an interruption: when EC2 warned); None when unknown
    decided_at: datetime | None = None
    #: when the node's remaining pods are deleted regardless of budgets: its drain's start plus the
    #: NodePool's terminationGracePeriod, stamped at the first drain step (Karpenter's
    #: `karpenter.sh/nodeclaim-termination-timestamp`); None before it, or without a grace period
    termination_deadline: datetime | None = None


class NodeClaimOrigin(BaseModel):
    """What a claim adopted from a Karpenter-created NodeClaim keeps of that object (`carpool.adoption`).

    Why on the claim: the node was launched by Karpenter from the NodePool as it was then, and Karpenter
    froze some of it onto the NodeClaim at its creation, so the node is judged by what the NodeClaim says,
    not by carpool's own launch facts: expiry follows the NodeClaim's `spec.expireAfter` from its
    creation, and static drift its `karpenter.sh/nodepool-hash` (`carpool.disruption.drift`)."""

    model_config = ConfigDict(defer_build=True)

    #: the NodeClaim's `metadata.uid` (a NodeClaim deleted and created again under the name is another one)
    uid: str = ""
    #: its `spec.expireAfter` as written ("720h", "Never"); "" when it has none
    expire_after: str = ""
    #: its `karpenter.sh/nodepool-hash` and `karpenter.sh/nodepool-hash-version` annotations ("" if absent)
    nodepool_hash: str = ""
    nodepool_hash_version: str = ""
    #: when carpool adopted it
    adopted_at: datetime | None = None


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
    #: hash of the NodePool template + EC2NodeClass spec the node was launched from
    #: (`carpool.disruption.drift.spec_hash`), written by the provisioner with the claim: a different
    #: value later is static drift. None for claims launched without it (checked for AMI and requirement
    #: drift only).
    spec_hash: str | None = None
    #: digest of the set of pods on the node, and when that set last changed (consolidateAfter's clock),
    #: written by the disruption executor when the set changes
    pods_digest: str | None = None
    pods_changed_at: datetime | None = None
    #: the disruption in progress on the node; None when there is none
    disruption: DisruptionProgress | None = None
    #: the replacement claims of the node's last abandoned disruption: while one of them still boots, the
    #: node is not decided on again (Karpenter's simulation refuses to rely on an uninitialized node, so it
    #: decides anew only once the replacement is gone)
    abandoned_for: list[str] = Field(default_factory=list)
    #: the Karpenter NodeClaim this claim was adopted from (`carpool.adoption`); None for claims carpool
    #: launched (or adopted from an instance alone, `carpool.disruption.orphans`)
    adopted: NodeClaimOrigin | None = None

    @model_validator(mode="before")
    @classmethod
    def _lift_legacy_labels(cls, data: Any) -> Any:
        """A claim stored by an older carpool keeps this progress as `carpool.dev/...` labels: read into
        the fields above (`carpool.state.legacy_labels`)."""
        return legacy_labels.lift(data)


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
