"""Repository interfaces for carpool's state. The app depends on these; adapters implement them.

Concurrency contract: `ClaimLedger.reserve` is atomic. It writes the claim,
nominates each pod to it, and adds the claim's size to its pool's usage, all or nothing, and refuses when
a pod's nomination still holds or the pool's limit would be exceeded. Two provisioners that race on the
same pods therefore cannot both launch for them, and cannot together pass a limit.

When a nomination holds: a pod's nomination holds at `now` iff it exists, it has not expired
(`until > now`), its claim exists, and that claim is not registered for longer than
`NOMINATION_HOLD_AFTER_REGISTRATION` (`carpool.state.models.holds_nominations`). Every operation that
reads or takes nominations (`reserve`, `reserve_many`, `nominate`, `nominated`) applies this one rule.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from carpool.state.models import CapacityRecord, Claim, UnavailableOffering


class Refusal(StrEnum):
    """Why a reservation or nomination was refused. Callers decide on this, never on the reason's text
    (which names pods and pools, and so can contain any word)."""

    #: a pool limit would be exceeded: scheduling the pods again this invocation cannot help
    LIMIT = "limit"
    #: a pod's nomination still holds for another claim: the pods left can be scheduled again
    POD_NOMINATED = "pod-nominated"
    #: a claim of that name exists already (the same batch reserved concurrently)
    CLAIM_EXISTS = "claim-exists"
    #: the claim to nominate to is no longer in flight
    NOT_IN_FLIGHT = "not-in-flight"
    #: a concurrent write of the same item won: try again
    CONFLICT = "conflict"


class ReservationRefused(Exception):
    """`reserve` refused: a pod is already nominated, or a pool limit would be exceeded. `kind` says
    which, for decisions; `reason` says it for people."""

    def __init__(self, reason: str, kind: Refusal) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind


class ClaimLedger(Protocol):
    def reserve(self, claim: Claim, limits: Mapping[str, int] | None, now: datetime, ttl_seconds: int,
                replacing: Collection[str] = ()) -> None:
        """Atomically write `claim`, nominate `claim.pods` to it until now+ttl, add `claim.reserved` to
        the pool's usage within `limits` (every resource the limits name, each its own condition).
        Nominations that no longer hold (expired, claim gone, claim registered past its hold) and those
        held by the claims in `replacing` (nodes being replaced: interruption, consolidation) are taken
        over. Sets `claim.nominated_until` (now+ttl) on `claim` itself, so the caller's later whole-claim
        write (`mark_launched`) keeps it. Raises ReservationRefused."""
        ...

    def nominate(self, claim_name: str, pods: list[str], requests: Mapping[str, int], now: datetime,
                 ttl_seconds: int, replacing: Collection[str] = ()) -> None:
        """Atomically nominate more `pods` to a live in-flight claim and add `requests` to what it holds.
        Raises ReservationRefused when a pod's nomination still holds (a nomination held by a claim in
        `replacing` is taken over, as `reserve` takes it) or the claim is gone."""
        ...

    def reserve_many(self, claims: Sequence[Claim], limits: Mapping[str, int] | None, now: datetime,
                     ttl_seconds: int, replacing: Collection[str] = ()) -> dict[str, Exception]:
        """`reserve` for several claims of one NodePool at once, each still all or nothing and refused or
        failed on its own. Returns the claims not reserved: name -> ReservationRefused or the error."""
        ...

    def mark_launched(self, claim: Claim, charge: Mapping[str, int] | None = None) -> None:
        """Persist launch results (instance id/type, zone, capacity type, image, allocatable) on a claim
        that still exists and records no other instance (the expected state: a provisioner or a repair
        recording the instance it found; `carpool.state.saving.with_launch`). Stored already with this
        instance and registered (the registrar repaired it first): nothing to do. With `charge` (what a
        node of the launched type holds: `carpool.state.charges.charged`), a claim still in flight holds
        that from now on instead of what it held, its pool's usage changed by the difference in the same
        conditional write (then `claim.reserved` is `charge`). Raises
        `carpool.state.saving.ClaimGone` when the claim was released, `ClaimChanged` when it records
        another instance."""
        ...

    def recharge(self, claim: Claim, reserved: Mapping[str, int]) -> None:
        """Make `reserved` what the claim holds (its launched type's or its node's capacity: a claim
        stored holding its largest option, or missing a resource its node has) and change its pool's
        usage by the difference, in one transaction conditional on the stored claim being
        `claim.version` (then bumped, on `claim` too). No limit applies: the node exists. Raises
        `ClaimGone` or `ClaimChanged` (`carpool.state.saving`)."""
        ...

    def save(self, claim: Claim) -> None:
        """Write the whole claim only if the stored one is still `claim.version` (then bumped, on `claim`
        too). Raises `carpool.state.saving.ClaimGone` (released meanwhile: never written back) or
        `ClaimChanged` (another function wrote it: read it again and decide again, `saving.amend`)."""
        ...

    def mark_launched_many(self, claims: Sequence[Claim],
                           charges: Mapping[str, Mapping[str, int]] | None = None) -> dict[str, Exception]:
        """`mark_launched` for several claims (`charges`: claim name -> its `charge`); returns the ones not
        written, name -> the error."""
        ...

    def mark_registered(self, claim_name: str, node_name: str, now: datetime,
                        charge: Mapping[str, int] | None = None) -> Claim | None:
        """Claim registered: status, node name and registration time (the first one: a repeat never
        moves it). Only the claim is written, and with `charge` (what the node holds:
        `carpool.state.charges.registered`) its pool's usage, by the difference, in the same conditional
        write. Its nominations keep holding for
        `NOMINATION_HOLD_AFTER_REGISTRATION` from the registration, so a late duplicate event still finds
        its pods nominated while the kube-scheduler binds them, and stop holding after it without being
        rewritten; `release` (node gone) deletes them at once. Returns None when the claim is gone."""
        ...

    def release(self, claim: Claim) -> None:
        """Remove the claim, its nominations and its pool usage (launch failed, or node gone)."""
        ...

    def get(self, name: str) -> Claim | None: ...

    def find_by_instance(self, instance_id: str) -> Claim | None: ...

    def active(self) -> list[Claim]:
        """Claims in RESERVED, LAUNCHED or REGISTERED state."""
        ...

    def nominated(self, now: datetime, pods: Iterable[str] | None = None) -> dict[str, str]:
        """Pod key -> claim name for every nomination that holds at `now` (only `pods`' when given)."""
        ...

    def reconcile_usage(self) -> dict[str, dict[str, int]]:
        """Make each pool's usage what its claims hold (every write keeps the two equal; this repairs
        what an older release let drift: a claim written back after its release, a release lost). A
        pool whose usage changes meanwhile is left for the next call; a store whose claim reads lag
        (DynamoDB's index) sets a pool only once its usage stayed the same from one call to the next.
        Returns the pools set, with their usage now."""
        ...

    def usage(self, pools: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
        """NodePool name -> usage (cpu millis, memory bytes, nodes, and every other resource a limit of the
        pool names, e.g. `nvidia.com/gpu`); only `pools` when given."""
        ...


class OfferingAvailability(Protocol):
    def mark_unavailable(self, offerings: Iterable[UnavailableOffering]) -> None: ...

    def unavailable(self, now: datetime) -> set[tuple[str, str, str]]:
        """(instance type, zone, capacity type) still unavailable at `now` (expiry checked in code)."""
        ...

    def marked(self, now: datetime) -> list[UnavailableOffering]:
        """The offerings still marked at `now`, with until when and why."""
        ...


class CapacityCache(Protocol):
    def all(self, now: datetime) -> dict[tuple[str, str], CapacityRecord]:
        """Every unexpired record, keyed by (instance type, image id): one read per invocation."""
        ...

    def observe(self, record: CapacityRecord, now: datetime) -> CapacityRecord:
        """Merge an observation (only-lower memory, sample count, last seen) with a conditional write."""
        ...
