"""AWS timestamps: the fast path answers exactly what botocore's own parser answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from botocore.utils import parse_timestamp as botocore_parse_timestamp

from carpool.adapters.aws import session, timestamps

SAMPLES = [
    "2006-01-02T15:04:05.999999999Z",
    "2025-01-15T00:00:00Z",
    "2025-01-15T00:00:00.000Z",
    "2025-01-15T10:20:30+02:00",
    "2025-01-15T00:00:00",  # no zone: botocore's rule (local time) applies
    "Wed, 15 Jan 2025 00:00:00 GMT",
    1736899200,
    1736899200.5,
    "1736899200",
]


@pytest.mark.parametrize("value", SAMPLES)
def test_same_instant_as_botocore(value: object) -> None:
    ours = timestamps.parse_timestamp(value)
    theirs = botocore_parse_timestamp(value)
    assert (ours.tzinfo is None) == (theirs.tzinfo is None)
    assert ours == theirs
    assert ours.utcoffset() == theirs.utcoffset()


def test_a_zoned_iso_timestamp_takes_the_fast_path() -> None:
    parsed = timestamps.parse_timestamp("2025-01-15T10:20:30.123Z")
    assert parsed == datetime(2025, 1, 15, 10, 20, 30, 123000, tzinfo=UTC)
    assert parsed.tzinfo is UTC  # the standard library's, not dateutil's tzutc


def test_garbage_is_refused_as_botocore_refuses_it() -> None:
    with pytest.raises(ValueError):
        timestamps.parse_timestamp("not a time")


def test_session_clients_parse_with_it() -> None:
    core = session._core_session()
    factory = core.get_component("response_parser_factory")
    parser = factory.create_parser("ec2")
    assert parser._timestamp_parser is timestamps.parse_timestamp
    offset = timestamps.parse_timestamp("2025-01-15T10:20:30+02:00").utcoffset()
    assert offset == timedelta(hours=2)
