"""Node classes that refused a launch, on the state table: items `NOTREADY` / `<EC2NodeClass name>`,
implementing `carpool.state.not_ready.NotReadyStore`. One partition, read with one Query (a config has a
few node classes); expiry is checked in code, the item's TTL only tidies the table."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from carpool.adapters.aws.dynamodb.codec import deserialize, epoch, from_epoch, ttl_epoch
from carpool.adapters.aws.dynamodb.table import TTL_ATTR, StateTable
from carpool.state.not_ready import TTL, NodeClassNotReady

#: the partition holding every node class's last refused launch
NOT_READY = "NOTREADY"


class DynamoNotReady:
    """`carpool.state.not_ready.NotReadyStore`: items `NOTREADY` / `<nodeclass>`."""

    def __init__(self, table_name: str | None = None, client: Any | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._table = StateTable(table_name, client)
        self._sleep = sleep

    def all(self, now: datetime) -> list[NodeClassNotReady]:
        entries = (self._entry(deserialize(item)) for item in self._table.query_partition(NOT_READY))
        return [e for e in entries if e.live(now)]

    def save(self, entries: Iterable[NodeClassNotReady]) -> None:
        self._table.batch_put((self._item(e) for e in entries), self._sleep)

    def forget(self, nodeclasses: Iterable[str]) -> None:
        for name in nodeclasses:
            self._table.client.delete_item(TableName=self._table.name, Key={"pk": {"S": NOT_READY}, "sk": {"S": name}})

    @staticmethod
    def _item(e: NodeClassNotReady) -> dict[str, Any]:
        return {"pk": NOT_READY, "sk": e.nodeclass, "cause": e.cause, "message": e.message,
                "nodepools": list(e.nodepools), "since": epoch(e.since), "confirmed": epoch(e.confirmed),
                TTL_ATTR: ttl_epoch(e.confirmed + TTL)}

    @staticmethod
    def _entry(plain: dict[str, Any]) -> NodeClassNotReady:
        return NodeClassNotReady(nodeclass=str(plain["sk"]), cause=str(plain["cause"]), message=str(plain["message"]),
                                 nodepools=tuple(str(p) for p in plain["nodepools"]),
                                 since=from_epoch(plain["since"]), confirmed=from_epoch(plain["confirmed"]))
