"""Local EC2's large static reads: paged as EC2 pages them, each page serialized once per process.

moto answers DescribeInstanceTypes with every type it knows (1,395) in one response whatever `MaxResults`
says, and DescribeInstanceTypeOfferings with every offering of the region. EC2 caps a page (instance types
5-100 a page, 100 by default; offerings 5-1000; spot price history 1-1000, 1000 by default), answers
`NextToken` while items remain, and rejects a `MaxResults` outside the range (`InvalidParameterValue`). A
caller that does not follow `NextToken` sees only the first 100 types in EC2; locally it must too.
`PagedInstanceTypes` pages the first two; `carpool.sim.localaws._ModelledSpotPrices` pages spot prices
with `page` too.

Rendering those answers is most of the local catalog build's time (moto's response serializer turns each
item into XML, ~2 ms an instance type). The answers are static (moto loads types and offerings from its
bundled data) or a deterministic model (`carpool.sim.spot_prices`), so a rendered page is kept and served
again, keyed by the page's content itself (`SerializedOnce`): a different answer is a different key, so a
kept page can never stand in for an answer that changed (new prices, another region, other filters).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from moto.core.responses import ActionResult

from carpool.sim.moto_patches import Internal, MotoPatch, Replaced


@dataclass(frozen=True)
class PageLimits:
    """EC2's bounds of `MaxResults` for one operation (botocore's EC2 model and the EC2 API reference)."""

    low: int
    high: int
    default: int


#: MaxResults per operation: DITMaxResults 5-100, DITOMaxResults 5-1000 (botocore's EC2 model); spot price
#: history 1-1000, 1000 when omitted (EC2 API reference)
INSTANCE_TYPES = PageLimits(5, 100, 100)
INSTANCE_TYPE_OFFERINGS = PageLimits(5, 1000, 1000)
SPOT_PRICE_HISTORY = PageLimits(1, 1000, 1000)

#: request parameters that select the page, not the answer (a token is bound to all the others)
_PAGING = frozenset({"MaxResults", "NextToken", "DryRun"})
#: bytes of rendered pages kept per process (a region's types, offerings and prices take ~8 MB)
MEMO_BUDGET = 64 * 1024 * 1024


def page(response: Any, key: str, items: Sequence[Any], size: int) -> SerializedOnce:
    """The page of `items` the request asks for, as EC2 answers it: `key` holds at most `size` items (the
    request's `max_results`) from where `NextToken` left off, and `NextToken` is set while items remain."""
    bound = _request_digest(response)
    start = _offset(response.params.get("NextToken"), bound, len(items))
    result: dict[str, Any] = {key: list(items[start : start + size])}
    if start + size < len(items):
        result["NextToken"] = _token(start + size, bound)
    return SerializedOnce(result)


def max_results(response: Any, limits: PageLimits) -> int:
    """The request's page size; EC2 refuses one outside the operation's bounds before doing anything else."""
    from moto.ec2.exceptions import EC2ClientError

    raw = response.params.get("MaxResults")
    if raw is None:
        return limits.default
    try:
        value = int(raw)
    except (TypeError, ValueError):
        value = None
    if value is None or not limits.low <= value <= limits.high:
        raise EC2ClientError("InvalidParameterValue", f"Value ( {raw} ) for parameter maxResults is invalid. "
                                                      f"Parameter must be between {limits.low} and {limits.high}.")
    return value


def _request_digest(response: Any) -> str:
    """What the request asks for apart from paging: a token only continues the request that received it."""
    asked = {k: v for k, v in dict(response.params).items() if k not in _PAGING}
    text = json.dumps([response.region, asked], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _token(offset: int, bound: str) -> str:
    return base64.urlsafe_b64encode(f"{offset}:{bound}".encode()).decode()


def _offset(token: str | None, bound: str, total: int) -> int:
    """Where the page starts: 0 without a token; a token not issued for this request is refused."""
    from moto.ec2.exceptions import InvalidNextToken

    if not token:
        return 0
    try:
        offset, _, issued_for = base64.urlsafe_b64decode(token.encode()).decode().partition(":")
        start = int(offset)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidNextToken(token) from None
    if issued_for != bound or not 0 < start <= total:
        raise InvalidNextToken(token)
    return start


#: the moto internals `SerializedOnce` relies on: how an answer is rendered, and that the caller then adds its
#: headers to the rendered headers (so each caller gets its own copy)
RENDERING = (Internal("moto.core.responses", "ActionResult.execute_result", "6333faa349b58671"),
             Internal("moto.core.responses", "BaseResponse.serialized", "af486a0ef1327162"))


class SerializedOnce(ActionResult):
    """An answer rendered by moto's serializer once per process and then served from memory.

    The key is everything the rendering depends on: the serializer (protocol), the service model and
    operation, the pretty-print setting, the response class (its value transformers) and a digest of the
    answer's content. An answer holding anything but JSON values (whose content a digest cannot vouch for)
    is rendered every time."""

    def execute_result(self, context: Any) -> Any:
        key = _render_key(context, self.result)
        if key is None:
            return super().execute_result(context)
        kept = _RENDERED.get(key)
        if kept is None:
            status, headers, body = super().execute_result(context)
            kept = (status, dict(headers), body)
            _RENDERED.put(key, kept, len(body))
        status, headers, body = kept
        return status, dict(headers), body  # the caller adds its own headers to the dict


class _Refused(TypeError):
    pass


def _refuse(value: Any) -> Any:
    raise _Refused(type(value).__name__)


def _render_key(context: Any, result: Any) -> tuple[Any, ...] | None:
    from moto import settings

    try:
        content = json.dumps(result, default=_refuse, separators=(",", ":"))
    except (_Refused, ValueError):
        return None
    service = context.service_model
    response_type = type(context.response)
    return (context.serializer_class, service.service_name, service.api_version, context.operation_model.name,
            settings.PRETTIFY_RESPONSES, response_type, id(getattr(response_type, "RESPONSE_KEY_PATH_TO_TRANSFORMER", None)),
            hashlib.sha256(content.encode()).digest())


class _Rendered:
    """Rendered answers, least recently used dropped first once they hold more than `budget` bytes."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._held: OrderedDict[tuple[Any, ...], tuple[tuple[Any, dict[str, Any], Any], int]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        #: answers served from memory / rendered (for measuring what the memo saves)
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple[Any, ...]) -> tuple[Any, dict[str, Any], Any] | None:
        with self._lock:
            kept = self._held.get(key)
            if kept is None:
                self.misses += 1
                return None
            self.hits += 1
            self._held.move_to_end(key)
            return kept[0]

    def put(self, key: tuple[Any, ...], value: tuple[Any, dict[str, Any], Any], size: int) -> None:
        with self._lock:
            if key in self._held or size > self.budget:
                return
            self._held[key] = (value, size)
            self._size += size
            while self._size > self.budget:
                _, (_, dropped) = self._held.popitem(last=False)
                self._size -= dropped

    def clear(self) -> None:
        with self._lock:
            self._held.clear()
            self._size = 0

    def __len__(self) -> int:
        return len(self._held)


#: the process's rendered pages (every LocalAws shares them: the key holds the whole answer)
_RENDERED = _Rendered(MEMO_BUDGET)


class PagedInstanceTypes(MotoPatch):
    """Makes moto's DescribeInstanceTypes and DescribeInstanceTypeOfferings page as EC2 does (see the module
    docstring), each page rendered once per process.

    The answers are moto's own (`describe_instance_types` / `describe_instance_type_offerings` of the EC2
    backend, in the order moto keeps them); only the paging and the rendering differ.
    """

    replaces = (Internal("moto.ec2.responses.instances", "InstanceResponse.describe_instance_types", "c8660828eaca729c"),
                Internal("moto.ec2.responses.instances", "InstanceResponse.describe_instance_type_offerings", "351363af2b629b85"))
    relies_on = (Internal("moto.ec2.models.instance_types", "InstanceTypeBackend.describe_instance_types", "5e33bcff47a6b0c8"),
                 Internal("moto.ec2.models.instance_types",
                          "InstanceTypeOfferingBackend.describe_instance_type_offerings", "da83b568c2a5de92"),
                 *RENDERING)

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.ec2.responses.instances import InstanceResponse

        types, offerings = (InstanceResponse.__dict__["describe_instance_types"],
                            InstanceResponse.__dict__["describe_instance_type_offerings"])

        def describe_instance_types(self: Any) -> Any:
            size = max_results(self, INSTANCE_TYPES)
            found = self.ec2_backend.describe_instance_types(self._get_param("InstanceTypes", []),
                                                            self._filters_from_querystring())
            return page(self, "InstanceTypes", found, size)

        def describe_instance_type_offerings(self: Any) -> Any:
            size = max_results(self, INSTANCE_TYPE_OFFERINGS)
            found = self.ec2_backend.describe_instance_type_offerings(self._get_param("LocationType"),
                                                                     self._filters_from_querystring())
            return page(self, "InstanceTypeOfferings", found, size)

        InstanceResponse.describe_instance_types = describe_instance_types  # type: ignore[method-assign]
        InstanceResponse.describe_instance_type_offerings = describe_instance_type_offerings  # type: ignore[method-assign]
        return [(InstanceResponse, "describe_instance_types", types),
                (InstanceResponse, "describe_instance_type_offerings", offerings)]
