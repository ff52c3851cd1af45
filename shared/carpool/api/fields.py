"""Field types that recur across Kubernetes shapes: quantities, resource lists, int-or-percent, labels.

Each type validates the way the API server would and keeps the value *as written* (a quantity stays
"512Mi"), so that a model dumped back to JSON round-trips exactly; conversion to carpool's integer
resources happens on demand through `carpool.resources`.
"""

from __future__ import annotations

import math
import re
from typing import Annotated

from pydantic import BeforeValidator, PlainValidator

from carpool import label_syntax, quantity

__all__ = [
    "IntOrPercent",
    "Quantity",
    "ResourceList",
    "check_label_key",
    "check_label_value",
    "scaled_int_or_percent",
]

_INT_OR_PERCENT = re.compile(r"^\d+%?$")


def _quantity(value: object) -> str:
    """Accept what YAML gives for a quantity (`1`, `0.5`, `"512Mi"`) and keep it as a string."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"invalid quantity {value!r}: expected a number or a string such as '500m' or '1Gi'")
    try:
        quantity.parse(value)
    except quantity.QuantityError as exc:
        raise ValueError(f"{exc}: expected a number or a string such as '500m' or '1Gi'") from None
    return value if isinstance(value, str) else str(value)


#: A Kubernetes quantity, validated, kept as written.
Quantity = Annotated[str, BeforeValidator(_quantity)]
#: A Kubernetes ResourceList (`{cpu: 500m, memory: 1Gi}`); `carpool.resources.parse` turns it into ints.
ResourceList = dict[str, Quantity]


def _int_or_percent(value: object) -> int | str:
    """Kubernetes IntOrString as used for counts: a non-negative integer or "N%"."""
    if isinstance(value, bool):
        raise ValueError(f"invalid value {value!r}: expected an integer or a percentage such as '10%'")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"invalid value {value}: must not be negative")
        return value
    if isinstance(value, str) and _INT_OR_PERCENT.match(value):
        return value
    raise ValueError(f"invalid value {value!r}: expected an integer or a percentage such as '10%'")


#: A non-negative integer or a percentage string ("10%"), kept as written.
IntOrPercent = Annotated[int | str, PlainValidator(_int_or_percent)]


def scaled_int_or_percent(value: int | str, total: int, round_up: bool) -> int:
    """The absolute count `value` stands for out of `total` (Kubernetes `GetScaledValueFromIntOrPercent`)."""
    if isinstance(value, int):
        return value
    if value.endswith("%"):
        exact = int(value[:-1]) * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(value)


def check_label_key(key: str) -> str | None:
    """Why `key` is not a valid label key (a qualified name, optionally prefixed), or None."""
    return label_syntax.key_problem(key)


def check_label_value(value: str) -> str | None:
    """Why `value` is not a valid label value, or None."""
    return label_syntax.value_problem(value)
