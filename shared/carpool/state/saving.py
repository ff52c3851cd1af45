"""Saving a claim another function may be changing at the same time: the named errors a conditional
write raises, and `amend`, the read-modify-write that decides again on what is stored now.

Claims are shared items: the provisioner records launches, the registrar registers and releases, the
interruption and disruption functions mark their progress on the claim. A whole-claim write from a copy
read earlier would undo what another function wrote meanwhile, or bring back a claim it released (and
whose pool usage it gave back: the pool then runs a node its usage no longer counts). So every such
write is conditional on the version read (`ClaimLedger.save`), and one that loses its condition reads
the claim again and applies its change to that (Karpenter patches NodeClaims with an optimistic lock and
requeues on a conflict the same way).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from carpool.state.models import IN_FLIGHT_STATUSES, LAUNCH_FACTS, Claim

#: how many times `amend` reads again after losing to another writer before it gives up
AMEND_ATTEMPTS = 5


class ClaimConflict(Exception):
    """A conditional claim write found the stored claim not as the writer read it."""

    def __init__(self, claim_name: str) -> None:
        super().__init__(claim_name)
        self.claim_name = claim_name


class ClaimGone(ClaimConflict):
    """The claim no longer exists (released meanwhile): it is not written back."""

    def __str__(self) -> str:
        return f"claim {self.claim_name} no longer exists"


class ClaimChanged(ClaimConflict):
    """Another function wrote the claim since it was read."""

    def __str__(self) -> str:
        return f"claim {self.claim_name} changed since it was read"


def with_launch(stored: Claim, launched: Claim, charge: Mapping[str, int] | None = None) -> Claim | None:
    """The stored claim with the launch `launched` records (`LAUNCH_FACTS`, its labels added), for
    `ClaimLedger.mark_launched`; None when there is nothing to write (already registered with that
    instance). A claim past flight (registered without ever learning its instance, say) keeps its
    status, and its charge (its node's: `carpool.state.charges`); a claim in flight is charged `charge`
    when given (its launched type's capacity). Raises ClaimChanged when the stored claim records another
    instance."""
    if stored.instance_id not in (None, launched.instance_id):
        raise ClaimChanged(stored.name)
    if stored.instance_id is not None and stored.status not in IN_FLIGHT_STATUSES:
        return None
    fresh = stored.model_copy(update={k: getattr(launched, k) for k in LAUNCH_FACTS}, deep=True)
    fresh.labels = {**stored.labels, **launched.labels}
    if stored.status not in IN_FLIGHT_STATUSES:
        fresh.status = stored.status
    elif charge is not None:
        fresh.reserved = dict(charge)
    return fresh


class _Saves(Protocol):
    def get(self, name: str) -> Claim | None: ...

    def save(self, claim: Claim) -> None: ...


def amend(ledger: _Saves, claim: Claim, change: Callable[[Claim], bool | None]) -> Claim | None:
    """Apply `change` to `claim` and save it; when another function wrote the claim meanwhile, read it
    again and apply `change` to what is stored now (it decides again: returning False writes nothing).

    Returns the claim as stored, or None when it is gone (released meanwhile: never written back).
    `claim` itself is updated to the stored one, so a caller holding it goes on with current values.
    Raises ClaimChanged after `AMEND_ATTEMPTS` lost races in a row."""
    current: Claim | None = claim
    for _ in range(AMEND_ATTEMPTS):
        assert current is not None
        if change(current) is not False:
            try:
                ledger.save(current)
            except ClaimGone:
                return None
            except ClaimChanged:
                current = ledger.get(claim.name)
                if current is None:
                    return None
                continue
        _refresh(claim, current)
        return current
    raise ClaimChanged(claim.name)


def _refresh(claim: Claim, current: Claim) -> None:
    """`claim` becomes the stored `current` (the caller goes on with what is stored)."""
    if current is not claim:
        for name in type(claim).model_fields:
            setattr(claim, name, getattr(current, name))
