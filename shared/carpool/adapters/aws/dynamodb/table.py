"""The state table and its transactions: what every repository on it shares.

`StateTable` knows the table's name and client and the reads and batched writes DynamoDB pages or
throttles (Query pages, BatchGetItem's 100 keys, BatchWriteItem's 25 items, unprocessed items resent
with backoff). `transact` sends one TransactWriteItems, retried while another transaction merely
touched the same items, and turns a cancellation into `TransactionCancelled` naming, per item, what
it stood for (a claim, a pool's usage, a pod's nomination), so a repository can say why it was refused.

The key attributes and index names here are the ones `infra/state.py` creates the table with.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from carpool import environment
from carpool.adapters.aws import session
from carpool.adapters.aws.dynamodb.codec import serialize, values

TABLE_ENV = "CARPOOL_TABLE"
GSI = "gsi1"
TTL_ATTR = "expiresAt"
#: the attributes of an item that place it (key, index key, TTL), not what it holds
KEY_ATTRS = frozenset({"pk", "sk", "gsi1pk", "gsi1sk", TTL_ATTR})
#: TransactWriteItems' limit on items per transaction.
MAX_TRANSACTION_ITEMS = 100
#: BatchWriteItem's limit on items per call (and the claims `mark_launched_many` writes per transaction).
BATCH_WRITE_ITEMS = 25
#: attempts for a transaction that lost a TransactionConflict
CONFLICT_ATTEMPTS = 5
#: rounds of resending the items a BatchGetItem/BatchWriteItem left unprocessed (throttling) before failing
UNPROCESSED_ATTEMPTS = 5


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


@dataclass(frozen=True, slots=True)
class Projection:
    """The attributes a read returns (ProjectionExpression), with the names it needs aliased."""

    expression: str
    names: Mapping[str, str]

    def request(self) -> dict[str, Any]:
        return {"ProjectionExpression": self.expression, "ExpressionAttributeNames": dict(self.names)}


class StateTable:
    """The state table: name from `CARPOOL_TABLE` unless given, client from `session` unless given."""

    def __init__(self, table_name: str | None = None, client: Any | None = None) -> None:
        self.name = table_name or environment.get(TABLE_ENV, "")
        if not self.name:
            raise ValueError(f"no state table: set {TABLE_ENV}")
        self.client = client if client is not None else session.client("dynamodb")

    def query(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        """Every item of a Query, page after page."""
        for page in self.client.get_paginator("query").paginate(TableName=self.name, **kwargs):
            yield from page.get("Items", [])

    def query_partition(self, pk: str) -> Iterator[dict[str, Any]]:
        return self.query(KeyConditionExpression="pk = :pk", ExpressionAttributeValues=values(pk=pk))

    def query_index(self, gsi1pk: str) -> Iterator[dict[str, Any]]:
        return self.query(
            IndexName=GSI, KeyConditionExpression="gsi1pk = :pk", ExpressionAttributeValues=values(pk=gsi1pk)
        )

    def get(self, key: Mapping[str, Any]) -> dict[str, Any] | None:
        return self.client.get_item(TableName=self.name, Key=dict(key), ConsistentRead=True).get("Item")

    def batch_get(
        self, keys: Iterable[Mapping[str, Any]], sleep: Callable[[float], None] = time.sleep,
        projection: Projection | None = None,
    ) -> list[dict[str, Any]]:
        """BatchGetItem in groups of 100 (consistent reads), resending unprocessed keys with backoff a
        bounded number of times (unprocessed keys are how BatchGetItem reports throttling). With
        `projection`, only those attributes are read."""
        pending = [dict(k) for k in keys]
        out: list[dict[str, Any]] = []
        shape: dict[str, Any] = {"ConsistentRead": True, **(projection.request() if projection else {})}
        while pending:
            chunk, pending = pending[:100], pending[100:]
            request: dict[str, Any] = {self.name: {"Keys": chunk, **shape}}
            for attempt in range(UNPROCESSED_ATTEMPTS):
                answer = self.client.batch_get_item(RequestItems=request)
                out.extend(answer.get("Responses", {}).get(self.name, []))
                request = answer.get("UnprocessedKeys") or {}
                if not request:
                    break
                sleep(random.random() * min(2.0, 0.05 * 2**attempt))
            else:
                left = len(request.get(self.name, {}).get("Keys", []))
                raise RuntimeError(f"{left} keys left unprocessed in {self.name} (throttled)")
        return out

    def batch_put(self, items: Iterable[Mapping[str, Any]], sleep: Callable[[float], None]) -> None:
        """BatchWriteItem in groups of 25, resending unprocessed items with backoff."""
        requests = [{"PutRequest": {"Item": serialize(i)}} for i in items]
        for start in range(0, len(requests), 25):
            pending = requests[start : start + 25]
            for attempt in range(UNPROCESSED_ATTEMPTS):
                out = self.client.batch_write_item(RequestItems={self.name: pending})
                pending = out.get("UnprocessedItems", {}).get(self.name, [])
                if not pending:
                    break
                sleep(random.random() * min(2.0, 0.05 * 2**attempt))
            else:
                raise RuntimeError(f"{len(pending)} items left unprocessed in {self.name}")


# -- transactions ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TransactionOp:
    """One TransactWriteItems entry plus what it stands for (to explain a cancellation)."""

    request: dict[str, Any]
    what: str  # "claim", "usage" or "pod"
    subject: str  # claim name, nodepool or pod key


#: one cancelled entry: the op, DynamoDB's reason code, and the item as it was (when the op asked for it)
Failure = tuple[TransactionOp, str, dict[str, Any] | None]


class TransactionCancelled(Exception):
    """A transaction DynamoDB cancelled, with the ops that failed and why (raised by `transact`)."""

    def __init__(self, failures: list[Failure]) -> None:
        super().__init__(", ".join(f"{op.what} {op.subject}: {code}" for op, code, _ in failures))
        self.failures = failures

    @property
    def conflict_only(self) -> bool:
        return all(code == "TransactionConflict" for _, code, _ in self.failures)

    def without_pods(self, pods: Collection[str]) -> TransactionCancelled:
        """The same cancellation less the failures of these pods' nominations."""
        kept = [f for f in self.failures if not (f[0].what == "pod" and f[0].subject in pods)]
        return TransactionCancelled(kept)


def transact(table: StateTable, ops: list[TransactionOp], sleep: Callable[[float], None]) -> None:
    """TransactWriteItems, retried while the only reason is a TransactionConflict (another transaction
    touching the same items right now); conditional failures raise `TransactionCancelled` with the
    failed ops."""
    for attempt in range(CONFLICT_ATTEMPTS):
        try:
            table.client.transact_write_items(TransactItems=[op.request for op in ops])
            return
        except ClientError as e:
            if error_code(e) != "TransactionCanceledException":
                raise
            cancelled = _cancellation(ops, e)
            if not cancelled.conflict_only or attempt == CONFLICT_ATTEMPTS - 1:
                raise cancelled from e
            sleep(random.random() * 0.05 * 2**attempt)


def _cancellation(ops: list[TransactionOp], error: ClientError) -> TransactionCancelled:
    reasons = error.response.get("CancellationReasons") or []
    failures: list[Failure] = []
    for op, reason in zip(ops, reasons, strict=False):
        code = reason.get("Code", "None")
        if code and code != "None":
            failures.append((op, code, reason.get("Item")))
    if not failures:  # no reasons returned: blame every op rather than nothing
        failures = [(op, "Unknown", None) for op in ops]
    return TransactionCancelled(failures)
