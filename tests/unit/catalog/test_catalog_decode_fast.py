"""Decoding builds the same objects whether it fills them directly (the cold-start path) or calls the
dataclass constructors."""

from __future__ import annotations

import dataclasses

import pytest

from carpool.catalog import encoding, snapshot
from carpool.catalog.instance_type import InstanceType, Offering


def _decode_with_constructors(monkeypatch: pytest.MonkeyPatch, data: bytes) -> encoding.Decoded:
    with monkeypatch.context() as m:
        m.setattr(encoding, "_FAST", False)
        m.setattr(encoding, "_offering", Offering)
        return encoding.decode(data)


def test_the_fast_path_is_taken_for_these_classes() -> None:
    assert encoding._FAST
    assert encoding._offering is not Offering


def test_direct_filling_gives_what_the_constructors_give(monkeypatch: pytest.MonkeyPatch) -> None:
    data = snapshot.read()
    fast, slow = encoding.decode(data), _decode_with_constructors(monkeypatch, data)
    assert list(fast.types) == list(slow.types) and len(fast.types) > 1000
    for name, it in fast.types.items():
        other = slow.types[name]
        assert type(it) is InstanceType and it == other and hash(it) == hash(other)
        for f in dataclasses.fields(InstanceType):
            assert getattr(it, f.name) == getattr(other, f.name), (name, f.name)
        for mine, theirs in zip(it.offerings, other.offerings, strict=True):
            assert type(mine) is Offering and mine == theirs and hash(mine) == hash(theirs)
            assert dataclasses.astuple(mine) == dataclasses.astuple(theirs)
    assert dataclasses.asdict(fast.types["m5.large"]) == dataclasses.asdict(slow.types["m5.large"])


def test_decoded_objects_stay_frozen() -> None:
    it = encoding.decode(snapshot.read()).types["m5.large"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        it.vcpus = 3  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        it.offerings[0].price = 0.0  # type: ignore[misc]


def test_a_document_with_fields_this_version_does_not_know_is_refused() -> None:
    import gzip
    import json

    doc = json.loads(gzip.decompress(snapshot.read()))
    doc["fields"].append("futureField")
    for row in doc["types"]:
        row[0].append(1)
    with pytest.raises(encoding.CatalogDecodeError, match="futureField"):
        encoding.decode(gzip.compress(json.dumps(doc).encode()))
