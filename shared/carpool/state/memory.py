"""In-memory state repositories with the same semantics as the DynamoDB ones.

Used by unit tests of the use cases and by `carpool plan`; a lock makes `reserve` atomic across threads,
mirroring DynamoDB's TransactWriteItems.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime, timedelta

from carpool import capacity as capacity_rules
from carpool.state.charges import difference
from carpool.state.models import (
    ACTIVE_STATUSES,
    CapacityRecord,
    Claim,
    ClaimStatus,
    UnavailableOffering,
    holds_nominations,
)
from carpool.state.ports import Refusal, ReservationRefused
from carpool.state.saving import ClaimChanged, ClaimGone, with_launch


class MemoryLedger:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.claims: dict[str, Claim] = {}
        self.nominations: dict[str, tuple[str, datetime]] = {}
        self.pool_usage: dict[str, dict[str, int]] = {}

    def reserve(self, claim: Claim, limits: Mapping[str, int] | None, now: datetime, ttl_seconds: int,
                replacing: Collection[str] = ()) -> None:
        """Sets `claim.nominated_until` on the caller's claim too, as DynamoLedger does: the caller stores
        that object whole later (`mark_launched`)."""
        with self._lock:
            if claim.name in self.claims:
                raise ReservationRefused(f"claim {claim.name} already exists", Refusal.CLAIM_EXISTS)
            for pod in claim.pods:
                holder = self._holder(pod, now)
                if holder is not None and holder not in replacing:
                    raise ReservationRefused(f"pod {pod} already nominated to {holder}", Refusal.POD_NOMINATED)
            usage = dict(self.pool_usage.get(claim.nodepool, {}))
            for k, v in claim.reserved.items():
                usage[k] = usage.get(k, 0) + v
                if limits is not None and k in limits and usage[k] > limits[k]:
                    raise ReservationRefused(f"limit {k} exhausted for nodepool {claim.nodepool}", Refusal.LIMIT)
            self.pool_usage[claim.nodepool] = usage
            until = now + timedelta(seconds=ttl_seconds)
            for pod in claim.pods:
                self.nominations[pod] = (claim.name, until)
            claim.nominated_until = until
            self.claims[claim.name] = claim.model_copy(deep=True)

    def nominate(self, claim_name: str, pods: list[str], requests: Mapping[str, int], now: datetime,
                 ttl_seconds: int, replacing: Collection[str] = ()) -> None:
        with self._lock:
            claim = self.claims.get(claim_name)
            if claim is None or claim.status not in (ClaimStatus.RESERVED, ClaimStatus.LAUNCHED):
                raise ReservationRefused(f"claim {claim_name} is not in flight", Refusal.NOT_IN_FLIGHT)
            for pod in pods:
                holder = self._holder(pod, now)
                if holder is not None and holder not in replacing:
                    raise ReservationRefused(f"pod {pod} already nominated to {holder}", Refusal.POD_NOMINATED)
            until = now + timedelta(seconds=ttl_seconds)
            for pod in pods:
                self.nominations[pod] = (claim_name, until)
            claim.pods = [*claim.pods, *pods]
            claim.version += 1
            for k, v in requests.items():
                claim.requested[k] = claim.requested.get(k, 0) + v

    def reserve_many(self, claims: Sequence[Claim], limits: Mapping[str, int] | None, now: datetime,
                     ttl_seconds: int, replacing: Collection[str] = ()) -> dict[str, Exception]:
        failed: dict[str, Exception] = {}
        for claim in claims:
            try:
                self.reserve(claim, limits, now, ttl_seconds, replacing)
            except ReservationRefused as refused:
                failed[claim.name] = refused
        return failed

    def mark_launched(self, claim: Claim, charge: Mapping[str, int] | None = None) -> None:
        """The launch facts onto a stored claim recording no other instance (`saving.with_launch`), its
        charge replaced and its pool's usage changed by the difference, at once."""
        with self._lock:
            stored = self.claims.get(claim.name)
            if stored is None:
                raise ClaimGone(claim.name)
            fresh = with_launch(stored, claim, charge)
            if fresh is None:
                return
            self._adjust(stored.nodepool, difference(fresh.reserved, stored.reserved))
            fresh.version = stored.version + 1
            self.claims[claim.name] = fresh
            claim.version, claim.reserved = fresh.version, dict(fresh.reserved)

    def recharge(self, claim: Claim, reserved: Mapping[str, int]) -> None:
        with self._lock:
            stored = self._as_read(claim)
            self._adjust(stored.nodepool, difference(reserved, stored.reserved))
            stored.reserved = dict(reserved)
            stored.version += 1
            claim.reserved, claim.version = dict(stored.reserved), stored.version

    def _adjust(self, pool: str, delta: Mapping[str, int]) -> None:
        """The pool's usage changed by `delta` (a claim's charge replaced; no limit: the node exists)."""
        if not delta:
            return
        usage = self.pool_usage.setdefault(pool, {})
        for k, v in delta.items():
            usage[k] = usage.get(k, 0) + v

    def save(self, claim: Claim) -> None:
        with self._lock:
            self._as_read(claim)
            claim.version += 1
            self.claims[claim.name] = claim.model_copy(deep=True)

    def mark_launched_many(self, claims: Sequence[Claim],
                           charges: Mapping[str, Mapping[str, int]] | None = None) -> dict[str, Exception]:
        failed: dict[str, Exception] = {}
        for claim in claims:
            try:
                self.mark_launched(claim, (charges or {}).get(claim.name))
            except ClaimChanged as exc:  # as DynamoLedger: the claim's own write fails alone
                failed[claim.name] = exc
            except ClaimGone as exc:
                failed[claim.name] = exc
        return failed

    def mark_registered(self, claim_name: str, node_name: str, now: datetime,
                        charge: Mapping[str, int] | None = None) -> Claim | None:
        """Only the claim changes (and, with `charge`, its pool's usage by the difference); the first
        registration time is kept, so a repeated registration never lengthens its nominations' hold."""
        with self._lock:
            claim = self.claims.get(claim_name)
            if claim is None:
                return None
            claim.status = ClaimStatus.REGISTERED
            claim.node_name = node_name
            claim.version += 1
            if claim.registered_at is None:
                claim.registered_at = now
            if charge is not None:
                self._adjust(claim.nodepool, difference(charge, claim.reserved))
                claim.reserved = dict(charge)
            return claim.model_copy(deep=True)

    def release(self, claim: Claim) -> None:
        with self._lock:
            stored = self.claims.pop(claim.name, None)
            if stored is None:
                return
            usage = self.pool_usage.setdefault(stored.nodepool, {})
            for k, v in stored.reserved.items():
                usage[k] = max(0, usage.get(k, 0) - v)
            for pod in stored.pods:
                if self.nominations.get(pod, ("",))[0] == claim.name:
                    del self.nominations[pod]

    def get(self, name: str) -> Claim | None:
        c = self.claims.get(name)
        return c.model_copy(deep=True) if c else None

    def find_by_instance(self, instance_id: str) -> Claim | None:
        for c in self.claims.values():
            if c.instance_id == instance_id:
                return c.model_copy(deep=True)
        return None

    def active(self) -> list[Claim]:
        return [c.model_copy(deep=True) for c in self.claims.values() if c.status in ACTIVE_STATUSES]

    def nominated(self, now: datetime, pods: Iterable[str] | None = None) -> dict[str, str]:
        wanted = self.nominations if pods is None else dict.fromkeys(pods)
        out = {}
        for pod in wanted:
            holder = self._holder(pod, now)
            if holder is not None:
                out[pod] = holder
        return out

    def _as_read(self, claim: Claim) -> Claim:
        """The stored claim, if it is still the version `claim` was read at (the conditional write's check)."""
        stored = self.claims.get(claim.name)
        if stored is None:
            raise ClaimGone(claim.name)
        if stored.version != claim.version:
            raise ClaimChanged(claim.name)
        return stored

    def _holder(self, pod: str, now: datetime) -> str | None:
        """The claim whose nomination holds `pod` at `now` (`carpool.state.models.holds_nominations`)."""
        held = self.nominations.get(pod)
        if held is None or held[1] <= now:
            return None
        claim = self.claims.get(held[0])
        if claim is None or not holds_nominations(claim.status, claim.registered_at, now):
            return None
        return held[0]

    def reconcile_usage(self) -> dict[str, dict[str, int]]:
        """At once: nothing here lags (DynamoLedger waits for its index, one call later)."""
        with self._lock:
            held: dict[str, dict[str, int]] = {}
            for claim in self.claims.values():
                pool = held.setdefault(claim.nodepool, {})
                for k, v in claim.reserved.items():
                    pool[k] = pool.get(k, 0) + v
            out = {}
            for name, usage in self.pool_usage.items():
                target = {r: held.get(name, {}).get(r, 0) for r in {*usage, *held.get(name, {})}}
                if target != usage:
                    self.pool_usage[name] = out[name] = target
            return {k: dict(v) for k, v in out.items()}

    def usage(self, pools: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
        wanted = None if pools is None else set(pools)
        return {k: dict(v) for k, v in self.pool_usage.items() if wanted is None or k in wanted}


class MemoryOfferings:
    def __init__(self) -> None:
        self._items: dict[tuple[str, str, str], UnavailableOffering] = {}

    def mark_unavailable(self, offerings: Iterable[UnavailableOffering]) -> None:
        for o in offerings:
            self._items[o.key] = o

    def unavailable(self, now: datetime) -> set[tuple[str, str, str]]:
        return {o.key for o in self.marked(now)}

    def marked(self, now: datetime) -> list[UnavailableOffering]:
        return [o for o in self._items.values() if o.until > now]


class MemoryCapacityCache:
    def __init__(self) -> None:
        self._items: dict[tuple[str, str], CapacityRecord] = {}

    def all(self, now: datetime) -> dict[tuple[str, str], CapacityRecord]:
        return {k: r for k, r in self._items.items() if r.expires_at > now}

    def observe(self, record: CapacityRecord, now: datetime) -> CapacityRecord:
        existing = self._items.get(record.key)
        if existing is not None and existing.expires_at <= now:
            existing = None
        merged = capacity_rules.merge(existing, record)
        self._items[record.key] = merged
        return merged
