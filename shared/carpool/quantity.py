"""Kubernetes resource quantities ("500m", "1.5", "512Mi", "1G", "1e3") to integers.

carpool keeps cpu in millicores and every other resource in base units (bytes, counts), as integers, so
packing arithmetic is exact and fast.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from functools import lru_cache

_SUFFIX = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
# <signedNumber> then at most one of: a decimal exponent (`e3`), or a binary/decimal SI suffix (not both:
# Kubernetes rejects `1e3Mi`). ASCII digits only.
_PATTERN = re.compile(
    r"^([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$"
)
_EXPONENT = re.compile(r"[eE][+-]?[0-9]+$")
#: Kubernetes caps quantities at 2^63-1 in magnitude.
_MAX = Decimal(2**63 - 1)
MIB = 2**20


class QuantityError(ValueError):
    """A quantity string that Kubernetes would reject."""


def parse(value: str | int | float) -> Decimal:
    """Parse a quantity into its exact decimal value in base units."""
    if isinstance(value, bool):
        raise QuantityError(f"invalid quantity {value!r}")
    if type(value) is str:
        return _parse_text(value)
    if isinstance(value, int | float):
        result = Decimal(str(value))
        if not result.is_finite():
            raise QuantityError(f"invalid quantity {value!r}")
    else:
        return _parse_text(str(value))
    return max(-_MAX, min(result, _MAX))


@lru_cache(maxsize=4096)
def _parse_text(value: str) -> Decimal:
    """The string case of `parse`, remembered: a pod list repeats a handful of distinct quantities over
    and over (Decimal arithmetic and the regex cost ~10 us each, 100,000 pods hold several each)."""
    match = _PATTERN.match(value.strip())
    number, suffix = (match.group(1), match.group(2) or "") if match else ("", "")
    if not match or (suffix and _EXPONENT.search(number)):
        raise QuantityError(f"invalid quantity {value!r}")
    try:
        result = Decimal(number) * _SUFFIX[suffix]
    except ArithmeticError as exc:  # InvalidOperation, Overflow (`1e9999999`)
        raise QuantityError(f"invalid quantity {value!r}") from exc
    # Kubernetes caps rather than rejects (`resource.ParseQuantity`); clamping also keeps `to_int` cheap
    return max(-_MAX, min(result, _MAX))


def cpu_millis(value: str | int | float) -> int:
    """CPU quantity in millicores, rounded up as the kubelet does."""
    return math.ceil(parse(value) * 1000)


def to_int(value: str | int | float) -> int:
    """Any non-cpu quantity in base units (bytes or a count), rounded up."""
    return math.ceil(parse(value))


def resource_value(name: str, value: str | int | float) -> int:
    """The canonical integer for resource `name`: millicores for cpu, base units otherwise."""
    if type(value) is str:
        return _text_value(name, value)
    return cpu_millis(value) if name == "cpu" else to_int(value)


@lru_cache(maxsize=4096)
def _text_value(name: str, value: str) -> int:
    return cpu_millis(value) if name == "cpu" else to_int(value)


def mib(value_bytes: int) -> int:
    """Bytes to MiB, rounded down (what fits)."""
    return value_bytes // MIB


def format_cpu(millis: int) -> str:
    return f"{millis // 1000}" if millis % 1000 == 0 else f"{millis}m"


def format_bytes(value: int) -> str:
    for suffix, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if value % size == 0 and value >= size:
            return f"{value // size}{suffix}"
    return str(value)
