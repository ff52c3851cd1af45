"""Resource lists (`carpool.resources`): canonical integers and the few operations packing needs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carpool import resources as res
from carpool.quantity import QuantityError
from carpool.resources import CPU, EPHEMERAL_STORAGE, GPU_NVIDIA, MEMORY, NEURON, PODS

GI = 2**30


def test_names() -> None:
    assert (CPU, MEMORY, PODS, EPHEMERAL_STORAGE) == ("cpu", "memory", "pods", "ephemeral-storage")
    assert (GPU_NVIDIA, NEURON) == ("nvidia.com/gpu", "aws.amazon.com/neuron")


def test_parse_canonical_units() -> None:
    got = res.parse(
        {"cpu": "1500m", "memory": "2Gi", "pods": "3", "nvidia.com/gpu": 1, "ephemeral-storage": "10G"}
    )
    assert got == {"cpu": 1500, "memory": 2 * GI, "pods": 3, "nvidia.com/gpu": 1, "ephemeral-storage": 10**10}


def test_parse_empty() -> None:
    assert res.parse(None) == {}
    assert res.parse({}) == {}


def test_parse_bad_quantity() -> None:
    with pytest.raises(QuantityError):
        res.parse({"cpu": "lots"})


def test_add() -> None:
    assert res.add({"cpu": 100, "memory": 1}, {"cpu": 50, "pods": 1}, {}) == {
        "cpu": 150,
        "memory": 1,
        "pods": 1,
    }
    assert res.add() == {}


def test_add_does_not_mutate() -> None:
    a = {"cpu": 1}
    res.add(a, {"cpu": 2})
    assert a == {"cpu": 1}


def test_subtract_covers_both_keys() -> None:
    assert res.subtract({"cpu": 100, "memory": 10}, {"cpu": 30, "pods": 1}) == {
        "cpu": 70,
        "memory": 10,
        "pods": -1,
    }


def test_subtract_does_not_mutate() -> None:
    a = {"cpu": 100}
    res.subtract(a, {"cpu": 1})
    assert a == {"cpu": 100}


def test_scale() -> None:
    assert res.scale({"cpu": 100, "pods": 1}, 3) == {"cpu": 300, "pods": 3}
    assert res.scale({"cpu": 100}, 0) == {"cpu": 0}


def test_maximum_per_key() -> None:
    # e.g. max(sum of containers, largest init container)
    got = res.maximum({"cpu": 100, "memory": 5}, {"cpu": 50, "memory": 10, "pods": 1})
    assert got == {"cpu": 100, "memory": 10, "pods": 1}
    assert res.maximum() == {}


class TestFits:
    def test_within(self) -> None:
        assert res.fits({"cpu": 500, "memory": GI}, {"cpu": 1000, "memory": 2 * GI, "pods": 10})

    def test_exactly_equal(self) -> None:
        assert res.fits({"cpu": 1000}, {"cpu": 1000})

    def test_over(self) -> None:
        assert not res.fits({"cpu": 1001}, {"cpu": 1000})

    def test_missing_resource_is_zero_available(self) -> None:
        assert not res.fits({"nvidia.com/gpu": 1}, {"cpu": 1000})

    def test_zero_request_of_missing_resource_fits(self) -> None:
        assert res.fits({"nvidia.com/gpu": 0}, {"cpu": 1000})

    def test_empty_request_fits_anything(self) -> None:
        assert res.fits({}, {})

    def test_negative_available_blocks(self) -> None:
        assert not res.fits({"cpu": 1}, {"cpu": -5})


def test_sum_all() -> None:
    assert res.sum_all([{"cpu": 1}, {"cpu": 2}, {"pods": 1}]) == {"cpu": 3, "pods": 1}
    assert res.sum_all(iter([])) == {}


def test_describe() -> None:
    assert res.describe({"pods": 3, "memory": 2 * GI, "cpu": 1500}) == "cpu=1500m memory=2Gi pods=3"
    assert res.describe({"cpu": 2000, "ephemeral-storage": 20 * GI, "nvidia.com/gpu": 1}) == (
        "cpu=2 ephemeral-storage=20Gi nvidia.com/gpu=1"
    )
    assert res.describe({}) == ""


# -- properties -------------------------------------------------------------------------------------------

NAMES = st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu"])
lists = st.dictionaries(NAMES, st.integers(min_value=0, max_value=10**12), max_size=4)


@settings(deadline=None)
@given(lists, lists)
def test_a_request_fits_what_it_was_added_to(a: dict[str, int], b: dict[str, int]) -> None:
    assert res.fits(a, res.add(a, b))
    assert res.fits(b, res.add(a, b))


@settings(deadline=None)
@given(lists, lists)
def test_subtract_undoes_add(a: dict[str, int], b: dict[str, int]) -> None:
    back = res.subtract(res.add(a, b), b)
    assert all(back.get(k, 0) == a.get(k, 0) for k in set(a) | set(b))


@settings(deadline=None)
@given(lists, lists)
def test_maximum_bounds_both(a: dict[str, int], b: dict[str, int]) -> None:
    m = res.maximum(a, b)
    assert res.fits(a, m) and res.fits(b, m)
    assert all(m[k] in (a.get(k), b.get(k)) for k in m)


@settings(deadline=None)
@given(lists, lists, lists)
def test_add_is_commutative_and_associative(a: dict[str, int], b: dict[str, int], c: dict[str, int]) -> None:
    assert res.add(a, b) == res.add(b, a)
    assert res.add(res.add(a, b), c) == res.add(a, res.add(b, c)) == res.add(a, b, c)


@settings(deadline=None)
@given(lists, st.integers(min_value=0, max_value=100))
def test_scale_is_repeated_add(a: dict[str, int], n: int) -> None:
    assert res.scale(a, n) == ({k: 0 for k in a} | res.add(*([a] * n)))
