"""A claim as the state table stores it: items `CLAIM#<name>` / `CLAIM`, listed on the index under `CLAIMS`.

Part of `DynamoLedger` (`carpool.state.ports.ClaimLedger`, in `ledger`), which writes claims together with
nominations and pool usage in one transaction; this module is the claim's share: its key and item, the
name lists stored as chunks, and the transaction entries that put or grow a claim. The claim's fields are
top-level camelCase attributes (`instanceId` is the design's attribute), so any field `Claim` gains is
stored without a change here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic.alias_generators import to_camel

from carpool.adapters.aws.dynamodb.codec import deserialize, from_dynamo, serialize, values
from carpool.adapters.aws.dynamodb.table import Projection, TransactionOp
from carpool.state.models import Claim

#: the index partition listing every claim
CLAIMS = "CLAIMS"
#: what separates the names of one chunk of a stored name list (see `chunked`); Kubernetes names (DNS
#: labels and subdomains) and EC2 instance type names cannot hold it
SEPARATOR = "\n"
#: the claim attributes stored as `chunked` name lists
_CHUNKED = ("pods", "instanceTypes")
_CLAIM_FIELDS = {to_camel(name): name for name in Claim.model_fields}

#: what the nomination rule reads of a claim (not its pod list, hundreds of keys for a burst's node)
CLAIM_HOLD = Projection("pk, #st, registeredAt", {"#st": "status"})


def claim_key(name: str) -> dict[str, Any]:
    return serialize({"pk": f"CLAIM#{name}", "sk": "CLAIM"})


def chunked(names: Sequence[str]) -> list[str]:
    """A list of names as a claim stores it (`pods`, `instanceTypes`), or as `nominate` appends to it: a
    list of chunks, each the names written together joined by `SEPARATOR` (one chunk for the claim's
    pods when it is reserved, one more per in-flight nomination). A burst's claim lists some 500 pods
    and 60-odd instance types, and every watcher, provisioner and disruption run reads every claim: as a
    chunk instead of 500 list elements, each is one value to write, send, check and parse, not 500.
    The order of the names is kept."""
    for name in names:
        if SEPARATOR in name:
            raise ValueError(f"{name[:80]!r} holds a line break: no Kubernetes or instance type name does")
    return [SEPARATOR.join(names)] if names else []


def unchunked(chunks: Iterable[str]) -> list[str]:
    """The names of a stored `chunked` list, in order. An element without a separator is one name, so a
    list stored one element per name reads the same."""
    return [name for chunk in chunks for name in chunk.split(SEPARATOR) if name]


def claim_item(claim: Claim) -> dict[str, Any]:
    """Claim fields as top-level camelCase attributes (so `instanceId` is the design's attribute); its
    pods and instance types `chunked`."""
    body = {to_camel(k): v for k, v in claim.model_dump(mode="json", exclude_none=True).items()}
    for name in _CHUNKED:
        body[name] = chunked(body.get(name, []))
    return {
        "pk": f"CLAIM#{claim.name}",
        "sk": "CLAIM",
        "gsi1pk": CLAIMS,
        "gsi1sk": f"{claim.status.value}#{claim.name}",
        **body,
    }


def claim_from_item(item: Mapping[str, Any]) -> Claim:
    plain = from_dynamo(deserialize(item))
    for name in _CHUNKED:
        if isinstance(plain.get(name), list):
            plain[name] = unchunked(plain[name])
    return Claim.model_validate({_CLAIM_FIELDS[k]: v for k, v in plain.items() if k in _CLAIM_FIELDS})


def version_condition(version: int) -> tuple[str, dict[str, str], dict[str, Any]]:
    """The stored claim exists at `version` (0 also matches a claim written before versions existed)."""
    condition = "attribute_exists(pk) AND #ver = :ver"
    if version == 0:
        condition = "attribute_exists(pk) AND (attribute_not_exists(#ver) OR #ver = :ver)"
    return condition, {"#ver": "version"}, values(ver=version)


# -- transaction entries --------------------------------------------------------------------------------
def new_claim_put(table: str, claim: Claim) -> TransactionOp:
    """The claim written only if no claim of its name exists (a reservation's)."""
    request = {
        "Put": {
            "TableName": table,
            "Item": serialize(claim_item(claim)),
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }
    return TransactionOp(request, "claim", claim.name)


def versioned_put(table: str, claim: Claim) -> TransactionOp:
    """The claim written as version `claim.version + 1` if the stored one is `claim.version`."""
    item = claim_item(claim.model_copy(update={"version": claim.version + 1}))
    condition, names, vals = version_condition(claim.version)
    request = {
        "Put": {
            "TableName": table,
            "Item": serialize(item),
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": vals,
        }
    }
    return TransactionOp(request, "claim", claim.name)


def grow_claim(table: str, claim_name: str, pods: list[str], requests: Mapping[str, int]) -> TransactionOp:
    """The in-flight claim's `pods` and `requested` grown in place (a nomination's share of its
    transaction)."""
    names = {"#pods": "pods", "#st": "status", "#ver": "version"}
    vals: dict[str, Any] = {"new": chunked(pods), "empty": [], "reserved": "reserved", "launched": "launched",
                            "zero": 0, "one": 1}
    if requests:  # DynamoDB rejects a name the expressions do not use (later chunks add no requests)
        names["#req"] = "requested"
    sets = ["#pods = list_append(if_not_exists(#pods, :empty), :new)", "#ver = if_not_exists(#ver, :zero) + :one"]
    for i, (resource, delta) in enumerate(sorted(requests.items())):
        names[f"#k{i}"] = resource
        vals[f"d{i}"] = delta
        sets.append(f"#req.#k{i} = if_not_exists(#req.#k{i}, :zero) + :d{i}")
    request = {
        "Update": {
            "TableName": table,
            "Key": claim_key(claim_name),
            "UpdateExpression": "SET " + ", ".join(sets),
            "ConditionExpression": "attribute_exists(pk) AND #st IN (:reserved, :launched)",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values(**vals),
        }
    }
    return TransactionOp(request, "claim", claim_name)


def versioned_delete(table: str, claim: Claim) -> TransactionOp:
    """The claim deleted if the stored one is still `claim.version` (a release's share of its transaction)."""
    condition, names, vals = version_condition(claim.version)
    delete = {"TableName": table, "Key": claim_key(claim.name), "ConditionExpression": condition,
              "ExpressionAttributeNames": names, "ExpressionAttributeValues": vals}
    return TransactionOp({"Delete": delete}, "claim", claim.name)
