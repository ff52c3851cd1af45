"""Timestamps in AWS answers parsed by the standard library where it can.

botocore hands every timestamp of an answer to dateutil's general-purpose parser, about half a
millisecond each. DescribeSpotPriceHistory alone answers with thousands of them (one per instance type
and zone), so the catalog's refresh spent seconds there. AWS writes ISO 8601 with a zone designator
(`2025-01-15T00:00:00.000Z`), which `datetime.fromisoformat` reads in microseconds on Python 3.11 and
later; anything else (epoch numbers of the JSON protocols, a value without a zone) goes to botocore's own
parser, so the result is the same as botocore's for every input.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from botocore.utils import parse_timestamp as botocore_parse_timestamp


def parse_timestamp(value: Any) -> datetime:
    """An aware datetime for `value`, as botocore's default timestamp parser answers."""
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            return parsed
    result: datetime = botocore_parse_timestamp(value)
    return result


def install(core: Any) -> None:
    """Make `core` (a botocore session) parse the timestamps of every client it builds with `parse_timestamp`."""
    core.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=parse_timestamp)
