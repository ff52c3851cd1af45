"""Request ids: moto's answer for every kind of body, drawn in the same order from moto's random source,
and the body left as it is where it has no `<RequestId>` element."""

from __future__ import annotations

from typing import Any

import pytest
from moto.core import responses
from moto.moto_api._internal import mock_random

from carpool.sim.localaws.motofast import faster_moto

XML = "<Answer><RequestId>old</RequestId><x>1</x></Answer>"
BODIES: list[Any] = [XML, '{"Items": [{"pk": {"S": "CLAIM#a"}}]}', "", b"<RequestId>bytes</RequestId>", None,
                     "<RequestId>unclosed", "text <RequestId>a</RequestId> and <RequestId>b</RequestId>"]


def _enriched(body: Any, status: Any) -> tuple[dict[str, Any], Any]:
    mock_random.seed(7)
    headers = {"status": status} if status is not None else {}
    return responses.BaseResponse._enrich_response(headers, body)


@pytest.mark.parametrize("status", [200, "400", None])
@pytest.mark.parametrize("body", BODIES)
def test_the_answer_is_moto_s(body: Any, status: Any) -> None:
    plain = _enriched(body, status)
    with faster_moto():
        assert responses.BaseResponse.__dict__["_enrich_response"].__func__.__module__ == "carpool.sim.localaws.motofast"
        fast = _enriched(body, status)
    assert fast == plain
    assert fast[0]["x-amzn-requestid"] == plain[0]["x-amzn-requestid"]  # same draw from the seeded source


def test_the_id_lands_in_an_xml_body() -> None:
    with faster_moto():
        headers, body = _enriched(XML, 200)
    assert body == f"<Answer><RequestId>{headers['x-amzn-requestid']}</RequestId><x>1</x></Answer>"
    assert headers["status"] == "200"
