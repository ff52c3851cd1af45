"""Local EC2's large static reads: paged as EC2 pages them, each page serialized once.

moto answers DescribeInstanceTypes with every type it knows (1,395) in one response whatever `MaxResults`
says, and DescribeInstanceTypeOfferings with every offering of the region. EC2 caps a page (instance types
5-100 a page, 100 by default; offerings 5-1000; spot price history 1-1000, 1000 by default), answers
`NextToken` while items remain, and rejects a `MaxResults` outside the range (`InvalidParameterValue`). A
caller that does not follow `NextToken` sees only the first 100 types in EC2; locally it must too.
`PagedInstanceTypes` pages the first two; `carpool.sim.localaws.server._ModelledSpotPrices` pages spot prices
with `page` too.

Rendering those answers is most of the local catalog build's time (moto's response serializer turns each
item into XML, ~2 ms an instance type). The answers are static (moto loads types and offerings from its
bundled data) or a deterministic model (`carpool.sim.localaws.spot_prices`), so a rendered page is kept and served
again, keyed by the page's content itself (`SerializedOnce`): a different answer is a different key, so a
kept page can never stand in for an answer that changed (new prices, another region, other filters).
Pages are kept in memory for the process and on disk for every later interpreter (`carpool.sim.localaws.page_store`);
the key is therefore made of names and digests that mean the same in any process (qualified names,
library versions, fingerprints of the rendering code), never of object identities.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from moto.core.responses import ActionResult

from carpool.sim.localaws import page_store
from carpool.sim.localaws.moto_patches import Internal, MotoPatch, Replaced, fingerprint, moto_version


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


def page(response: Any, key: str, items: Sequence[Any], size: int,
         by: type[MotoPatch] | None = None) -> SerializedOnce:
    """The page of `items` the request asks for, as EC2 answers it: `key` holds at most `size` items (the
    request's `max_results`) from where `NextToken` left off, and `NextToken` is set while items remain.
    `by` is the patch answering (its fingerprints become part of the rendered page's key)."""
    bound = _request_digest(response)
    start = _offset(response.params.get("NextToken"), bound, len(items))
    result: dict[str, Any] = {key: list(items[start : start + size])}
    if start + size < len(items):
        result["NextToken"] = _token(start + size, bound)
    return SerializedOnce(result, by)


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
    """An answer rendered by moto's serializer once and then served from memory, or from disk in a later
    interpreter (`carpool.sim.localaws.page_store`).

    The key is everything the rendering depends on, spelled so that it means the same in every process:
    the serializer (protocol) and response class by qualified name, the service model and operation, the
    pretty-print setting, the response class's value transformers (names and source fingerprints), the
    versions of moto, botocore and xmltodict, a digest of moto's serializer module, the fingerprints of
    the rendering internals (`RENDERING`) and of the answering patch, and a digest of the answer's
    content. A page's `NextToken` is kept as a stand-in and the request's token put in its place when the
    page is served (`TOKEN_STAND_IN`). An answer holding anything but JSON values (whose content a digest
    cannot vouch for) is rendered every time."""

    def __init__(self, result: Any, by: type[MotoPatch] | None = None) -> None:
        super().__init__(result)
        self.by = by

    def execute_result(self, context: Any) -> Any:
        result, token = _without_token(self.result)
        key = _render_key(context, result, self.by)
        if key is None:
            return super().execute_result(context)
        kept = _RENDERED.get(key)
        if kept is None:
            kept = _rendered(context, key, result)
            _RENDERED.put(key, kept, len(kept[2]))
        status, headers, body = kept
        if token is not None:
            body = _with_token(body, token)
            if body is None:  # the stand-in is not where only the token can be: render the answer itself
                return super().execute_result(context)
        return status, dict(headers), body  # the caller adds its own headers to the dict


#: what a page's `NextToken` is rendered as in a kept page, replaced by the request's own token when served.
#: A token is bound to its request (`StartTime` included), so pages that differ only by it are kept once.
TOKEN_STAND_IN = "carpool-next-token-stand-in"
#: the characters of `_token`'s tokens (URL-safe base64), which every serializer writes verbatim
_VERBATIM = re.compile(r"[A-Za-z0-9_=-]+")


def _without_token(result: Any) -> tuple[Any, str | None]:
    """The answer with its `NextToken` replaced by the stand-in, and the token (None: kept as it is)."""
    if not isinstance(result, dict):
        return result, None
    token = result.get("NextToken")
    if not isinstance(token, str) or not _VERBATIM.fullmatch(token):
        return result, None
    return {**result, "NextToken": TOKEN_STAND_IN}, token


def _with_token(body: str | bytes, token: str) -> str | bytes | None:
    """The kept body with the request's token in place of the stand-in; None unless the stand-in occurs
    exactly once (content holding the stand-in's text is not served from a kept page)."""
    if isinstance(body, str):
        return body.replace(TOKEN_STAND_IN, token) if body.count(TOKEN_STAND_IN) == 1 else None
    stand_in = TOKEN_STAND_IN.encode()
    return body.replace(stand_in, token.encode()) if body.count(stand_in) == 1 else None


def _rendered(context: Any, key: str, result: Any) -> tuple[Any, dict[str, Any], Any]:
    """The rendering of `result` from the disk store, else from moto's serializer (then stored)."""
    store = page_store.current()
    kept = store.get(key) if store is not None else None
    if kept is None:
        status, headers, body = ActionResult(result).execute_result(context)
        kept = (status, dict(headers), body)
        if store is not None:
            store.put(key, kept)
    return kept


class _Refused(TypeError):
    pass


def _refuse(value: Any) -> Any:
    raise _Refused(type(value).__name__)


#: the layout of a rendered page's key (a new layout is a new key for every kept page)
KEY_FORMAT = 1


def _render_key(context: Any, result: Any, by: type[MotoPatch] | None = None) -> str | None:
    """The rendered page's key (JSON text), or None for an answer a content digest cannot vouch for."""
    from moto import settings

    try:
        content = json.dumps(result, default=_refuse, separators=(",", ":"))
    except (_Refused, ValueError):
        return None
    service = context.service_model
    response_type = type(context.response)
    fixed = _fixed_key(context.serializer_class, response_type, service.service_name, service.api_version,
                       context.operation_model.name, bool(settings.PRETTIFY_RESPONSES), by)
    # the transformers are looked up each time: moto adds to a response class's map at run time
    transformers = _transformers(getattr(response_type, "RESPONSE_KEY_PATH_TO_TRANSFORMER", None))
    return json.dumps({"fixed": fixed, "transformers": transformers,
                       "content": hashlib.sha256(content.encode()).hexdigest()}, separators=(",", ":"))


_FIXED: dict[tuple[Any, ...], str] = {}


def _fixed_key(serializer: type, response_type: type, service: str, api_version: str, operation: str,
               pretty: bool, by: type[MotoPatch] | None) -> str:
    """The part of a key that does not change within a process, worked out once per combination."""
    memo = (serializer, response_type, service, api_version, operation, pretty, by)
    held = _FIXED.get(memo)
    if held is None:
        import botocore
        import xmltodict

        patch = {} if by is None else {"patch": _name(by), "internals": {
            i.where: i.fingerprint for i in by.replaces + by.relies_on}}
        held = _FIXED[memo] = json.dumps({
            "format": KEY_FORMAT, "moto": moto_version(), "botocore": botocore.__version__,
            "xmltodict": getattr(xmltodict, "__version__", "?"),
            "serializer": _name(serializer), "serializer_module": _source_digest(serializer.__module__),
            "response": _name(response_type), "service": service, "api_version": api_version,
            "operation": operation, "pretty": pretty,
            "rendering": {i.where: fingerprint(i.current()) for i in RENDERING}, **patch,
        }, sort_keys=True, separators=(",", ":"))
    return held


def _name(value: Any) -> str:
    return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', type(value).__qualname__)}"


def _source_digest(module: str) -> str:
    """A digest of a module's source file: moto's serializer can change without a release (a source install)."""
    import importlib
    import inspect

    try:
        path = inspect.getsourcefile(importlib.import_module(module))
        with open(path or "", "rb") as source:
            return hashlib.sha256(source.read()).hexdigest()[:16]
    except (OSError, TypeError):
        return "unreadable"


def _transformers(transformers: Any) -> str:
    """A digest of a response class's value transformers: each key path with its function's qualified
    name and source fingerprint."""
    if not transformers:
        return ""
    described = []
    for path, function in sorted(dict(transformers).items()):
        try:
            source = fingerprint(function)
        except (OSError, TypeError):
            source = "unreadable"
        described.append(f"{path}={_name(function)}:{source}")
    return hashlib.sha256("\n".join(described).encode()).hexdigest()[:16]


class _Rendered:
    """Rendered answers, least recently used dropped first once they hold more than `budget` bytes."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._held: OrderedDict[str, tuple[tuple[Any, dict[str, Any], Any], int]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        #: answers served from memory / rendered (for measuring what the memo saves)
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> tuple[Any, dict[str, Any], Any] | None:
        with self._lock:
            kept = self._held.get(key)
            if kept is None:
                self.misses += 1
                return None
            self.hits += 1
            self._held.move_to_end(key)
            return kept[0]

    def put(self, key: str, value: tuple[Any, dict[str, Any], Any], size: int) -> None:
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
    docstring), each page rendered once (kept in memory and on disk).

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
            return page(self, "InstanceTypes", found, size, PagedInstanceTypes)

        def describe_instance_type_offerings(self: Any) -> Any:
            size = max_results(self, INSTANCE_TYPE_OFFERINGS)
            found = self.ec2_backend.describe_instance_type_offerings(self._get_param("LocationType"),
                                                                     self._filters_from_querystring())
            return page(self, "InstanceTypeOfferings", found, size, PagedInstanceTypes)

        InstanceResponse.describe_instance_types = describe_instance_types  # type: ignore[method-assign]
        InstanceResponse.describe_instance_type_offerings = describe_instance_type_offerings  # type: ignore[method-assign]
        return [(InstanceResponse, "describe_instance_types", types),
                (InstanceResponse, "describe_instance_type_offerings", offerings)]
