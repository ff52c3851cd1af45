"""Receipt handles drawn as bytes look like moto's own, and the receive path's attribute lookups answer
as moto's whole-attribute property does (`carpool.sim.localaws.motofast`)."""

from __future__ import annotations

import string
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.moto_api._internal import mock_random
from moto.sqs import models
from moto.sqs.utils import generate_receipt_handle as moto_handle

from carpool.sim.localaws import motofast
from carpool.sim.localaws.moto_patches import installed
from carpool.sim.localaws.motofast import _CheapCounts, _FastReceiptHandles, _receipt_handle, faster_moto


@pytest.fixture
def unpatched() -> None:
    held = [p.__name__ for p in (_FastReceiptHandles, _CheapCounts) if p.installed()]
    if held:
        pytest.skip(f"held by a running simulation: {held}")


@pytest.fixture
def seeded() -> Iterator[None]:
    state = mock_random.getstate()
    mock_random.seed(20261124)
    yield
    mock_random.setstate(state)


def test_a_handle_has_moto_s_length_and_alphabet(seeded: None) -> None:
    theirs, ours = [moto_handle() for _ in range(50)], [_receipt_handle() for _ in range(50)]
    assert {len(h) for h in ours} == {len(h) for h in theirs} == {185}
    assert set("".join(ours)) <= set(string.ascii_lowercase) and set("".join(theirs)) <= set(string.ascii_lowercase)


def test_handles_are_unique(seeded: None) -> None:
    handles = [_receipt_handle() for _ in range(20_000)]
    assert len(set(handles)) == len(handles)


def test_every_letter_is_equally_likely(seeded: None) -> None:
    """Chi-square over 370,000 letters with 25 degrees of freedom: ~25 when uniform; mapping every byte
    modulo 26 (a..v one in 9.3% more often) gives ~700."""
    counts = Counter("".join(_receipt_handle() for _ in range(2_000)))
    expected = 2_000 * 185 / 26
    chi_square = sum((counts[c] - expected) ** 2 / expected for c in string.ascii_lowercase)
    assert len(counts) == 26 and chi_square < 60


def test_handles_follow_moto_s_random_source() -> None:
    """Seeding moto repeats the handles (as it repeats moto's own); another seed draws others."""
    state = mock_random.getstate()
    try:
        runs = []
        for seed in (1, 1, 2):
            mock_random.seed(seed)
            runs.append([_receipt_handle() for _ in range(3)])
    finally:
        mock_random.setstate(state)
    assert runs[0] == runs[1] and runs[0] != runs[2]
    assert len(set(runs[0])) == 3


def test_received_messages_carry_fresh_handles_that_delete_them(unpatched: None) -> None:
    with mock_aws(), faster_moto():
        assert models.generate_receipt_handle is _receipt_handle
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="q", Attributes={"VisibilityTimeout": "0"})["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="one")
        first = sqs.receive_message(QueueUrl=url)["Messages"][0]["ReceiptHandle"]
        second = sqs.receive_message(QueueUrl=url)["Messages"][0]["ReceiptHandle"]
        assert first != second and len(first) == len(second) == 185
        sqs.delete_message(QueueUrl=url, ReceiptHandle=second)
        assert "Messages" not in sqs.receive_message(QueueUrl=url)
    assert models.generate_receipt_handle is moto_handle


def _backend() -> Any:
    return models.sqs_backends["123456789012"]["us-east-1"]


@pytest.mark.parametrize("attributes", [{}, {"MessageRetentionPeriod": "60"},
                                        {"FifoQueue": "true", "MessageRetentionPeriod": "1209600"}])
def test_the_retention_period_read_while_receiving_is_the_property_s(unpatched: None, attributes: dict[str, str]) -> None:
    name = "r.fifo" if "FifoQueue" in attributes else "r"
    with mock_aws():
        boto3.client("sqs", region_name="us-east-1").create_queue(QueueName=name, Attributes=attributes)
        backend = _backend()
        names = ["MessageRetentionPeriod", "DelaySeconds", "ContentBasedDeduplication"]
        whole = backend.get_queue_attributes(name, names)
        with installed(_CheapCounts):
            motofast._cheap.on = True
            try:
                alone = backend.get_queue_attributes(name, names)
                lookups = models.Queue.attributes.fget(backend.get_queue(name))  # type: ignore[attr-defined]
                assert "MessageRetentionPeriod" in lookups and lookups.get("MessageRetentionPeriod") == whole["MessageRetentionPeriod"]
            finally:
                motofast._cheap.on = False
    assert alone == whole and whole["MessageRetentionPeriod"] == int(attributes.get("MessageRetentionPeriod", 345600))


def test_a_message_past_its_retention_period_is_not_received(unpatched: None, monkeypatch: pytest.MonkeyPatch) -> None:
    with mock_aws(), faster_moto():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="old", Attributes={"MessageRetentionPeriod": "60",
                                                            "VisibilityTimeout": "0"})["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="stale")
        now = models.unix_time()
        monkeypatch.setattr(models, "unix_time", lambda *a: now + 59)
        assert sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "stale"
        monkeypatch.setattr(models, "unix_time", lambda *a: now + 61)
        assert "Messages" not in sqs.receive_message(QueueUrl=url)
