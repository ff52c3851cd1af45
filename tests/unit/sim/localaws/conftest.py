"""Local AWS's own tests: moto in this process, and tables with carpool's key layout.

The one test folder that may use moto directly (`tests/unit/sim/test_sim_rooms.py`): these tests check
local AWS's patches of moto's internals against moto itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws


def create_dynamo_table(client: Any, name: str, gsi1: bool = False) -> None:
    """A table with carpool's key layout (pk/sk, optionally the gsi1 index) on an in-process moto."""
    attributes = ["pk", "sk", *(["gsi1pk", "gsi1sk"] if gsi1 else [])]
    extra: dict[str, Any] = {}
    if gsi1:
        extra["GlobalSecondaryIndexes"] = [{"IndexName": "gsi1", "Projection": {"ProjectionType": "ALL"}, "KeySchema": [
            {"AttributeName": "gsi1pk", "KeyType": "HASH"}, {"AttributeName": "gsi1sk", "KeyType": "RANGE"}]}]
    client.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in attributes], **extra)


@pytest.fixture
def moto_in_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto in this process (`mock_aws`), with the fake credentials and region boto3 clients need."""
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        yield
