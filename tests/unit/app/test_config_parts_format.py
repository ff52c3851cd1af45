"""The stored form of a config past one SSM parameter (`carpool.config_parts`)."""

from __future__ import annotations

import pytest

from carpool import config_parts

POOL = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: team-{i}\nspec:\n  limits: {{cpu: '{i}'}}\n"


def text(pools: int) -> str:
    return "---\n".join(POOL.format(i=i) for i in range(pools))


def test_a_config_that_fits_stays_readable_in_the_index() -> None:
    index, parts = config_parts.encode(text(3))
    assert (index, parts) == (text(3), [])
    assert config_parts.pointer_of(index) is None


def test_a_large_config_is_a_pointer_and_parts_that_decode_to_it() -> None:
    big = text(2000)
    index, parts = config_parts.encode(big)
    pointer = config_parts.pointer_of(index)
    assert pointer is not None and pointer.parts == len(parts) > 1
    assert all(len(p) <= config_parts.PART_MAX_CHARS for p in parts)
    assert config_parts.decode(pointer, parts) == big
    assert config_parts.encode(big) == (index, parts)  # the same config, the same parameters


def test_parts_of_two_configs_mixed_are_refused() -> None:
    index_a, parts_a = config_parts.encode(text(2000))
    _, parts_b = config_parts.encode(text(2001))
    pointer = config_parts.pointer_of(index_a)
    assert pointer is not None
    mixed = [parts_b[0], *parts_a[1:]]
    with pytest.raises(config_parts.ConfigPartsError):
        config_parts.decode(pointer, mixed)
    with pytest.raises(config_parts.ConfigPartsError, match="expected"):
        config_parts.decode(pointer, parts_a[:-1])


def test_a_config_beyond_every_part_is_refused_by_size() -> None:
    import random

    noise = random.Random(7)
    incompressible = "".join(noise.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(700_000))
    with pytest.raises(config_parts.ConfigPartsError, match="more than 100 parameters"):
        config_parts.encode(incompressible)


def test_a_malformed_pointer_is_named() -> None:
    with pytest.raises(config_parts.ConfigPartsError, match="malformed pointer"):
        config_parts.pointer_of('{"carpoolConfig": {"parts": "many"}}')
