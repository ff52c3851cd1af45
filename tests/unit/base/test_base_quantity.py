"""Kubernetes quantities (`carpool.quantity`): parsing, rounding and formatting."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carpool import quantity
from carpool.quantity import QuantityError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("500m", Decimal("0.5")),
        ("1.5", Decimal("1.5")),
        ("1Gi", Decimal(2**30)),
        ("1G", Decimal(10**9)),
        ("1e3", Decimal(1000)),
        ("1E3", Decimal(1000)),
        ("1e-3", Decimal("0.001")),
        ("0.1", Decimal("0.1")),
        (".5", Decimal("0.5")),
        ("5.", Decimal(5)),
        ("+2", Decimal(2)),
        ("-2", Decimal(-2)),
        ("100n", Decimal("1e-7")),
        ("10u", Decimal("1e-5")),
        ("1k", Decimal(1000)),
        ("1M", Decimal(10**6)),
        ("1T", Decimal(10**12)),
        ("1P", Decimal(10**15)),
        ("1E", Decimal(10**18)),  # exa, not an exponent
        ("1Ki", Decimal(1024)),
        ("1.5Mi", Decimal(3 * 2**19)),
        ("1Ti", Decimal(2**40)),
        ("1Pi", Decimal(2**50)),
        ("1Ei", Decimal(2**60)),
        (" 1Gi ", Decimal(2**30)),  # YAML leaves surrounding spaces sometimes
        ("0", Decimal(0)),
    ],
)
def test_parse(text: str, expected: Decimal) -> None:
    assert quantity.parse(text) == expected


def test_parse_numbers() -> None:
    assert quantity.parse(2) == 2
    assert quantity.parse(0.25) == Decimal("0.25")
    assert quantity.parse(0.1) == Decimal("0.1")  # through str(), not the binary float


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "   ",
        "abc",
        "Gi",
        "1.2.3",
        "1gi",  # suffixes are case-sensitive
        "1K",  # kilo is lower-case k
        "1 Gi",
        "1e3Mi",  # an exponent and a suffix together
        "1e",
        "--1",
        "1_000",
        "\u0661",  # Arabic-Indic digit one
        "1e9999999",  # beyond what a decimal can hold
        "0x10",
    ],
)
def test_parse_rejects(bad: str) -> None:
    with pytest.raises(QuantityError, match="invalid quantity"):
        quantity.parse(bad)


@pytest.mark.parametrize("bad", [True, False, float("nan"), float("inf"), float("-inf")])
def test_parse_rejects_non_quantities(bad: object) -> None:
    with pytest.raises(QuantityError):
        quantity.parse(bad)  # type: ignore[arg-type]


def test_quantity_error_is_a_value_error() -> None:
    assert issubclass(QuantityError, ValueError)


def test_huge_values_are_capped_like_kubernetes() -> None:
    cap = 2**63 - 1
    assert quantity.parse("8Ei") == cap
    assert quantity.to_int("1e4000") == cap
    assert quantity.to_int("-1e4000") == -cap
    assert quantity.to_int(str(cap)) == cap


@pytest.mark.parametrize(
    ("text", "millis"),
    [("500m", 500), ("1.5", 1500), ("0.1", 100), ("1m", 1), ("0.5m", 1), ("100u", 1), (2, 2000), ("2", 2000)],
)
def test_cpu_millis_rounds_up(text: str | int, millis: int) -> None:
    assert quantity.cpu_millis(text) == millis


@pytest.mark.parametrize(
    ("text", "value"), [("1Gi", 2**30), ("1.5", 2), ("0.1", 1), ("1k", 1000), ("110", 110)]
)
def test_to_int_rounds_up(text: str, value: int) -> None:
    assert quantity.to_int(text) == value


def test_resource_value() -> None:
    assert quantity.resource_value("cpu", "1") == 1000
    assert quantity.resource_value("memory", "1Gi") == 2**30
    assert quantity.resource_value("pods", "110") == 110
    assert quantity.resource_value("nvidia.com/gpu", 1) == 1


def test_mib_rounds_down() -> None:
    assert quantity.mib(2**30) == 1024
    assert quantity.mib(2**20 - 1) == 0


@pytest.mark.parametrize(
    ("millis", "text"), [(1000, "1"), (0, "0"), (1500, "1500m"), (250, "250m"), (4000, "4")]
)
def test_format_cpu(millis: int, text: str) -> None:
    assert quantity.format_cpu(millis) == text


@pytest.mark.parametrize(
    ("value", "text"), [(2**30, "1Gi"), (3 * 2**29, "1536Mi"), (2**10, "1Ki"), (1000, "1000"), (0, "0")]
)
def test_format_bytes(value: int, text: str) -> None:
    assert quantity.format_bytes(value) == text


@settings(deadline=None)
@given(st.integers(min_value=0, max_value=10**12))
def test_format_cpu_round_trips(millis: int) -> None:
    assert quantity.cpu_millis(quantity.format_cpu(millis)) == millis


@settings(deadline=None)
@given(st.integers(min_value=0, max_value=2**62))
def test_format_bytes_round_trips(value: int) -> None:
    assert quantity.to_int(quantity.format_bytes(value)) == value


@settings(deadline=None)
@given(st.integers(min_value=0, max_value=10**9), st.sampled_from(["", "k", "M", "G", "Ki", "Mi", "Gi"]))
def test_suffixes_scale_exactly(n: int, suffix: str) -> None:
    factor = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}[suffix]
    assert quantity.to_int(f"{n}{suffix}") == n * factor
