"""Decoding a catalog runs with the cyclic garbage collector paused (what it allocates stays alive and
holds no cycle), restores the collector as it found it, and gives the same catalog from JSON parsed by
msgspec as from the standard library's parser; an instance type's requirements made in one step equal
those made one requirement at a time."""

from __future__ import annotations

import gc
import gzip
import json
from collections.abc import Iterator
from typing import Any

import pytest

from carpool import labels as L
from carpool.catalog import CatalogDecodeError, encoding, snapshot
from carpool.catalog.instance_type import instance_requirements
from carpool.requirements import Requirement, Requirements


@pytest.fixture
def collector_enabled() -> Iterator[None]:
    """The collector on for the test, and left after it as it was before (a test may switch it off)."""
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def test_the_collector_is_off_while_decoding_and_on_again_after(
    monkeypatch: pytest.MonkeyPatch, collector_enabled: None
) -> None:
    seen: list[bool] = []
    build = encoding._from_document

    def watched(doc: Any) -> encoding.Decoded:
        seen.append(gc.isenabled())
        return build(doc)

    monkeypatch.setattr(encoding, "_from_document", watched)
    decoded = encoding.decode(snapshot.read())
    assert len(decoded.types) > 1000
    assert seen == [False] and gc.isenabled()


def test_a_failed_decode_switches_the_collector_back_on(collector_enabled: None) -> None:
    with pytest.raises(CatalogDecodeError):
        encoding.decode(gzip.compress(b'{"format": 2, "types": [[1'))
    assert gc.isenabled()


def test_a_collector_switched_off_by_the_caller_stays_off(collector_enabled: None) -> None:
    gc.disable()
    encoding.decode(snapshot.read())
    assert not gc.isenabled()


def test_msgspec_and_the_standard_parser_give_the_same_catalog() -> None:
    data = snapshot.read()
    by_json = encoding._from_document(json.loads(gzip.decompress(data)))
    decoded = encoding.decode(data)
    assert decoded.region == by_json.region and decoded.source == by_json.source
    assert list(decoded.types) == list(by_json.types)
    for name, it in decoded.types.items():
        assert it == by_json.types[name] and it.offerings == by_json.types[name].offerings


def test_requirements_made_in_one_step_equal_those_made_one_at_a_time() -> None:
    decoded = encoding.decode(snapshot.read())
    for it in list(decoded.types.values())[:200]:
        reqs = [Requirement(k, False, (v,)) for k, v in it.labels.items()]
        reqs += [Requirement(L.ZONE, False, tuple(it.zones())),
                 Requirement(L.CAPACITY_TYPE, False, tuple(it.capacity_types()))]
        assert dict(instance_requirements(it.labels, it.offerings).items()) == dict(Requirements(reqs).items())


def test_a_key_given_twice_is_intersected_as_the_constructor_does() -> None:
    reqs = [Requirement(L.ZONE, False, ("us-east-1a", "us-east-1b")), Requirement(L.ARCH, False, ("amd64",)),
            Requirement(L.ZONE, False, ("us-east-1b", "us-east-1c"))]
    made = Requirements.of_distinct(reqs)
    assert made[L.ZONE].values == frozenset({"us-east-1b"})
    assert dict(made.items()) == dict(Requirements(reqs).items())
    assert made[L.ARCH].values == frozenset({"amd64"})
