"""Offerings found unavailable on the state table: items `ICE` / `<instance type>#<zone>#<capacity type>`,
implementing `carpool.state.ports.OfferingAvailability`.

An offering EC2 had no capacity for (a capacity error at launch, a spot interruption warning) is skipped
for a few minutes by every provisioner, not only the Lambda that was refused, as the AWS provider's
unavailable-offerings cache does within one process: so the mark is shared through the table, one
partition read with one Query. Expiry is checked in code; the TTL attribute only tidies the table.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from carpool.adapters.aws.dynamodb.codec import deserialize, epoch, from_epoch, ttl_epoch
from carpool.adapters.aws.dynamodb.table import TTL_ATTR, StateTable
from carpool.state.models import UnavailableOffering

#: the partition holding every offering marked unavailable
ICE = "ICE"


class DynamoOfferings:
    """`carpool.state.ports.OfferingAvailability`: items `ICE` / `<type>#<zone>#<capacity type>`."""

    def __init__(
        self,
        table_name: str | None = None,
        client: Any | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._table = StateTable(table_name, client)
        self._sleep = sleep

    def mark_unavailable(self, offerings: Iterable[UnavailableOffering]) -> None:
        latest = {o.key: o for o in offerings}  # one write per key (BatchWriteItem refuses duplicates)
        self._table.batch_put((self._item(o) for o in latest.values()), self._sleep)

    @staticmethod
    def _item(o: UnavailableOffering) -> dict[str, Any]:
        return {
            "pk": ICE,
            "sk": "#".join(o.key),
            "instanceType": o.instance_type,
            "zone": o.zone,
            "capacityType": o.capacity_type,
            "until": epoch(o.until),
            "reason": o.reason,
            TTL_ATTR: ttl_epoch(o.until),
        }

    def unavailable(self, now: datetime) -> set[tuple[str, str, str]]:
        return {o.key for o in self.marked(now)}

    def marked(self, now: datetime) -> list[UnavailableOffering]:
        """The offerings still marked at `now`, with until when and why (what `carpool status` lists)."""
        limit = epoch(now)
        out = []
        for item in self._table.query_partition(ICE):
            plain = deserialize(item)
            if plain["until"] > limit:
                out.append(UnavailableOffering(instance_type=str(plain["instanceType"]), zone=str(plain["zone"]),
                                               capacity_type=str(plain["capacityType"]),
                                               until=from_epoch(plain["until"]), reason=str(plain.get("reason", ""))))
        return out
