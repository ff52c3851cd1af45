"""A NodePool's usage as the state table stores it: items `POOL#<nodepool>` / `USAGE`, on the index under
`POOLS`, one number attribute per resource its claims hold.

Part of `DynamoLedger` (`carpool.state.ports.ClaimLedger`, in `ledger`; its `usage` and `reconcile_usage`
are `PoolUsage`'s). A reservation adds its claim's size in the same transaction as the claim, with a
condition per limited resource, so two provisioners cannot together pass a limit; a release gives it
back. Every change bumps `usageVersion`, which lets `reconcile` set a pool's usage to what its claims hold
only once it has stayed unchanged between two disruption runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from botocore.exceptions import ClientError

from carpool.adapters.aws.dynamodb.codec import deserialize, from_dynamo, serialize, values
from carpool.adapters.aws.dynamodb.table import KEY_ATTRS, StateTable, TransactionOp, error_code
from carpool.state.models import Claim

#: the index partition listing every pool's usage
POOLS = "POOLS"
#: a pool usage item's bookkeeping beside its resources: bumped by every change of its usage, and the
#: value the last disruption run saw (see `PoolUsage.reconcile`)
USAGE_VERSION = "usageVersion"
USAGE_SEEN = "usageSeen"
_USAGE_BOOKS = frozenset({USAGE_VERSION, USAGE_SEEN})


def usage_key(nodepool: str) -> dict[str, Any]:
    return serialize({"pk": f"POOL#{nodepool}", "sk": "USAGE"})


def summed(parts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Resource amounts added up, resource by resource."""
    out: dict[str, int] = {}
    for part in parts:
        for k, v in part.items():
            out[k] = out.get(k, 0) + v
    return out


def reserve_usage(table: str, claim: Claim, limits: Mapping[str, int] | None) -> TransactionOp:
    """Add the claim's size to its pool's usage; for each limited resource r the condition is
    `usage[r] <= limit - delta` (`attribute_not_exists` covers the pool's first claim, whose sum is
    `if_not_exists(r, 0) + delta`, already checked against the limit before the transaction:
    `carpool.adapters.aws.dynamodb.refusals.refuse_impossible`)."""
    return _added(table, claim.nodepool, claim.reserved, limits)


def adjust_usage(table: str, nodepool: str, delta: Mapping[str, int]) -> TransactionOp:
    """Change the pool's usage by `delta` (negative amounts give back), with no limit: a claim's charge
    replaced by its launched type's or its node's capacity (`carpool.state.charges`), in the transaction
    that writes the claim at the version it was read, so the change is applied exactly once."""
    return _added(table, nodepool, delta, None)


def _added(table: str, nodepool: str, amounts: Mapping[str, int], limits: Mapping[str, int] | None) -> TransactionOp:
    names = {"#gpk": "gsi1pk", "#gsk": "gsi1sk", "#pool": "nodepool", "#uv": USAGE_VERSION}
    vals: dict[str, Any] = {"pools": POOLS, "pool": nodepool, "zero": 0, "one": 1}
    sets = ["#gpk = :pools", "#gsk = :pool", "#pool = :pool", "#uv = if_not_exists(#uv, :zero) + :one"]
    conditions = []
    for i, (resource, delta) in enumerate(sorted(amounts.items())):
        names[f"#r{i}"] = resource
        vals[f"d{i}"] = delta
        sets.append(f"#r{i} = if_not_exists(#r{i}, :zero) + :d{i}")
        if limits is not None and resource in limits:
            vals[f"m{i}"] = limits[resource] - delta
            conditions.append(f"(attribute_not_exists(#r{i}) OR #r{i} <= :m{i})")
    update: dict[str, Any] = {
        "TableName": table,
        "Key": usage_key(nodepool),
        "UpdateExpression": "SET " + ", ".join(sets),
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values(**vals),
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    if conditions:
        update["ConditionExpression"] = " AND ".join(conditions)
    return TransactionOp({"Update": update}, "usage", nodepool)


def release_usage(table: str, claim: Claim) -> TransactionOp:
    """Give the claim's size back to its pool's usage."""
    names: dict[str, str] = {"#uv": USAGE_VERSION}
    vals: dict[str, Any] = {"zero": 0, "one": 1}
    sets = ["#uv = if_not_exists(#uv, :zero) + :one"]
    for i, (resource, delta) in enumerate(sorted(claim.reserved.items())):
        names[f"#r{i}"] = resource
        vals[f"d{i}"] = delta
        sets.append(f"#r{i} = if_not_exists(#r{i}, :zero) - :d{i}")
    request = {
        "Update": {
            "TableName": table,
            "Key": usage_key(claim.nodepool),
            "UpdateExpression": "SET " + ", ".join(sets),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values(**vals),
        }
    }
    return TransactionOp(request, "usage", claim.nodepool)


def _resources(plain: Mapping[str, Any]) -> dict[str, int]:
    """A usage item's resources, without its key and bookkeeping attributes."""
    return {k: int(v) for k, v in plain.items() if k not in KEY_ATTRS and k not in _USAGE_BOOKS}


class PoolUsage:
    """Reading the pools' usage and setting it right (`ClaimLedger.usage`, `ClaimLedger.reconcile_usage`)."""

    def __init__(self, table: StateTable) -> None:
        self._table = table

    def read(self, pools: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        items = (self._table.query_index(POOLS) if pools is None
                 else self._table.batch_get(usage_key(p) for p in pools))
        for item in items:
            plain = from_dynamo(deserialize(item))
            pool = plain.pop("nodepool")
            out[pool] = _resources(plain)
        return out

    def reconcile(self, claims: Iterable[Claim]) -> dict[str, dict[str, int]]:
        """Make each pool's usage what `claims` (every claim, read from the index) hold. The index lags
        writes by a moment: a pool is only set once its usage has not changed since the previous call (a
        disruption run a minute ago), so every claim it counts was written long enough ago to be read,
        and only if it still has not (conditional on its version). A pool that changed meanwhile is
        looked at again next time. Returns the pools set, with their usage now."""
        held: dict[str, dict[str, int]] = {}
        for claim in claims:
            held[claim.nodepool] = summed([held.get(claim.nodepool, {}), claim.reserved])
        out: dict[str, dict[str, int]] = {}
        for item in self._table.query_index(POOLS):
            plain = from_dynamo(deserialize(item))
            pool = str(plain.pop("nodepool"))
            version, seen = int(plain.get(USAGE_VERSION, 0)), plain.get(USAGE_SEEN)
            usage = _resources(plain)
            target = {r: held.get(pool, {}).get(r, 0) for r in {*usage, *held.get(pool, {})}}
            quiet = seen is not None and int(seen) == version
            if quiet and target != usage and self._set(pool, version, target):
                out[pool] = target
            elif not quiet:
                self._set(pool, version, {})
        return out

    def _set(self, pool: str, version: int, usage: Mapping[str, int]) -> bool:
        """Set the pool's usage (when given: a new version) and note the version seen, if the usage is
        still `version`; False when it changed meanwhile."""
        names = {"#uv": USAGE_VERSION, "#seen": USAGE_SEEN}
        vals: dict[str, Any] = {"v": version, "next": version + 1 if usage else version}
        sets = ["#uv = :next", "#seen = :next"]
        for i, (resource, amount) in enumerate(sorted(usage.items())):
            names[f"#r{i}"] = resource
            vals[f"a{i}"] = amount
            sets.append(f"#r{i} = :a{i}")
        condition = "#uv = :v" if version else "(attribute_not_exists(#uv) OR #uv = :v)"
        try:
            self._table.client.update_item(
                TableName=self._table.name, Key=usage_key(pool), UpdateExpression="SET " + ", ".join(sets),
                ConditionExpression=condition, ExpressionAttributeNames=names, ExpressionAttributeValues=values(**vals))
        except ClientError as e:
            if error_code(e) == "ConditionalCheckFailedException":
                return False
            raise
        return True
