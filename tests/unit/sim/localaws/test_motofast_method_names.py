"""The dispatcher's method names per response class: the same names as moto's own computation, a list
of its own for each caller, and actions still dispatched (and unknown ones still refused) through it."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws
from moto.core import responses, utils
from moto.dynamodb.responses import DynamoHandler
from moto.events.responses import EventsHandler
from moto.sqs.responses import SQSResponse

from carpool.sim.localaws.motofast import _MethodNamesOnce, faster_moto


@pytest.mark.parametrize("cls", [DynamoHandler, EventsHandler, SQSResponse])
def test_the_names_are_moto_s_own(cls: type) -> None:
    expected = utils.method_names_from_class(cls)
    with faster_moto():
        assert responses.method_names_from_class is not utils.method_names_from_class
        first, again = responses.method_names_from_class(cls), responses.method_names_from_class(cls)
    assert first == again == expected
    first.append("not_an_action")  # a caller changing its list changes nobody else's
    with faster_moto():
        assert "not_an_action" not in responses.method_names_from_class(cls)
    assert responses.method_names_from_class is utils.method_names_from_class


def test_requests_are_dispatched_through_it() -> None:
    with mock_aws(), faster_moto():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="hello")
        assert [m["Body"] for m in sqs.receive_message(QueueUrl=url)["Messages"]] == ["hello"]
        assert _MethodNamesOnce.replaces[0].current() is responses.method_names_from_class
