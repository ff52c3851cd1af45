"""Learned node capacity on the state table: items `CAP` / `<instance type>#<image id>`, implementing
`carpool.state.ports.CapacityCache`.

What a registered node reports (its capacity and allocatable) is kept per instance type and image, so the
next launch of that type sizes its pods by what such a node really offers (`carpool.capacity`). Several
registrars may observe the same type at once, so a record is merged and written back under optimistic
locking (`version`): a write that lost the race reads again, and no sample is lost. Expiry is checked in
code; the TTL attribute only tidies the table.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from carpool import capacity as capacity_rules
from carpool.adapters.aws.dynamodb.codec import deserialize, from_dynamo, serialize, ttl_epoch, utc, values
from carpool.adapters.aws.dynamodb.table import TTL_ATTR, StateTable, error_code
from carpool.state.models import CapacityRecord

#: the partition holding every record
CAP = "CAP"
#: attempts for an optimistic capacity update (registrars of one type and AMI rarely overlap)
OBSERVE_ATTEMPTS = 8


def record_item(record: CapacityRecord, version: int) -> dict[str, Any]:
    return {
        "pk": CAP,
        "sk": f"{record.instance_type}#{record.image_id}",
        "instanceType": record.instance_type,
        "imageId": record.image_id,
        "amiFamily": record.ami_family,
        "capacity": record.capacity,
        "allocatable": record.allocatable,
        "samples": record.samples,
        "firstSeen": utc(record.first_seen).isoformat(),
        "lastSeen": utc(record.last_seen).isoformat(),
        # exact expiry for the code, whole seconds for DynamoDB's TTL
        "expires": utc(record.expires_at).isoformat(),
        TTL_ATTR: ttl_epoch(record.expires_at),
        "version": version,
    }


def record_from_item(item: Mapping[str, Any]) -> tuple[CapacityRecord, int]:
    plain = from_dynamo(deserialize(item))
    record = CapacityRecord(
        instance_type=plain["instanceType"],
        image_id=plain["imageId"],
        ami_family=plain.get("amiFamily", ""),
        capacity=plain.get("capacity", {}),
        allocatable=plain.get("allocatable", {}),
        samples=plain.get("samples", 1),
        first_seen=datetime.fromisoformat(plain["firstSeen"]),
        last_seen=datetime.fromisoformat(plain["lastSeen"]),
        expires_at=datetime.fromisoformat(plain["expires"]),
    )
    return record, int(plain.get("version", 0))


class CapacityUpdateConflict(RuntimeError):
    """`observe` lost the optimistic-locking race `attempts` times in a row."""


class DynamoCapacityCache:
    """`carpool.state.ports.CapacityCache`: items `CAP` / `<type>#<image id>` with a `version`."""

    def __init__(
        self,
        table_name: str | None = None,
        client: Any | None = None,
        sleep: Callable[[float], None] = time.sleep,
        attempts: int = OBSERVE_ATTEMPTS,
    ) -> None:
        self._table = StateTable(table_name, client)
        self._sleep = sleep
        self._attempts = attempts

    def all(self, now: datetime) -> dict[tuple[str, str], CapacityRecord]:
        out = {}
        for item in self._table.query_partition(CAP):
            record, _ = record_from_item(item)
            if not capacity_rules.is_expired(record, now):
                out[record.key] = record
        return out

    def observe(self, record: CapacityRecord, now: datetime) -> CapacityRecord:
        """Read, merge (`carpool.capacity.merge`), write back only if nobody wrote in between."""
        key = serialize({"pk": CAP, "sk": f"{record.instance_type}#{record.image_id}"})
        for attempt in range(self._attempts):
            item = self._table.get(key)
            existing, version = record_from_item(item) if item is not None else (None, 0)
            if existing is not None and capacity_rules.is_expired(existing, now):
                existing = None  # an expired value is no evidence, but its version still guards the write
            merged = capacity_rules.merge(existing, record)
            if self._put_if_version(merged, version, item is not None):
                return merged
            self._sleep(random.random() * min(1.0, 0.02 * 2**attempt))
        raise CapacityUpdateConflict(f"capacity of {record.key} changed {self._attempts} times while merging")

    def _put_if_version(self, record: CapacityRecord, version: int, existed: bool) -> bool:
        condition: dict[str, Any] = (
            {
                "ConditionExpression": "#v = :v",
                "ExpressionAttributeNames": {"#v": "version"},
                "ExpressionAttributeValues": values(v=version),
            }
            if existed
            else {"ConditionExpression": "attribute_not_exists(pk)"}
        )
        try:
            self._table.client.put_item(
                TableName=self._table.name, Item=serialize(record_item(record, version + 1)), **condition
            )
            return True
        except ClientError as e:
            if error_code(e) == "ConditionalCheckFailedException":
                return False
            raise
