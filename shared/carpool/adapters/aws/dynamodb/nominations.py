"""A pod's nomination as the state table stores it: items `POD#<pod>` / `NOMINATION`, on the index under
`NOMINATIONS`, with the claim holding the pod and until when.

Part of `DynamoLedger` (`carpool.state.ports.ClaimLedger`, in `ledger`): nominations are written in the
same transactions as their claim, each conditional on the pod being free, so DynamoDB decides which of
two racing provisioners gets a pod. This module builds those entries; whether a nomination still holds
also depends on its claim, which the ledger reads (`carpool.state.models.holds_nominations`).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

from carpool.adapters.aws.dynamodb.codec import attribute_value, epoch, serialize, ttl_epoch, values
from carpool.adapters.aws.dynamodb.table import TTL_ATTR, TransactionOp

#: the index partition listing every nomination
NOMINATIONS = "NOMINATIONS"
#: keep nomination items this long past their expiry before DynamoDB's TTL may delete them
NOMINATION_TTL_GRACE = timedelta(hours=1)


def nomination_key(pod: str) -> dict[str, Any]:
    return serialize({"pk": f"POD#{pod}", "sk": "NOMINATION"})


def takeover(replacing: Collection[str], lapsed: str | None) -> Collection[str]:
    """The claims a nomination may be taken from: those being replaced, and its holder if it lapsed."""
    return replacing if lapsed is None else {*replacing, lapsed}


class Nominations:
    """The Puts nominating pods to one claim until one time, as of one `now`. What every pod's Put has in
    common (its claim, expiry, TTL and condition values) is converted to DynamoDB's wire form once, not
    once per pod: a burst's transactions carry 100 nominations each. The Puts are exactly what one
    written pod by pod would be (same attributes in the same order, same condition). The pod's key is
    the item's own (`pk`) and its index sort key; readers take it from `pk`, so it is not stored a third
    time (nominations written with a `pod` attribute read the same)."""

    def __init__(self, table: str, claim_name: str, now: datetime, until: datetime) -> None:
        self._table = table
        self._common = {
            "claim": attribute_value(claim_name),
            "until": attribute_value(epoch(until)),
            TTL_ATTR: attribute_value(ttl_epoch(until + NOMINATION_TTL_GRACE)),
        }
        self._now = epoch(now)
        self._conditions: dict[frozenset[str], tuple[str, dict[str, str], dict[str, Any]]] = {}

    def _condition(self, replacing: Collection[str]) -> tuple[str, dict[str, str], dict[str, Any]]:
        key = frozenset(replacing)
        found = self._conditions.get(key)
        if found is None:
            names = {"#until": "until"}
            replaced = {f"r{i}": name for i, name in enumerate(sorted(key))}
            taken_over = ""
            if replaced:
                names["#claim"] = "claim"
                taken_over = f" OR #claim IN ({', '.join(':' + k for k in replaced)})"
            # free, or the previous nomination has expired (the same rule as MemoryLedger: until <= now),
            # or it is held by a claim being replaced
            found = ("attribute_not_exists(pk) OR #until <= :now" + taken_over, names,
                     values(now=self._now, **replaced))
            self._conditions[key] = found
        return found

    def op(self, pod: str, replacing: Collection[str] = ()) -> TransactionOp:
        condition, names, expression_values = self._condition(replacing)
        # every Put its own containers (none shared with another request), as `serialize` makes them
        item = {"pk": attribute_value(f"POD#{pod}"), "sk": {"S": "NOMINATION"}, "gsi1pk": {"S": NOMINATIONS},
                "gsi1sk": attribute_value(pod)}
        item.update((name, dict(value)) for name, value in self._common.items())
        request = {
            "Put": {
                "TableName": self._table,
                "Item": item,
                "ConditionExpression": condition,
                "ExpressionAttributeNames": dict(names),
                "ExpressionAttributeValues": {k: dict(v) for k, v in expression_values.items()},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
        return TransactionOp(request, "pod", pod)


def unnominate(table: str, pod: str, claim_name: str) -> TransactionOp:
    """The pod's nomination deleted if `claim_name` still holds it (never another claim's)."""
    request = {
        "Delete": {
            "TableName": table,
            "Key": nomination_key(pod),
            "ConditionExpression": "#claim = :claim",
            "ExpressionAttributeNames": {"#claim": "claim"},
            "ExpressionAttributeValues": values(claim=claim_name),
        }
    }
    return TransactionOp(request, "pod", pod)
