"""The set of instance types carpool may launch in one region.

A `Catalog` is a read-only mapping name -> `InstanceType`. It is built from live EC2 responses
(`builder.from_ec2`), decoded from its stored form (`Catalog.decode`: the live catalog the state store
keeps warm), or decoded from the offline snapshot shipped with the package (`Catalog.snapshot`), which lets
the CLI, the tests and the simulation work without AWS credentials. Neither decoding path builds.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache

from carpool.catalog import encoding, snapshot
from carpool.catalog.instance_type import InstanceType


class UnknownInstanceType(LookupError):
    """A type name the catalog does not hold; carries close matches so the message can suggest them."""

    def __init__(self, name: str, region: str, suggestions: list[str]) -> None:
        self.name = name
        self.region = region
        self.suggestions = suggestions
        hint = f" (did you mean {', '.join(suggestions)}?)" if suggestions else ""
        super().__init__(f"unknown instance type {name!r} in {region}{hint}")

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True, eq=False)
class Catalog(Mapping[str, InstanceType]):
    """Instance types of one region, by name. Shared and cached: never mutate `types`."""

    region: str
    types: dict[str, InstanceType]

    @classmethod
    def snapshot(cls, region: str = "us-east-1") -> Catalog:
        """The offline catalog shipped with carpool (decoded once per process, then shared)."""
        return _snapshot(region)

    @classmethod
    def decode(cls, data: bytes) -> Catalog:
        """A catalog from `encode`'s bytes (`encoding.CatalogDecodeError` when they are not one)."""
        decoded = encoding.decode(data)
        return cls(decoded.region, decoded.types)

    def encode(self, source: str) -> bytes:
        """The compact, compressed form (`carpool.catalog.encoding`); `source` says where it came from."""
        return encoding.encode(self.region, self.types, source)

    # -- mapping --------------------------------------------------------------------------------------
    def __getitem__(self, name: str) -> InstanceType:
        return self.types[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.types)

    def __len__(self) -> int:
        return len(self.types)

    def __repr__(self) -> str:
        return f"Catalog(region={self.region!r}, types={len(self.types)})"

    # -- lookups --------------------------------------------------------------------------------------
    def require(self, name: str) -> InstanceType:
        """The named type, or `UnknownInstanceType` naming it and suggesting close matches."""
        found = self.types.get(name)
        if found is None:
            raise UnknownInstanceType(name, self.region, self.suggest(name))
        return found

    def suggest(self, name: str, limit: int = 3) -> list[str]:
        """Close spellings of `name` among the catalog's types (for "did you mean" messages)."""
        return difflib.get_close_matches(name, list(self.types), n=limit, cutoff=0.6)


@lru_cache(maxsize=8)
def _snapshot(region: str) -> Catalog:
    decoded = snapshot.load(region)
    return Catalog(decoded.region, decoded.types)
