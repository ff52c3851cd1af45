"""The live instance-type catalog kept in the state table, so a cold start reads it in one GetItem.

One item per region: pk `CATALOG#<region>`, sk `CATALOG`, with `refreshedAt` (epoch seconds), `format`
and `data` (the catalog in `carpool.catalog.encoding`'s gzipped form, a binary attribute). Readers use
eventually consistent reads: a refresh that a reader misses by a second is picked up at its next check.

DynamoDB refuses items over 400 KB (names and values together). The us-east-1 catalog with live spot
prices encodes to roughly a fifth of that; a catalog that would not fit is refused here with a clear
error rather than by DynamoDB, and readers keep using what they have (or the shipped snapshot).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from carpool import environment
from carpool.adapters.aws import session
from carpool.adapters.aws.dynamodb.codec import epoch, from_epoch
from carpool.adapters.aws.dynamodb.table import TABLE_ENV
from carpool.app.sources import StoredCatalog
from carpool.catalog import encoding

#: DynamoDB's item size limit is 400 KB; leave room for the key and attribute names.
MAX_DATA_BYTES = 390_000
SORT_KEY = "CATALOG"


class CatalogTooLarge(ValueError):
    """An encoded catalog that DynamoDB would refuse as one item."""


def catalog_key(region: str) -> dict[str, Any]:
    return {"pk": {"S": f"CATALOG#{region}"}, "sk": {"S": SORT_KEY}}


class DynamoCatalogStore:
    """`carpool.app.sources.CatalogStore` on the state table."""

    def __init__(self, table_name: str | None = None, client: Any | None = None) -> None:
        self.table = table_name or environment.get(TABLE_ENV, "")
        if not self.table:
            raise ValueError(f"no state table: set {TABLE_ENV}")
        self._client = client

    @property
    def client(self) -> Any:
        """Made on first use: the state adapters share the cached client (`session`)."""
        if self._client is None:
            self._client = session.client("dynamodb")
        return self._client

    def read(self, region: str) -> StoredCatalog | None:
        item = self.client.get_item(TableName=self.table, Key=catalog_key(region)).get("Item")
        if not item or "data" not in item or "refreshedAt" not in item:
            return None
        return StoredCatalog(from_epoch(item["refreshedAt"]["N"]), bytes(item["data"]["B"]))

    def refreshed_at(self, region: str) -> datetime | None:
        item = self.client.get_item(
            TableName=self.table, Key=catalog_key(region), ProjectionExpression="refreshedAt"
        ).get("Item")
        return from_epoch(item["refreshedAt"]["N"]) if item and "refreshedAt" in item else None

    def write(self, region: str, stored: StoredCatalog) -> None:
        if len(stored.data) > MAX_DATA_BYTES:
            raise CatalogTooLarge(
                f"the {region} catalog encodes to {len(stored.data):,} bytes, over the {MAX_DATA_BYTES:,} bytes "
                "one DynamoDB item can hold"
            )
        item = {
            **catalog_key(region),
            "refreshedAt": {"N": str(epoch(stored.refreshed_at))},
            "format": {"N": str(encoding.FORMAT)},
            "data": {"B": stored.data},
        }
        self.client.put_item(TableName=self.table, Item=item)
