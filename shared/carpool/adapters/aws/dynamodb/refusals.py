"""Why DynamoDB refused a reservation or a nomination, said as `MemoryLedger` says it.

Part of `DynamoLedger` (`carpool.state.ports.ClaimLedger`, in `ledger`). A cancelled transaction names the
entries whose conditions failed (`TransactionCancelled`), not a reason; the caller needs the same
`ReservationRefused` the in-memory ledger raises: the same kind (`Refusal`, which callers decide on) and
the same words, naming the claim, the pod and its holder, or the exhausted resource. The checks a
transaction's conditions cannot make on their own (a claim larger than a limit, claims that together
pass one) are here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from carpool.adapters.aws.dynamodb.codec import deserialize, from_dynamo
from carpool.adapters.aws.dynamodb.pool_usage import summed
from carpool.adapters.aws.dynamodb.table import Failure, TransactionCancelled
from carpool.state.models import Claim
from carpool.state.ports import Refusal, ReservationRefused


def refuse_impossible(claim: Claim, limits: Mapping[str, int] | None) -> None:
    """A claim larger than a limit on its own can never fit; say so without a transaction."""
    for resource, delta in sorted(claim.reserved.items()):
        if limits is not None and resource in limits and delta > limits[resource]:
            raise ReservationRefused(f"limit {resource} exhausted for nodepool {claim.nodepool}", Refusal.LIMIT)


def exceeds(chunk: list[Claim], limits: Mapping[str, int] | None) -> bool:
    """Whether the claims together pass a limit on their own (the usage condition cannot see that for a
    pool's first reservation, so they go one by one)."""
    total = summed(c.reserved for c in chunk)
    return limits is not None and any(r in limits and v > limits[r] for r, v in total.items())


def refused_claims(cancelled: TransactionCancelled, chunk: list[Claim]) -> dict[str, TransactionCancelled] | None:
    """The claims a cancelled transaction refused, each with its own failures; None when the cause is
    not any claim's alone (the usage update, a conflict, no reasons given)."""
    if cancelled.conflict_only or any(op.what == "usage" for op, _, _ in cancelled.failures):
        return None
    owner = {p: c.name for c in chunk for p in c.pods}
    owner.update({c.name: c.name for c in chunk})
    out: dict[str, list[Failure]] = {}
    for failure in cancelled.failures:
        name = owner.get(failure[0].subject)
        if name is None:
            return None
        out.setdefault(name, []).append(failure)
    return {name: TransactionCancelled(failures) for name, failures in out.items()}


def refusal_reason(cancelled: TransactionCancelled, claim: Claim,
                   limits: Mapping[str, int] | None) -> tuple[str, Refusal]:
    """The first cause, in MemoryLedger's order (claim, pods, limits), worded like MemoryLedger, and its kind."""
    order = {"claim": 0, "pod": 1, "usage": 2}
    op, code, old = min(cancelled.failures, key=lambda f: order[f[0].what])
    if code == "TransactionConflict":
        return f"concurrent update of {op.what} {op.subject}, try again", Refusal.CONFLICT
    if op.what == "claim":
        return f"claim {claim.name} already exists", Refusal.CLAIM_EXISTS
    if op.what == "pod":
        holder = from_dynamo(deserialize(old)).get("claim") if old else None
        return f"pod {op.subject} already nominated to {holder or 'another claim'}", Refusal.POD_NOMINATED
    return f"limit {_exhausted(claim, limits, old)} exhausted for nodepool {claim.nodepool}", Refusal.LIMIT


def nominate_refusal(cancelled: TransactionCancelled, claim_name: str) -> tuple[str, Refusal]:
    """Why `nominate` was refused, worded like MemoryLedger (the claim first, then the first pod), and its kind."""
    op, code, old = min(cancelled.failures, key=lambda f: f[0].what != "claim")
    if code == "TransactionConflict":
        return f"concurrent update of {op.what} {op.subject}, try again", Refusal.CONFLICT
    if op.what == "claim":
        return f"claim {claim_name} is not in flight", Refusal.NOT_IN_FLIGHT
    holder = from_dynamo(deserialize(old)).get("claim") if old else None
    return f"pod {op.subject} already nominated to {holder or 'another claim'}", Refusal.POD_NOMINATED


def _exhausted(claim: Claim, limits: Mapping[str, int] | None, old: Mapping[str, Any] | None) -> str:
    if not limits:
        return "?"
    usage = from_dynamo(deserialize(old)) if old else {}
    limited = [r for r in sorted(claim.reserved) if r in limits]
    for resource in limited:
        if int(usage.get(resource, 0)) + claim.reserved[resource] > limits[resource]:
            return resource
    return limited[0] if limited else "?"
