"""The offline catalog snapshot shipped with the package: where it lives and how it is read.

The snapshot is a built catalog in `carpool.catalog.encoding`'s form, so reading it is decoding: the
loader never builds (the builder ran when the file was generated, `tools/generate_catalog.py`, from
moto's copy of EC2's DescribeInstanceTypes/Offerings answers and the shipped on-demand price table). It is
what `carpool plan` and the tests use, and what a Lambda falls back to while no live catalog is stored.

Spot prices are not real here: they change hourly, so offline spot offerings carry
`prices.estimate_spot` of the on-demand price.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

from carpool.catalog import encoding

_FILENAME = "catalog-{region}.json.gz"


class SnapshotNotFound(LookupError):
    """No snapshot ships for the requested region."""


def available_regions() -> list[str]:
    """Regions with a shipped snapshot."""
    data = resources.files("carpool.catalog").joinpath("data")
    names = [entry.name for entry in data.iterdir()]
    return sorted(n[len("catalog-") : -len(".json.gz")] for n in names if n.startswith("catalog-") and n.endswith(".json.gz"))


def read(region: str = "us-east-1") -> bytes:
    """The encoded snapshot for `region`; `SnapshotNotFound` when none ships."""
    resource = resources.files("carpool.catalog").joinpath("data/" + _FILENAME.format(region=region))
    if not resource.is_file():
        raise SnapshotNotFound(
            f"no offline catalog for region {region!r} (shipped: {', '.join(available_regions()) or 'none'})"
        )
    return resource.read_bytes()


@lru_cache(maxsize=8)
def load(region: str = "us-east-1") -> encoding.Decoded:
    """The decoded snapshot for `region`, once per process (shared: do not mutate its types)."""
    return encoding.decode(read(region))


def write(data: bytes, path: Path) -> int:
    """Write an encoded catalog (`encoding.encode`) to `path`; returns its size in bytes."""
    path.write_bytes(data)
    return len(data)


def default_path(region: str) -> Path:
    """Where the snapshot for `region` lives inside the source tree (for the generator)."""
    return Path(__file__).parent / "data" / _FILENAME.format(region=region)
