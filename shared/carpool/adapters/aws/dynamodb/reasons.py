"""Pods' pending reasons on the state table: items `WHY` / `<pod key>`, implementing
`carpool.state.reasons.PodReasonStore`.

One partition, read with one Query: the pods carpool cannot serve are few (a pod it can serve is
launched for and forgotten), so reading them all is cheaper than a read per pod. Expiry is checked in
code; the item's TTL only tidies the table.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from carpool.adapters.aws.dynamodb.codec import deserialize, epoch, from_epoch, ttl_epoch
from carpool.adapters.aws.dynamodb.table import TTL_ATTR, StateTable
from carpool.state.reasons import TTL, PodReasons

#: the partition holding every pending pod's reasons
WHY = "WHY"


class DynamoPodReasons:
    """`carpool.state.reasons.PodReasonStore`: items `WHY` / `<pod key>`."""

    def __init__(self, table_name: str | None = None, client: Any | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._table = StateTable(table_name, client)
        self._sleep = sleep

    def all(self, now: datetime) -> list[PodReasons]:
        entries = (self._entry(deserialize(item)) for item in self._table.query_partition(WHY))
        return [e for e in entries if e.live(now)]

    def save(self, entries: Iterable[PodReasons]) -> None:
        self._table.batch_put((self._item(e) for e in entries), self._sleep)

    def forget(self, pods: Iterable[str]) -> None:
        for pod in pods:
            self._table.client.delete_item(TableName=self._table.name, Key={"pk": {"S": WHY}, "sk": {"S": pod}})

    @staticmethod
    def _item(e: PodReasons) -> dict[str, Any]:
        return {"pk": WHY, "sk": e.pod, "reasons": dict(e.reasons), "since": epoch(e.since),
                "confirmed": epoch(e.confirmed), TTL_ATTR: ttl_epoch(e.confirmed + TTL)}

    @staticmethod
    def _entry(plain: dict[str, Any]) -> PodReasons:
        return PodReasons(pod=str(plain["sk"]), reasons={str(k): str(v) for k, v in plain["reasons"].items()},
                          since=from_epoch(plain["since"]), confirmed=from_epoch(plain["confirmed"]))
