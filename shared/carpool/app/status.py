"""What carpool holds now, read from its deployed state: `kubectl get nodeclaims` and `kubectl describe
nodepool` for a controller that has no CRDs.

Karpenter users look at NodeClaims (what is launching, on which type and zone, which node it became) and
at each NodePool's usage against its limits. carpool keeps the same facts in its state table: the claims
(`ClaimLedger`), the pools' usage, the learned capacity, the offerings marked unavailable after a capacity
error, why each pod it could not serve is pending (`carpool.state.reasons`), and which EC2NodeClasses
refused a launch and why (`carpool.state.not_ready`). `read` gathers them into
one `Status`, for `carpool status` (deployed state) and for the end of `carpool simulate` (local AWS).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from carpool.state.models import CapacityRecord, Claim, UnavailableOffering
from carpool.state.not_ready import NotReadyStore
from carpool.state.ports import CapacityCache, ClaimLedger, OfferingAvailability
from carpool.state.reasons import PodReasonStore


class _View(BaseModel):
    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True)


class ClaimView(_View):
    """One claim as `kubectl get nodeclaims` shows a NodeClaim."""

    name: str
    nodepool: str
    instance_type: str | None
    zone: str | None
    capacity_type: str | None
    instance_id: str | None
    node: str | None
    age_seconds: int
    state: str


class PoolView(_View):
    """A pool's usage against its limits (cpu in millicores, memory in bytes, as the ledger counts)."""

    name: str
    usage: dict[str, int]
    limits: dict[str, int] | None


class LearnedView(_View):
    instance_type: str
    image_id: str
    samples: int
    #: what the nodes really report (cpu millicores, memory bytes, pods)
    allocatable: dict[str, int]


class UnavailableView(_View):
    instance_type: str
    zone: str
    capacity_type: str
    until: datetime
    reason: str


class PendingView(_View):
    pod: str
    reasons: dict[str, str]
    since: datetime


class NotReadyView(_View):
    """A node class that refused a launch: Karpenter's EC2NodeClass status condition False, with its cause
    (`carpool.launch.failures.Cause`), message and the pools that met it."""

    nodeclass: str
    cause: str
    message: str
    nodepools: list[str]
    since: datetime


class Status(_View):
    at: datetime
    claims: list[ClaimView] = Field(default_factory=list)
    pools: list[PoolView] = Field(default_factory=list)
    learned: list[LearnedView] = Field(default_factory=list)
    unavailable: list[UnavailableView] = Field(default_factory=list)
    pending: list[PendingView] = Field(default_factory=list)
    not_ready: list[NotReadyView] = Field(default_factory=list)


def read(ledger: ClaimLedger, offerings: OfferingAvailability, capacity: CapacityCache,
         reasons: PodReasonStore | None, limits: Mapping[str, Mapping[str, int] | None], now: datetime,
         not_ready: NotReadyStore | None = None) -> Status:
    """Everything carpool holds at `now`; `limits` are the deployed pools' (pool -> resource -> amount)."""
    usage = ledger.usage()
    return Status(
        at=now,
        claims=sorted((_claim(c, now) for c in ledger.active()), key=lambda c: (c.nodepool, c.name)),
        pools=[PoolView(name=p, usage=dict(usage.get(p, {})), limits=dict(lim) if lim is not None else None)
               for p, lim in sorted({**dict.fromkeys(usage), **limits}.items())],
        learned=sorted((_learned(r) for r in capacity.all(now).values()), key=lambda r: (r.instance_type, r.image_id)),
        unavailable=sorted((_unavailable(o) for o in offerings.marked(now)), key=lambda o: o.until),
        pending=sorted((PendingView(pod=e.pod, reasons=e.reasons, since=e.since) for e in reasons.all(now)),
                       key=lambda p: p.pod) if reasons is not None else [],
        not_ready=sorted((NotReadyView(nodeclass=e.nodeclass, cause=e.cause, message=e.message,
                                       nodepools=list(e.nodepools), since=e.since) for e in not_ready.all(now)),
                         key=lambda e: e.nodeclass) if not_ready is not None else [],
    )


def _claim(c: Claim, now: datetime) -> ClaimView:
    return ClaimView(name=c.name, nodepool=c.nodepool, instance_type=c.instance_type, zone=c.zone,
                     capacity_type=c.capacity_type, instance_id=c.instance_id, node=c.node_name,
                     age_seconds=max(0, int((now - c.created_at).total_seconds())), state=str(c.status.value))


def _learned(r: CapacityRecord) -> LearnedView:
    return LearnedView(instance_type=r.instance_type, image_id=r.image_id, samples=r.samples,
                       allocatable=dict(r.allocatable))


def _unavailable(o: UnavailableOffering) -> UnavailableView:
    return UnavailableView(instance_type=o.instance_type, zone=o.zone, capacity_type=o.capacity_type,
                           until=o.until, reason=o.reason)
