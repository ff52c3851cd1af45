"""The compact, compressed form of a built catalog: what ships as the offline snapshot and what the state
store holds as the live catalog.

A catalog is built once (`builder`, from EC2's answers) and then only read, by every function's cold start
and every `carpool plan`. So the stored form is the *built* instance types, not EC2's raw shapes: loading
is decoding, never rebuilding, and a reader needs neither the builder nor EC2 access. Requirements are not
stored: they are derived from labels and offerings (`instance_requirements`) exactly as the builder does.

Layout (JSON, gzipped; `FORMAT` changes when it does):
    {"format", "region", "source", "zones": [...], "capacityTypes": [...], "labelKeys": [...],
     "fields": [scalar InstanceType fields], "types": [[[scalars], [[label key index, value]...],
                                                      [[zone index, capacity type index, price, available]...]]]}
Zones, capacity types and label keys are written once and referenced by index, which with gzip keeps the
us-east-1 catalog (about 1,300 types, 12,000 offerings with live spot prices) far below DynamoDB's 400 KB
item limit.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from carpool import cyclic_gc
from carpool.catalog.instance_type import InstanceType, Offering, instance_requirements

FORMAT = 2
#: InstanceType fields stored on their own rather than as scalars.
_STRUCTURED = ("labels", "offerings", "requirements")
_SCALARS = (str, int, float, bool)


class CatalogDecodeError(ValueError):
    """Bytes that are not a catalog this version of carpool can read (corrupt, truncated, other format)."""


@dataclass(frozen=True)
class Decoded:
    """A decoded catalog: its region, where it came from, and its instance types by name."""

    region: str
    source: str
    types: dict[str, InstanceType]


def scalar_fields() -> list[str]:
    """The InstanceType fields stored as plain values, in declaration order."""
    return [f.name for f in dataclasses.fields(InstanceType) if f.name not in _STRUCTURED]


def document(region: str, types: Mapping[str, InstanceType], source: str) -> dict[str, Any]:
    """The JSON document of `types` (sorted by name, so equal catalogs give equal documents)."""
    fields = scalar_fields()
    ordered = [types[name] for name in sorted(types)]
    zones = sorted({o.zone for it in ordered for o in it.offerings})
    capacity_types = sorted({o.capacity_type for it in ordered for o in it.offerings})
    label_keys = sorted({k for it in ordered for k in it.labels})
    zone_index = {z: i for i, z in enumerate(zones)}
    ct_index = {c: i for i, c in enumerate(capacity_types)}
    key_index = {k: i for i, k in enumerate(label_keys)}
    rows = []
    for it in ordered:
        scalars = [getattr(it, f) for f in fields]
        for name, value in zip(fields, scalars, strict=True):
            if not isinstance(value, _SCALARS):
                raise TypeError(f"InstanceType.{name} of {it.name} is a {type(value).__name__}: not encodable")
        labels = [[key_index[k], v] for k, v in it.labels.items()]
        offerings = [[zone_index[o.zone], ct_index[o.capacity_type], o.price, int(o.available)] for o in it.offerings]
        rows.append([scalars, labels, offerings])
    return {
        "format": FORMAT, "region": region, "source": source, "zones": zones, "capacityTypes": capacity_types,
        "labelKeys": label_keys, "fields": fields, "types": rows,
    }  # fmt: skip


def encode(region: str, types: Mapping[str, InstanceType], source: str) -> bytes:
    """`document` as gzipped JSON, byte-for-byte reproducible (no timestamp in the gzip header)."""
    raw = json.dumps(document(region, types, source), separators=(",", ":")).encode()
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, compresslevel=9, mtime=0) as gz:
        gz.write(raw)
    return buffer.getvalue()


def decode(data: bytes) -> Decoded:
    """The catalog in `data` (from `encode`); `CatalogDecodeError` for anything else. Decoding allocates
    some 40,000 containers that all stay alive with the catalog, so the cyclic collector is paused."""
    with cyclic_gc.paused():
        return _decode(data)


def _decode(data: bytes) -> Decoded:
    # msgspec (a dependency of lightkube, which every function loads) parses JSON into the same plain
    # objects as `json.loads`, in half its time; imported here, as only a decode needs it
    import msgspec

    try:
        doc = msgspec.json.decode(gzip.decompress(data))
    except (OSError, EOFError, ValueError, msgspec.DecodeError) as exc:  # BadGzipFile is an OSError
        raise CatalogDecodeError(f"not a gzipped catalog document: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise CatalogDecodeError(f"catalog format {found!r} is not supported (expected {FORMAT})")
    try:
        return _from_document(doc)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise CatalogDecodeError(f"malformed catalog document: {exc!r}") from exc


def _from_document(doc: Mapping[str, Any]) -> Decoded:
    zones, capacity_types, keys = doc["zones"], doc["capacityTypes"], doc["labelKeys"]
    fields = doc["fields"]
    known = scalar_fields()
    missing, unknown = set(known) - set(fields), set(fields) - set(known)
    if missing:  # written by a carpool whose InstanceType had fewer fields: defaults would be guesses
        raise ValueError(f"document lacks InstanceType fields {sorted(missing)}")
    if unknown:  # written by a newer carpool: this one cannot say what they mean
        raise ValueError(f"document has unknown InstanceType fields {sorted(unknown)}")
    types: dict[str, InstanceType] = {}
    for scalars, label_pairs, offering_rows in doc["types"]:
        labels = {keys[k]: v for k, v in label_pairs}
        offerings = [_offering(zones[z], capacity_types[c], p, a == 1) for z, c, p, a in offering_rows]
        it = _instance_type(dict(zip(fields, scalars, strict=True)), labels, offerings)
        types[it.name] = it
    return Decoded(str(doc["region"]), str(doc.get("source", "")), types)


# -- building the decoded objects ---------------------------------------------------------------------
# A cold start decodes the whole catalog (some 1,300 types and 12,000 offerings) before it can schedule.
# Both classes are frozen dataclasses, whose generated `__init__` sets each field through
# `object.__setattr__` by name; for these plain-data classes (no `__post_init__`, no converters) the same
# objects are made at a fraction of the cost by filling their slots (Offering) or their `__dict__`
# (InstanceType) directly. `_FAST` says whether the classes are still such that this gives what
# `__init__` gives (tests/unit/catalog check it field by field); otherwise the constructors are used.
_OFFERING_FIELDS = ("zone", "capacity_type", "price", "available")
_FAST = (
    tuple(f.name for f in dataclasses.fields(Offering)) == _OFFERING_FIELDS
    and "__slots__" in Offering.__dict__ and "__dict__" not in dir(Offering)
    and "__slots__" not in InstanceType.__dict__
    and not hasattr(Offering, "__post_init__") and not hasattr(InstanceType, "__post_init__")
)


def _offering_slots() -> Any:
    new = object.__new__
    zone, capacity_type, price, available = (getattr(Offering, n).__set__ for n in _OFFERING_FIELDS)

    def build(z: str, c: str, p: float, a: bool) -> Offering:
        o = new(Offering)
        zone(o, z)
        capacity_type(o, c)
        price(o, p)
        available(o, a)
        return o

    return build


_offering: Any = _offering_slots() if _FAST else Offering


def _instance_type(scalars: dict[str, Any], labels: dict[str, str], offerings: list[Offering]) -> InstanceType:
    requirements = instance_requirements(labels, offerings)
    if not _FAST:
        return InstanceType(**scalars, labels=labels, offerings=offerings, requirements=requirements)
    it = object.__new__(InstanceType)
    it.__dict__.update(scalars, labels=labels, offerings=offerings, requirements=requirements)
    return it
