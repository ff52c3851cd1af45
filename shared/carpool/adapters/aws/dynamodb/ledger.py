"""carpool's state repositories on one DynamoDB table (layout in docs/design.md, `carpool.state`).

They behave exactly like `carpool.state.memory` (the same tests run on both). What DynamoDB adds is
that the guarantees hold across concurrent Lambdas:

- `DynamoLedger.reserve` is one TransactWriteItems: the claim Put (`attribute_not_exists`), one Put per pod
  nomination (free, or the previous nomination expired), and the pool-usage Update whose condition keeps
  every limited resource within its limit. Two provisioners racing on the same pods or the same limit
  cannot both succeed; the loser gets `ReservationRefused` naming the pod or the resource.
- Whether a nomination holds also depends on its claim (gone, or registered past
  `NOMINATION_HOLD_AFTER_REGISTRATION`: `carpool.state.models.holds_nominations`), which a nomination's
  condition cannot read. So registering a claim is one UpdateItem of the claim, not a write per pod;
  readers check the claims named (`nominated`); and a reservation cancelled on nominations of such claims
  is sent once more taking those over by name (`#claim IN (...)`), which keeps DynamoDB the judge of
  races for them (`DynamoLedger._transact_nominating`).
- Capacity observations use optimistic locking (`version`), so concurrent registrars never lose a sample.
- Expiry is always checked in code: DynamoDB's TTL deletes items up to days late, and moto never does.

Items carry a `gsi1pk` so that "all claims", "all nominations" and "all pools" are each one Query on the
`gsi1` index instead of a Scan (the index must project ALL attributes). Index reads are eventually
consistent; only `reserve`'s conditions decide races, and they read the table itself.
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import DYNAMODB_CONTEXT, TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError
from pydantic.alias_generators import to_camel

from carpool import capacity as capacity_rules
from carpool import environment
from carpool.adapters.aws import session
from carpool.state.models import (
    ACTIVE_STATUSES,
    CapacityRecord,
    Claim,
    ClaimStatus,
    UnavailableOffering,
    holds_nominations,
)
from carpool.state.ports import Refusal, ReservationRefused
from carpool.state.saving import ClaimChanged, ClaimGone, with_launch

log = logging.getLogger(__name__)

TABLE_ENV = "CARPOOL_TABLE"
GSI = "gsi1"
TTL_ATTR = "expiresAt"
#: TransactWriteItems' limit on items per transaction.
MAX_TRANSACTION_ITEMS = 100
#: BatchWriteItem's limit on items per call (and the claims `mark_launched_many` writes per transaction).
BATCH_WRITE_ITEMS = 25
#: how often a claim write that lost its condition to another writer reads the claim again
SAVE_ATTEMPTS = 5
#: `reserve` puts the claim and the usage update in its first transaction, so it has room for 98 pods.
FIRST_CHUNK_PODS = MAX_TRANSACTION_ITEMS - 2
#: attempts for a transaction that lost a TransactionConflict
CONFLICT_ATTEMPTS = 5
#: attempts for an optimistic capacity update (registrars of one type and AMI rarely overlap)
OBSERVE_ATTEMPTS = 8
#: rounds of resending the items a BatchGetItem/BatchWriteItem left unprocessed (throttling) before failing
UNPROCESSED_ATTEMPTS = 5
#: keep nomination items this long past their expiry before DynamoDB's TTL may delete them
NOMINATION_TTL_GRACE = timedelta(hours=1)

CLAIMS, NOMINATIONS, POOLS = "CLAIMS", "NOMINATIONS", "POOLS"
ICE, CAP = "ICE", "CAP"
_KEY_ATTRS = frozenset({"pk", "sk", "gsi1pk", "gsi1sk", TTL_ATTR})
#: a pool usage item's bookkeeping beside its resources: bumped by every change of its usage, and the
#: value the last disruption run saw (see `DynamoLedger.reconcile_usage`)
USAGE_VERSION = "usageVersion"
USAGE_SEEN = "usageSeen"
_USAGE_BOOKS = frozenset({USAGE_VERSION, USAGE_SEEN})

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


# -- value conversion -----------------------------------------------------------------------------------
def _utc(dt: datetime) -> datetime:
    """Naive datetimes are taken as UTC (the app injects aware ones; tests sometimes do not)."""
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def epoch(dt: datetime) -> Decimal:
    """Exact epoch seconds (microsecond precision) as a DynamoDB number; float would round."""
    micros = (_utc(dt) - _EPOCH) // timedelta(microseconds=1)
    return Decimal(micros) / Decimal(1_000_000)


def from_epoch(value: Decimal | int | float) -> datetime:
    return _EPOCH + timedelta(microseconds=int(Decimal(value) * 1_000_000))


def ttl_epoch(dt: datetime) -> int:
    """Whole epoch seconds for DynamoDB's TTL attribute, rounded up so TTL never deletes early."""
    return math.ceil(epoch(dt))


def to_dynamo(value: Any) -> Any:
    """Python value -> something TypeSerializer accepts (floats become Decimals, exactly as printed)."""
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, Mapping):
        return {str(k): to_dynamo(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_dynamo(v) for v in value]
    return value


def from_dynamo(value: Any) -> Any:
    """Deserialized value -> plain Python (Decimals become int when integral, else float)."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, Mapping):
        return {k: from_dynamo(v) for k, v in value.items()}
    if isinstance(value, list | set | tuple):
        return [from_dynamo(v) for v in value]
    return value


def attribute_value(value: Any) -> dict[str, Any]:
    """`TypeSerializer().serialize(to_dynamo(value))`, the same answer for every value, with the plain JSON
    types (what a claim or a nomination is made of) built directly: boto3's serializer tries each type in
    turn for every value, which was a third of the client's time for a batch's 1,400 transaction items.
    Anything else (sets, bytes, str subclasses...) goes through boto3's own rules."""
    kind = type(value)
    if kind is str:
        return {"S": value}
    if kind is bool:
        return {"BOOL": value}
    if kind is int or kind is Decimal:
        return {"N": _number(value)}
    if kind is float:
        return {"N": _number(Decimal(repr(value)))}
    if kind is dict:
        return {"M": {str(k): attribute_value(v) for k, v in value.items()}}
    if kind is list or kind is tuple:
        return {"L": [attribute_value(v) for v in value]}
    if value is None:
        return {"NULL": True}
    return dict(_serializer.serialize(to_dynamo(value)))


def _number(value: int | Decimal) -> str:
    """A DynamoDB number as boto3 writes it (its 38-digit context; infinities and NaN refused)."""
    text = str(DYNAMODB_CONTEXT.create_decimal(value))
    if text in ("Infinity", "NaN"):
        raise TypeError("Infinity and NaN not supported")
    return text


def serialize(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: attribute_value(v) for k, v in item.items() if v is not None}


def deserialize(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _deserializer.deserialize(v) for k, v in item.items()}


def values(**kv: Any) -> dict[str, Any]:
    """ExpressionAttributeValues from keyword arguments (`values(now=...)` -> `{":now": {...}}`)."""
    return {f":{k}": attribute_value(v) for k, v in kv.items()}


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


# -- item shapes ----------------------------------------------------------------------------------------
def claim_key(name: str) -> dict[str, Any]:
    return serialize({"pk": f"CLAIM#{name}", "sk": "CLAIM"})


def nomination_key(pod: str) -> dict[str, Any]:
    return serialize({"pk": f"POD#{pod}", "sk": "NOMINATION"})


def usage_key(nodepool: str) -> dict[str, Any]:
    return serialize({"pk": f"POOL#{nodepool}", "sk": "USAGE"})


_CLAIM_FIELDS = {to_camel(name): name for name in Claim.model_fields}


#: what separates the names of one chunk of a stored name list (see `chunked`); Kubernetes names (DNS
#: labels and subdomains) and EC2 instance type names cannot hold it
SEPARATOR = "\n"
#: the claim attributes stored as `chunked` name lists
_CHUNKED = ("pods", "instanceTypes")


def chunked(names: Sequence[str]) -> list[str]:
    """A list of names as a claim stores it (`pods`, `instanceTypes`), or as `nominate` appends to it: a
    list of chunks, each the names written together joined by `SEPARATOR` (one chunk for the claim's
    pods when it is reserved, one more per in-flight nomination). A burst's claim lists some 500 pods
    and 60-odd instance types, and every watcher, provisioner and disruption run reads every claim: as a
    chunk instead of 500 list elements, each is one value to write, send, check and parse, not 500.
    The order of the names is kept."""
    for name in names:
        if SEPARATOR in name:
            raise ValueError(f"{name[:80]!r} holds a line break: no Kubernetes or instance type name does")
    return [SEPARATOR.join(names)] if names else []


def unchunked(chunks: Iterable[str]) -> list[str]:
    """The names of a stored `chunked` list, in order. An element without a separator is one name, so a
    list stored one element per name reads the same."""
    return [name for chunk in chunks for name in chunk.split(SEPARATOR) if name]


def claim_item(claim: Claim) -> dict[str, Any]:
    """Claim fields as top-level camelCase attributes (so `instanceId` is the design's attribute); its
    pods and instance types `chunked`."""
    body = {to_camel(k): v for k, v in claim.model_dump(mode="json", exclude_none=True).items()}
    for name in _CHUNKED:
        body[name] = chunked(body.get(name, []))
    return {
        "pk": f"CLAIM#{claim.name}",
        "sk": "CLAIM",
        "gsi1pk": CLAIMS,
        "gsi1sk": f"{claim.status.value}#{claim.name}",
        **body,
    }


def claim_from_item(item: Mapping[str, Any]) -> Claim:
    plain = from_dynamo(deserialize(item))
    for name in _CHUNKED:
        if isinstance(plain.get(name), list):
            plain[name] = unchunked(plain[name])
    return Claim.model_validate({_CLAIM_FIELDS[k]: v for k, v in plain.items() if k in _CLAIM_FIELDS})


_RECORD_DATES = ("first_seen", "last_seen")


def record_item(record: CapacityRecord, version: int) -> dict[str, Any]:
    return {
        "pk": CAP,
        "sk": f"{record.instance_type}#{record.image_id}",
        "instanceType": record.instance_type,
        "imageId": record.image_id,
        "amiFamily": record.ami_family,
        "capacity": record.capacity,
        "allocatable": record.allocatable,
        "samples": record.samples,
        "firstSeen": _utc(record.first_seen).isoformat(),
        "lastSeen": _utc(record.last_seen).isoformat(),
        # exact expiry for the code, whole seconds for DynamoDB's TTL
        "expires": _utc(record.expires_at).isoformat(),
        TTL_ATTR: ttl_epoch(record.expires_at),
        "version": version,
    }


def record_from_item(item: Mapping[str, Any]) -> tuple[CapacityRecord, int]:
    plain = from_dynamo(deserialize(item))
    record = CapacityRecord(
        instance_type=plain["instanceType"],
        image_id=plain["imageId"],
        ami_family=plain.get("amiFamily", ""),
        capacity=plain.get("capacity", {}),
        allocatable=plain.get("allocatable", {}),
        samples=plain.get("samples", 1),
        first_seen=datetime.fromisoformat(plain["firstSeen"]),
        last_seen=datetime.fromisoformat(plain["lastSeen"]),
        expires_at=datetime.fromisoformat(plain["expires"]),
    )
    return record, int(plain.get("version", 0))


# -- table access ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Projection:
    """The attributes a read returns (ProjectionExpression), with the names it needs aliased."""

    expression: str
    names: Mapping[str, str]

    def request(self) -> dict[str, Any]:
        return {"ProjectionExpression": self.expression, "ExpressionAttributeNames": dict(self.names)}


#: what the nomination rule reads of a claim (not its pod list, hundreds of keys for a burst's node)
CLAIM_HOLD = Projection("pk, #st, registeredAt", {"#st": "status"})


class StateTable:
    """The state table: name from `CARPOOL_TABLE` unless given, client from `session` unless given."""

    def __init__(self, table_name: str | None = None, client: Any | None = None) -> None:
        self.name = table_name or environment.get(TABLE_ENV, "")
        if not self.name:
            raise ValueError(f"no state table: set {TABLE_ENV}")
        self.client = client if client is not None else session.client("dynamodb")

    def query(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        """Every item of a Query, page after page."""
        for page in self.client.get_paginator("query").paginate(TableName=self.name, **kwargs):
            yield from page.get("Items", [])

    def query_partition(self, pk: str) -> Iterator[dict[str, Any]]:
        return self.query(KeyConditionExpression="pk = :pk", ExpressionAttributeValues=values(pk=pk))

    def query_index(self, gsi1pk: str) -> Iterator[dict[str, Any]]:
        return self.query(
            IndexName=GSI, KeyConditionExpression="gsi1pk = :pk", ExpressionAttributeValues=values(pk=gsi1pk)
        )

    def get(self, key: Mapping[str, Any]) -> dict[str, Any] | None:
        return self.client.get_item(TableName=self.name, Key=dict(key), ConsistentRead=True).get("Item")

    def batch_get(
        self, keys: Iterable[Mapping[str, Any]], sleep: Callable[[float], None] = time.sleep,
        projection: Projection | None = None,
    ) -> list[dict[str, Any]]:
        """BatchGetItem in groups of 100 (consistent reads), resending unprocessed keys with backoff a
        bounded number of times (unprocessed keys are how BatchGetItem reports throttling). With
        `projection`, only those attributes are read."""
        pending = [dict(k) for k in keys]
        out: list[dict[str, Any]] = []
        shape: dict[str, Any] = {"ConsistentRead": True, **(projection.request() if projection else {})}
        while pending:
            chunk, pending = pending[:100], pending[100:]
            request: dict[str, Any] = {self.name: {"Keys": chunk, **shape}}
            for attempt in range(UNPROCESSED_ATTEMPTS):
                answer = self.client.batch_get_item(RequestItems=request)
                out.extend(answer.get("Responses", {}).get(self.name, []))
                request = answer.get("UnprocessedKeys") or {}
                if not request:
                    break
                sleep(random.random() * min(2.0, 0.05 * 2**attempt))
            else:
                left = len(request.get(self.name, {}).get("Keys", []))
                raise RuntimeError(f"{left} keys left unprocessed in {self.name} (throttled)")
        return out

    def batch_put(self, items: Iterable[Mapping[str, Any]], sleep: Callable[[float], None]) -> None:
        """BatchWriteItem in groups of 25, resending unprocessed items with backoff."""
        requests = [{"PutRequest": {"Item": serialize(i)}} for i in items]
        for start in range(0, len(requests), 25):
            pending = requests[start : start + 25]
            for attempt in range(UNPROCESSED_ATTEMPTS):
                out = self.client.batch_write_item(RequestItems={self.name: pending})
                pending = out.get("UnprocessedItems", {}).get(self.name, [])
                if not pending:
                    break
                sleep(random.random() * min(2.0, 0.05 * 2**attempt))
            else:
                raise RuntimeError(f"{len(pending)} items left unprocessed in {self.name}")


# -- transactions ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Op:
    """One TransactWriteItems entry plus what it stands for (to explain a cancellation)."""

    request: dict[str, Any]
    what: str  # "claim", "usage" or "pod"
    subject: str  # claim name, nodepool or pod key


class _Cancelled(Exception):
    def __init__(self, failures: list[tuple[_Op, str, dict[str, Any] | None]]) -> None:
        super().__init__(", ".join(f"{op.what} {op.subject}: {code}" for op, code, _ in failures))
        self.failures = failures

    @property
    def conflict_only(self) -> bool:
        return all(code == "TransactionConflict" for _, code, _ in self.failures)

    def without_pods(self, pods: Collection[str]) -> _Cancelled:
        """The same cancellation less the failures of these pods' nominations."""
        return _Cancelled([f for f in self.failures if not (f[0].what == "pod" and f[0].subject in pods)])


def _transact(table: StateTable, ops: list[_Op], sleep: Callable[[float], None]) -> None:
    """TransactWriteItems, retried while the only reason is a TransactionConflict (another transaction
    touching the same items right now); conditional failures raise `_Cancelled` with the failed ops."""
    for attempt in range(CONFLICT_ATTEMPTS):
        try:
            table.client.transact_write_items(TransactItems=[op.request for op in ops])
            return
        except ClientError as e:
            if error_code(e) != "TransactionCanceledException":
                raise
            cancelled = _cancellation(ops, e)
            if not cancelled.conflict_only or attempt == CONFLICT_ATTEMPTS - 1:
                raise cancelled from e
            sleep(random.random() * 0.05 * 2**attempt)


def _cancellation(ops: list[_Op], error: ClientError) -> _Cancelled:
    reasons = error.response.get("CancellationReasons") or []
    failures = []
    for op, reason in zip(ops, reasons, strict=False):
        code = reason.get("Code", "None")
        if code and code != "None":
            failures.append((op, code, reason.get("Item")))
    if not failures:  # no reasons returned: blame every op rather than nothing
        failures = [(op, "Unknown", None) for op in ops]
    return _Cancelled(failures)


class DynamoLedger:
    """`carpool.state.ports.ClaimLedger` on DynamoDB.

    Claims with more than 98 pods are reserved in several transactions (TransactWriteItems takes at most
    100 items): the first carries the claim, the usage update and the first 98 nominations, each later one
    up to 100 more nominations. The trade-off: such a reservation is atomic per chunk, not as a whole.
    Safety still holds, because every nomination is individually conditional and the pool's usage is taken
    in the first chunk, so no pod is ever nominated twice and no limit is ever passed. If a later chunk is
    refused, the claim is released again (claim, usage and the nominations already written), and a
    concurrent provisioner may meanwhile have been refused a pod that ends up free; it retries on its next
    batch. A crash between chunks leaves a RESERVED claim holding some pods until the nominations expire
    and the claim is reaped like any claim that never launched.
    """

    def __init__(
        self,
        table_name: str | None = None,
        client: Any | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._table = StateTable(table_name, client)
        self._sleep = sleep

    # -- reserve --------------------------------------------------------------------------------------
    def reserve(
        self, claim: Claim, limits: Mapping[str, int] | None, now: datetime, ttl_seconds: int,
        replacing: Collection[str] = (),
    ) -> None:
        """Sets `claim.nominated_until` on the caller's claim, which the claim item carries: the caller
        stores that object whole later (`mark_launched`), which must not drop it."""
        _refuse_impossible(claim, limits)
        pods = list(dict.fromkeys(claim.pods))
        until = now + timedelta(seconds=ttl_seconds)
        claim.nominated_until = until
        first, rest = pods[:FIRST_CHUNK_PODS], pods[FIRST_CHUNK_PODS:]
        head = [self._claim_put(claim), self._usage_reserve(claim, limits)]
        try:
            self._transact_nominating(head, first, claim.name, now, until, replacing)
        except _Cancelled as c:
            raise ReservationRefused(*_refusal_reason(c, claim, limits)) from c
        for start in range(0, len(rest), MAX_TRANSACTION_ITEMS):
            chunk = rest[start : start + MAX_TRANSACTION_ITEMS]
            try:
                self._transact_nominating([], chunk, claim.name, now, until, replacing)
            except _Cancelled as c:
                self.release(claim)
                raise ReservationRefused(*_refusal_reason(c, claim, limits)) from c
            except Exception:
                # Not a refusal (the network, throttling past retries): undo what we can, then fail.
                with contextlib.suppress(Exception):
                    self.release(claim)
                raise

    def reserve_many(self, claims: Sequence[Claim], limits: Mapping[str, int] | None, now: datetime,
                     ttl_seconds: int, replacing: Collection[str] = ()) -> dict[str, Exception]:
        """Several claims of one pool in as few transactions as they fit: each claim whole in one
        transaction (its Put and its nominations), with one usage update per transaction for their sum.

        A transaction cancelled for some of its claims (a pod nominated elsewhere, a claim that exists)
        is sent again without them, which are refused with `reserve`'s reason. One cancelled on the pool's
        limit, or failing for any other reason (throttling past the retries), is done again claim by claim
        (`reserve`): near a limit some of the claims may still fit, and a claim whose own write fails must
        fail alone. So every claim is reserved, refused or failed exactly as if it had been reserved alone."""
        failed: dict[str, Exception] = {}
        together: list[Claim] = []
        for claim in claims:
            if len(set(claim.pods)) > FIRST_CHUNK_PODS:
                self._reserve_alone(claim, limits, now, ttl_seconds, replacing, failed)
            else:
                together.append(claim)
        for chunk in _transaction_chunks(together):
            self._reserve_chunk(chunk, limits, now, ttl_seconds, replacing, failed)
        return failed

    def _reserve_alone(self, claim: Claim, limits: Mapping[str, int] | None, now: datetime, ttl_seconds: int,
                       replacing: Collection[str], failed: dict[str, Exception]) -> None:
        try:
            self.reserve(claim, limits, now, ttl_seconds, replacing)
        except Exception as exc:
            failed[claim.name] = exc

    def _reserve_chunk(self, chunk: list[Claim], limits: Mapping[str, int] | None, now: datetime, ttl_seconds: int,
                       replacing: Collection[str], failed: dict[str, Exception]) -> None:
        """One transaction for the chunk's claims. Its pods found nominated to claims that no longer hold
        them are looked up once and taken over in the next attempt (see `_transact_nominating`)."""
        until = now + timedelta(seconds=ttl_seconds)
        for claim in chunk:
            claim.nominated_until = until
        lapsed: dict[str, str] | None = None
        while len(chunk) > 1 and not _exceeds(chunk, limits):
            total = chunk[0].model_copy(update={"reserved": _summed(c.reserved for c in chunk)})
            ops = [self._usage_reserve(total, limits)]
            for claim in chunk:
                ops.append(self._claim_put(claim))
                nominations = _Nominations(self._table.name, claim.name, now, until)
                ops += [nominations.op(p, _takeover(replacing, (lapsed or {}).get(p))) for p in dict.fromkeys(claim.pods)]
            try:
                _transact(self._table, ops, self._sleep)
                return
            except _Cancelled as c:
                if lapsed is None:
                    lapsed = self._lapsed(c, now)
                    c = c.without_pods(lapsed)
                    if not c.failures:
                        continue
                refused = _refused_claims(c, chunk)
                if refused is None:
                    break
            except Exception:
                log.warning("reserving %d claims together failed; reserving them one by one", len(chunk))
                break
            for claim in chunk:
                if claim.name in refused:
                    failed[claim.name] = ReservationRefused(*_refusal_reason(refused[claim.name], claim, limits))
            chunk = [c for c in chunk if c.name not in refused]
        for claim in chunk:
            self._reserve_alone(claim, limits, now, ttl_seconds, replacing, failed)

    def nominate(self, claim_name: str, pods: list[str], requests: Mapping[str, int], now: datetime,
                 ttl_seconds: int) -> None:
        """One transaction per chunk: the pods' nominations (each conditional on being free) and the
        claim's `pods`/`requested` grown in place (conditional on the claim still being in flight). A
        refused chunk leaves earlier chunks in place: those pods are on the claim, which is consistent."""
        until = now + timedelta(seconds=ttl_seconds)
        unique = list(dict.fromkeys(pods))
        for start in range(0, len(unique), MAX_TRANSACTION_ITEMS - 1):
            chunk = unique[start : start + MAX_TRANSACTION_ITEMS - 1]
            share = requests if start == 0 else {}
            try:
                self._transact_nominating([self._grow_claim(claim_name, chunk, share)], chunk, claim_name, now, until)
            except _Cancelled as c:
                raise ReservationRefused(*_nominate_refusal(c, claim_name)) from c

    def _transact_nominating(self, head: list[_Op], pods: list[str], claim_name: str, now: datetime,
                             until: datetime, replacing: Collection[str] = ()) -> None:
        """`head` and the nominations of `pods` to `claim_name` in one transaction.

        A nomination's condition can only compare the nomination itself (free, expired, or held by a claim
        in `replacing`); whether its claim still holds it (`carpool.state.models.holds_nominations`) is
        on the claim. So a transaction cancelled on nominations held by other claims reads those claims
        (the cancellation returns each nomination as it was), and when every other cause is gone with the
        lapsed ones (claims deleted, or registered past their hold) it is sent once more, taking those
        nominations over with the same `#claim IN (...)` condition as `replacing`. A concurrent
        provisioner that took such a pod meanwhile rewrote its `claim`, so the retry's condition fails and
        DynamoDB still decides the race. Raises `_Cancelled`."""
        lapsed: dict[str, str] = {}
        nominations = _Nominations(self._table.name, claim_name, now, until)
        for lookup in (True, False):
            ops = head + [nominations.op(p, _takeover(replacing, lapsed.get(p))) for p in pods]
            try:
                _transact(self._table, ops, self._sleep)
                return
            except _Cancelled as c:
                found = self._lapsed(c, now) if lookup else {}
                rest = c.without_pods(found)
                if not found or (rest.failures and not rest.conflict_only):
                    raise
                lapsed = found

    def _lapsed(self, cancelled: _Cancelled, now: datetime) -> dict[str, str]:
        """Pod -> claim for the nominations a cancelled transaction found held by claims that no longer
        hold them: gone (a crash between the claim's delete and its nominations') or registered past
        their hold. One consistent read of those claims, without their pod lists."""
        held: dict[str, str] = {}
        for op, code, old in cancelled.failures:
            holder = (old or {}).get("claim", {}).get("S")
            if op.what == "pod" and code == "ConditionalCheckFailed" and holder:
                held[op.subject] = holder
        if not held:
            return {}
        holding = self._holding(held.values(), now)
        return {pod: holder for pod, holder in held.items() if holder not in holding}

    def _holding(self, names: Iterable[str], now: datetime) -> set[str]:
        """Of the claims `names`, those that exist and still hold their nominations at `now`."""
        out = set()
        for item in self._table.batch_get((claim_key(n) for n in dict.fromkeys(names)), projection=CLAIM_HOLD):
            plain = deserialize(item)
            registered = plain.get("registeredAt")
            since = datetime.fromisoformat(str(registered)) if registered else None
            if holds_nominations(str(plain.get("status", "")), since, _utc(now)):
                out.add(str(plain["pk"]).removeprefix("CLAIM#"))
        return out

    def _grow_claim(self, claim_name: str, pods: list[str], requests: Mapping[str, int]) -> _Op:
        names = {"#pods": "pods", "#st": "status", "#ver": "version"}
        vals: dict[str, Any] = {"new": chunked(pods), "empty": [], "reserved": "reserved", "launched": "launched",
                                "zero": 0, "one": 1}
        if requests:  # DynamoDB rejects a name the expressions do not use (later chunks add no requests)
            names["#req"] = "requested"
        sets = ["#pods = list_append(if_not_exists(#pods, :empty), :new)", "#ver = if_not_exists(#ver, :zero) + :one"]
        for i, (resource, delta) in enumerate(sorted(requests.items())):
            names[f"#k{i}"] = resource
            vals[f"d{i}"] = delta
            sets.append(f"#req.#k{i} = if_not_exists(#req.#k{i}, :zero) + :d{i}")
        request = {
            "Update": {
                "TableName": self._table.name,
                "Key": claim_key(claim_name),
                "UpdateExpression": "SET " + ", ".join(sets),
                "ConditionExpression": "attribute_exists(pk) AND #st IN (:reserved, :launched)",
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values(**vals),
            }
        }
        return _Op(request, "claim", claim_name)

    def _claim_put(self, claim: Claim) -> _Op:
        request = {
            "Put": {
                "TableName": self._table.name,
                "Item": serialize(claim_item(claim)),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }
        return _Op(request, "claim", claim.name)

    def _usage_reserve(self, claim: Claim, limits: Mapping[str, int] | None) -> _Op:
        """Add the claim's size to its pool's usage; for each limited resource r the condition is
        `usage[r] <= limit - delta` (`attribute_not_exists` covers the pool's first claim, whose sum is
        `if_not_exists(r, 0) + delta`, already checked against the limit by `_refuse_impossible`)."""
        names = {"#gpk": "gsi1pk", "#gsk": "gsi1sk", "#pool": "nodepool", "#uv": USAGE_VERSION}
        vals: dict[str, Any] = {"pools": POOLS, "pool": claim.nodepool, "zero": 0, "one": 1}
        sets = ["#gpk = :pools", "#gsk = :pool", "#pool = :pool", "#uv = if_not_exists(#uv, :zero) + :one"]
        conditions = []
        for i, (resource, delta) in enumerate(sorted(claim.reserved.items())):
            names[f"#r{i}"] = resource
            vals[f"d{i}"] = delta
            sets.append(f"#r{i} = if_not_exists(#r{i}, :zero) + :d{i}")
            if limits is not None and resource in limits:
                vals[f"m{i}"] = limits[resource] - delta
                conditions.append(f"(attribute_not_exists(#r{i}) OR #r{i} <= :m{i})")
        update: dict[str, Any] = {
            "TableName": self._table.name,
            "Key": usage_key(claim.nodepool),
            "UpdateExpression": "SET " + ", ".join(sets),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values(**vals),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if conditions:
            update["ConditionExpression"] = " AND ".join(conditions)
        return _Op({"Update": update}, "usage", claim.nodepool)

    # -- lifecycle ------------------------------------------------------------------------------------
    def mark_launched(self, claim: Claim) -> None:
        """The launch facts onto the claim as stored now (`saving.with_launch`), written only while it
        exists and records no other instance (a read, then `save` conditional on the version read; a lost
        race reads again). Already registered with this instance (the registrar repaired it first):
        nothing to write. Never brings back a released claim."""
        for _ in range(SAVE_ATTEMPTS):
            item = self._table.get(claim_key(claim.name))
            if item is None:
                raise ClaimGone(claim.name)
            fresh = with_launch(claim_from_item(item), claim)
            if fresh is None:
                return
            try:
                self.save(fresh)
            except ClaimChanged:
                continue
            claim.version = fresh.version
            return
        raise ClaimChanged(claim.name)

    def mark_launched_many(self, claims: Sequence[Claim]) -> dict[str, Exception]:
        """Claims just reserved by this caller, their launches recorded: one transaction per 25 claims,
        each Put conditional on the claim still being the version reserved (nobody else wrote it, so the
        claim is the stored one plus its launch). A transaction refused or failed is done again claim by
        claim (`mark_launched`, which reads what is stored), so only a claim whose own write fails fails."""
        failed: dict[str, Exception] = {}
        for start in range(0, len(claims), BATCH_WRITE_ITEMS):
            chunk = claims[start : start + BATCH_WRITE_ITEMS]
            if self._saved_together(chunk):
                continue
            for claim in chunk:
                try:
                    self.mark_launched(claim)
                except Exception as exc:  # noqa: BLE001 - reported as this claim's failure
                    failed[claim.name] = exc
        return failed

    def _saved_together(self, chunk: Sequence[Claim]) -> bool:
        """`save` for every claim of `chunk` (one PutItem, or one transaction for several); False when it
        was refused or failed."""
        try:
            if len(chunk) == 1:
                self.save(chunk[0])
                return True
            _transact(self._table, [self._versioned_put(c) for c in chunk], self._sleep)
        except Exception:  # noqa: BLE001 - the caller writes them one by one
            log.info("recording %d launches together failed; recording them one by one", len(chunk))
            return False
        for claim in chunk:
            claim.version += 1
        return True

    def charge(self, claim: Claim, extra: Mapping[str, int]) -> None:
        """The claim's `reserved` and its pool's usage grown by `extra` in one transaction, conditional on
        the claim's version (see `ClaimLedger.charge`)."""
        if not extra:
            return
        condition, names, vals = _version_condition(claim.version)
        names["#res"] = "reserved"
        sets = ["#ver = if_not_exists(#ver, :zero) + :one"]
        vals.update(values(zero=0, one=1))
        for i, (resource, delta) in enumerate(sorted(extra.items())):
            names[f"#k{i}"] = resource
            vals.update(values(**{f"d{i}": delta}))
            sets.append(f"#res.#k{i} = if_not_exists(#res.#k{i}, :zero) + :d{i}")
        grow = {"Update": {"TableName": self._table.name, "Key": claim_key(claim.name),
                           "UpdateExpression": "SET " + ", ".join(sets), "ConditionExpression": condition,
                           "ExpressionAttributeNames": names, "ExpressionAttributeValues": vals}}
        added = claim.model_copy(update={"reserved": dict(extra)})
        try:
            _transact(self._table, [_Op(grow, "claim", claim.name), self._usage_reserve(added, None)], self._sleep)
        except _Cancelled as c:
            if self._table.get(claim_key(claim.name)) is None:
                raise ClaimGone(claim.name) from c
            raise ClaimChanged(claim.name) from c
        claim.reserved = _summed([claim.reserved, extra])
        claim.version += 1

    def save(self, claim: Claim) -> None:
        """The whole claim, conditional on the stored one existing at `claim.version` (bumped on success,
        on `claim` too). Raises ClaimGone or ClaimChanged (see `carpool.state.saving`)."""
        op = self._versioned_put(claim)
        try:
            self._table.client.put_item(**op.request["Put"])
        except ClientError as e:
            if error_code(e) != "ConditionalCheckFailedException":
                raise
            if self._table.get(claim_key(claim.name)) is None:
                raise ClaimGone(claim.name) from e
            raise ClaimChanged(claim.name) from e
        claim.version += 1

    def _versioned_put(self, claim: Claim) -> _Op:
        """The claim written as version `claim.version + 1` if the stored one is `claim.version`."""
        item = claim_item(claim.model_copy(update={"version": claim.version + 1}))
        condition, names, vals = _version_condition(claim.version)
        request = {
            "Put": {
                "TableName": self._table.name,
                "Item": serialize(item),
                "ConditionExpression": condition,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": vals,
            }
        }
        return _Op(request, "claim", claim.name)

    def mark_registered(self, claim_name: str, node_name: str, now: datetime) -> Claim | None:
        """One UpdateItem of the claim; its nominations are not written (their hold follows the claim's
        `registeredAt`, which keeps the first registration's time so a repeat never lengthens it)."""
        try:
            out = self._table.client.update_item(
                TableName=self._table.name,
                Key=claim_key(claim_name),
                UpdateExpression=("SET #s = :s, #n = :n, #r = if_not_exists(#r, :r), #gsk = :gsk, "
                                  "#ver = if_not_exists(#ver, :zero) + :one"),
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeNames={
                    "#s": "status",
                    "#n": "nodeName",
                    "#r": "registeredAt",
                    "#gsk": "gsi1sk",
                    "#ver": "version",
                },
                ExpressionAttributeValues=values(
                    zero=0,
                    one=1,
                    s=ClaimStatus.REGISTERED.value,
                    n=node_name,
                    r=_utc(now).isoformat(),
                    gsk=f"{ClaimStatus.REGISTERED.value}#{claim_name}",
                ),
                ReturnValues="ALL_NEW",
            )
        except ClientError as e:
            if error_code(e) == "ConditionalCheckFailedException":
                return None
            raise
        return claim_from_item(out["Attributes"])

    def release(self, claim: Claim) -> None:
        """Delete the stored claim and give back the usage it holds in one transaction, conditional on
        the version read (so two releases cannot both subtract, and a claim written meanwhile gives back
        what it holds now: the claim is read again), then free the nominations it still holds."""
        for _ in range(SAVE_ATTEMPTS):
            item = self._table.get(claim_key(claim.name))
            if item is None:
                return
            stored = claim_from_item(item)
            condition, names, vals = _version_condition(stored.version)
            delete = {"TableName": self._table.name, "Key": claim_key(stored.name), "ConditionExpression": condition,
                      "ExpressionAttributeNames": names, "ExpressionAttributeValues": vals}
            ops = [_Op({"Delete": delete}, "claim", stored.name)]
            if stored.reserved:
                ops.append(self._usage_release(stored))
            try:
                _transact(self._table, ops, self._sleep)
            except _Cancelled:
                log.info("claim %s changed or was released while being released; reading it again", stored.name)
                continue
            self._release_nominations(stored.name, stored.pods)
            return
        raise ClaimChanged(claim.name)

    def _usage_release(self, claim: Claim) -> _Op:
        names: dict[str, str] = {"#uv": USAGE_VERSION}
        vals: dict[str, Any] = {"zero": 0, "one": 1}
        sets = ["#uv = if_not_exists(#uv, :zero) + :one"]
        for i, (resource, delta) in enumerate(sorted(claim.reserved.items())):
            names[f"#r{i}"] = resource
            vals[f"d{i}"] = delta
            sets.append(f"#r{i} = if_not_exists(#r{i}, :zero) - :d{i}")
        request = {
            "Update": {
                "TableName": self._table.name,
                "Key": usage_key(claim.nodepool),
                "UpdateExpression": "SET " + ", ".join(sets),
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values(**vals),
            }
        }
        return _Op(request, "usage", claim.nodepool)

    def _release_nominations(self, claim_name: str, pods: Iterable[str]) -> None:
        """Delete the nominations of `pods` that `claim_name` still holds."""
        self._for_held_nominations(claim_name, pods, lambda pod: self._unnominate(pod, claim_name))

    def _for_held_nominations(self, claim_name: str, pods: Iterable[str], op: Callable[[str], _Op]) -> None:
        """Apply `op` to the nominations of `pods` that `claim_name` still holds, 100 per transaction. A
        pod whose nomination expired and went to another claim fails its condition; it is dropped and the
        rest of the chunk retried, so another claim's nomination is never touched."""
        pending = list(dict.fromkeys(pods))
        while pending:
            chunk, pending = pending[:MAX_TRANSACTION_ITEMS], pending[MAX_TRANSACTION_ITEMS:]
            while chunk:
                try:
                    _transact(self._table, [op(p) for p in chunk], self._sleep)
                    break
                except _Cancelled as c:
                    failed = {op.subject for op, code, _ in c.failures if code == "ConditionalCheckFailed"}
                    if not failed:
                        raise
                    chunk = [p for p in chunk if p not in failed]

    def _unnominate(self, pod: str, claim_name: str) -> _Op:
        request = {
            "Delete": {
                "TableName": self._table.name,
                "Key": nomination_key(pod),
                "ConditionExpression": "#claim = :claim",
                "ExpressionAttributeNames": {"#claim": "claim"},
                "ExpressionAttributeValues": values(claim=claim_name),
            }
        }
        return _Op(request, "pod", pod)

    # -- reads ----------------------------------------------------------------------------------------
    def get(self, name: str) -> Claim | None:
        item = self._table.get(claim_key(name))
        return claim_from_item(item) if item is not None else None

    def _claims(self) -> list[Claim]:
        return [claim_from_item(i) for i in self._table.query_index(CLAIMS)]

    def find_by_instance(self, instance_id: str) -> Claim | None:
        items = self._table.query(
            IndexName=GSI,
            KeyConditionExpression="gsi1pk = :pk",
            FilterExpression="instanceId = :id",
            ExpressionAttributeValues=values(pk=CLAIMS, id=instance_id),
        )
        return next((claim_from_item(i) for i in items), None)

    def active(self) -> list[Claim]:
        return [c for c in self._claims() if c.status in ACTIVE_STATUSES]

    def nominated(self, now: datetime, pods: Iterable[str] | None = None) -> dict[str, str]:
        """Nominations that hold at `now` (`carpool.state.models.holds_nominations`): unexpired, and their
        claim exists and still holds them (one consistent read of the few claims named, without their
        pod lists). With `pods`, only theirs.

        `pods` are read by key (BatchGetItem, consistent, 100 a call), however many: the provisioner and
        consolidation decide on the answer, so it must include what was written just before. The one
        alternative for a large set, a Query of the `NOMINATIONS` index, was measured at 10,000 pods
        nominated on local AWS: 2 pages against 101 BatchGetItem calls, and no cheaper in the end (about
        2 s of CPU each, loaded machine), because the index pages hold every item of the partition. Its
        cost follows the number of nominations in the table, not the pods asked about: expired
        nominations stay until TTL deletes them, which can take days. Neither a ProjectionExpression on
        the nominations paid off: they are small, and local AWS copies each item to project it."""
        limit = epoch(now)
        if pods is None:
            items: Iterable[dict[str, Any]] = self._table.query_index(NOMINATIONS)
        else:
            items = self._table.batch_get(nomination_key(p) for p in dict.fromkeys(pods))
        live = {}
        for item in items:
            plain = deserialize(item)
            if plain["until"] > limit:
                live[str(plain["pk"]).removeprefix("POD#")] = str(plain["claim"])
        holding = self._holding(set(live.values()), now) if live else set()
        return {pod: claim for pod, claim in live.items() if claim in holding}

    def usage(self, pools: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        items = self._table.query_index(POOLS) if pools is None else self._table.batch_get(usage_key(p) for p in pools)
        for item in items:
            plain = from_dynamo(deserialize(item))
            pool = plain.pop("nodepool")
            out[pool] = {k: int(v) for k, v in plain.items() if k not in _KEY_ATTRS and k not in _USAGE_BOOKS}
        return out

    def reconcile_usage(self) -> dict[str, dict[str, int]]:
        """Make each pool's usage what its claims hold (`ClaimLedger.reconcile_usage`). The claims are
        read from the index, which lags writes by a moment: a pool is only set once its usage has not
        changed since the previous call (a disruption run a minute ago), so every claim it counts was
        written long enough ago to be read, and only if it still has not (conditional on its version).
        A pool that changed meanwhile is looked at again next time. Returns the pools set, with their
        usage now."""
        held: dict[str, dict[str, int]] = {}
        for claim in self._claims():
            held[claim.nodepool] = _summed([held.get(claim.nodepool, {}), claim.reserved])
        out: dict[str, dict[str, int]] = {}
        for item in self._table.query_index(POOLS):
            plain = from_dynamo(deserialize(item))
            pool = str(plain.pop("nodepool"))
            version, seen = int(plain.get(USAGE_VERSION, 0)), plain.get(USAGE_SEEN)
            usage = {k: int(v) for k, v in plain.items() if k not in _KEY_ATTRS and k not in _USAGE_BOOKS}
            target = {r: held.get(pool, {}).get(r, 0) for r in {*usage, *held.get(pool, {})}}
            quiet = seen is not None and int(seen) == version
            if quiet and target != usage and self._set_usage(pool, version, target):
                out[pool] = target
            elif not quiet:
                self._set_usage(pool, version, {})
        return out

    def _set_usage(self, pool: str, version: int, usage: Mapping[str, int]) -> bool:
        """Set the pool's usage (when given: a new version) and note the version seen, if the usage is
        still `version`; False when it changed meanwhile."""
        names = {"#uv": USAGE_VERSION, "#seen": USAGE_SEEN}
        vals: dict[str, Any] = {"v": version, "next": version + 1 if usage else version}
        sets = ["#uv = :next", "#seen = :next"]
        for i, (resource, amount) in enumerate(sorted(usage.items())):
            names[f"#r{i}"] = resource
            vals[f"a{i}"] = amount
            sets.append(f"#r{i} = :a{i}")
        condition = "#uv = :v" if version else "(attribute_not_exists(#uv) OR #uv = :v)"
        try:
            self._table.client.update_item(
                TableName=self._table.name, Key=usage_key(pool), UpdateExpression="SET " + ", ".join(sets),
                ConditionExpression=condition, ExpressionAttributeNames=names, ExpressionAttributeValues=values(**vals))
        except ClientError as e:
            if error_code(e) == "ConditionalCheckFailedException":
                return False
            raise
        return True


class _Nominations:
    """The Puts nominating pods to one claim until one time, as of one `now`. What every pod's Put has in
    common (its claim, expiry, TTL and condition values) is converted to DynamoDB's wire form once, not
    once per pod: a burst's transactions carry 100 nominations each. The Puts are exactly what one
    written pod by pod would be (same attributes in the same order, same condition). The pod's key is
    the item's own (`pk`) and its index sort key; readers take it from `pk`, so it is not stored a third
    time (nominations written with a `pod` attribute read the same)."""

    def __init__(self, table: str, claim_name: str, now: datetime, until: datetime) -> None:
        self._table = table
        self._common = {
            "claim": attribute_value(claim_name),
            "until": attribute_value(epoch(until)),
            TTL_ATTR: attribute_value(ttl_epoch(until + NOMINATION_TTL_GRACE)),
        }
        self._now = epoch(now)
        self._conditions: dict[frozenset[str], tuple[str, dict[str, str], dict[str, Any]]] = {}

    def _condition(self, replacing: Collection[str]) -> tuple[str, dict[str, str], dict[str, Any]]:
        key = frozenset(replacing)
        found = self._conditions.get(key)
        if found is None:
            names = {"#until": "until"}
            replaced = {f"r{i}": name for i, name in enumerate(sorted(key))}
            taken_over = ""
            if replaced:
                names["#claim"] = "claim"
                taken_over = f" OR #claim IN ({', '.join(':' + k for k in replaced)})"
            # free, or the previous nomination has expired (the same rule as MemoryLedger: until <= now),
            # or it is held by a claim being replaced
            found = ("attribute_not_exists(pk) OR #until <= :now" + taken_over, names,
                     values(now=self._now, **replaced))
            self._conditions[key] = found
        return found

    def op(self, pod: str, replacing: Collection[str] = ()) -> _Op:
        condition, names, expression_values = self._condition(replacing)
        # every Put its own containers (none shared with another request), as `serialize` makes them
        item = {"pk": attribute_value(f"POD#{pod}"), "sk": {"S": "NOMINATION"}, "gsi1pk": {"S": NOMINATIONS},
                "gsi1sk": attribute_value(pod)}
        item.update((name, dict(value)) for name, value in self._common.items())
        request = {
            "Put": {
                "TableName": self._table,
                "Item": item,
                "ConditionExpression": condition,
                "ExpressionAttributeNames": dict(names),
                "ExpressionAttributeValues": {k: dict(v) for k, v in expression_values.items()},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
        return _Op(request, "pod", pod)


def _version_condition(version: int) -> tuple[str, dict[str, str], dict[str, Any]]:
    """The stored claim exists at `version` (0 also matches a claim written before versions existed)."""
    condition = "attribute_exists(pk) AND #ver = :ver"
    if version == 0:
        condition = "attribute_exists(pk) AND (attribute_not_exists(#ver) OR #ver = :ver)"
    return condition, {"#ver": "version"}, values(ver=version)


def _takeover(replacing: Collection[str], lapsed: str | None) -> Collection[str]:
    """The claims a nomination may be taken from: those being replaced, and its holder if it lapsed."""
    return replacing if lapsed is None else {*replacing, lapsed}


def _transaction_chunks(claims: list[Claim]) -> Iterator[list[Claim]]:
    """Claims in order, as many per transaction as fit beside its one usage update."""
    chunk: list[Claim] = []
    size = 1
    for claim in claims:
        items = 1 + len(set(claim.pods))
        if chunk and size + items > MAX_TRANSACTION_ITEMS:
            yield chunk
            chunk, size = [], 1
        chunk.append(claim)
        size += items
    if chunk:
        yield chunk


def _summed(parts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in parts:
        for k, v in part.items():
            out[k] = out.get(k, 0) + v
    return out


def _exceeds(chunk: list[Claim], limits: Mapping[str, int] | None) -> bool:
    """Whether the claims together pass a limit on their own (the usage condition cannot see that for a
    pool's first reservation, so they go one by one)."""
    total = _summed(c.reserved for c in chunk)
    return limits is not None and any(r in limits and v > limits[r] for r, v in total.items())


def _refused_claims(cancelled: _Cancelled, chunk: list[Claim]) -> dict[str, _Cancelled] | None:
    """The claims a cancelled transaction refused, each with its own failures; None when the cause is
    not any claim's alone (the usage update, a conflict, no reasons given)."""
    if cancelled.conflict_only or any(op.what == "usage" for op, _, _ in cancelled.failures):
        return None
    owner = {p: c.name for c in chunk for p in c.pods}
    owner.update({c.name: c.name for c in chunk})
    out: dict[str, list[tuple[_Op, str, dict[str, Any] | None]]] = {}
    for failure in cancelled.failures:
        name = owner.get(failure[0].subject)
        if name is None:
            return None
        out.setdefault(name, []).append(failure)
    return {name: _Cancelled(failures) for name, failures in out.items()}


def _refuse_impossible(claim: Claim, limits: Mapping[str, int] | None) -> None:
    """A claim larger than a limit on its own can never fit; say so without a transaction."""
    for resource, delta in sorted(claim.reserved.items()):
        if limits is not None and resource in limits and delta > limits[resource]:
            raise ReservationRefused(f"limit {resource} exhausted for nodepool {claim.nodepool}", Refusal.LIMIT)


def _refusal_reason(cancelled: _Cancelled, claim: Claim, limits: Mapping[str, int] | None) -> tuple[str, Refusal]:
    """The first cause, in MemoryLedger's order (claim, pods, limits), worded like MemoryLedger, and its kind."""
    order = {"claim": 0, "pod": 1, "usage": 2}
    op, code, old = min(cancelled.failures, key=lambda f: order[f[0].what])
    if code == "TransactionConflict":
        return f"concurrent update of {op.what} {op.subject}, try again", Refusal.CONFLICT
    if op.what == "claim":
        return f"claim {claim.name} already exists", Refusal.CLAIM_EXISTS
    if op.what == "pod":
        holder = from_dynamo(deserialize(old)).get("claim") if old else None
        return f"pod {op.subject} already nominated to {holder or 'another claim'}", Refusal.POD_NOMINATED
    return f"limit {_exhausted(claim, limits, old)} exhausted for nodepool {claim.nodepool}", Refusal.LIMIT


def _nominate_refusal(cancelled: _Cancelled, claim_name: str) -> tuple[str, Refusal]:
    """Why `nominate` was refused, worded like MemoryLedger (the claim first, then the first pod), and its kind."""
    op, code, old = min(cancelled.failures, key=lambda f: f[0].what != "claim")
    if code == "TransactionConflict":
        return f"concurrent update of {op.what} {op.subject}, try again", Refusal.CONFLICT
    if op.what == "claim":
        return f"claim {claim_name} is not in flight", Refusal.NOT_IN_FLIGHT
    holder = from_dynamo(deserialize(old)).get("claim") if old else None
    return f"pod {op.subject} already nominated to {holder or 'another claim'}", Refusal.POD_NOMINATED


def _exhausted(claim: Claim, limits: Mapping[str, int] | None, old: Mapping[str, Any] | None) -> str:
    if not limits:
        return "?"
    usage = from_dynamo(deserialize(old)) if old else {}
    limited = [r for r in sorted(claim.reserved) if r in limits]
    for resource in limited:
        if int(usage.get(resource, 0)) + claim.reserved[resource] > limits[resource]:
            return resource
    return limited[0] if limited else "?"


class DynamoOfferings:
    """`carpool.state.ports.OfferingAvailability`: items `ICE` / `<type>#<zone>#<capacity type>`."""

    def __init__(
        self,
        table_name: str | None = None,
        client: Any | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._table = StateTable(table_name, client)
        self._sleep = sleep

    def mark_unavailable(self, offerings: Iterable[UnavailableOffering]) -> None:
        latest = {o.key: o for o in offerings}  # one write per key (BatchWriteItem refuses duplicates)
        self._table.batch_put((self._item(o) for o in latest.values()), self._sleep)

    @staticmethod
    def _item(o: UnavailableOffering) -> dict[str, Any]:
        return {
            "pk": ICE,
            "sk": "#".join(o.key),
            "instanceType": o.instance_type,
            "zone": o.zone,
            "capacityType": o.capacity_type,
            "until": epoch(o.until),
            "reason": o.reason,
            TTL_ATTR: ttl_epoch(o.until),
        }

    def unavailable(self, now: datetime) -> set[tuple[str, str, str]]:
        return {o.key for o in self.marked(now)}

    def marked(self, now: datetime) -> list[UnavailableOffering]:
        """The offerings still marked at `now`, with until when and why (what `carpool status` lists)."""
        limit = epoch(now)
        out = []
        for item in self._table.query_partition(ICE):
            plain = deserialize(item)
            if plain["until"] > limit:
                out.append(UnavailableOffering(instance_type=str(plain["instanceType"]), zone=str(plain["zone"]),
                                               capacity_type=str(plain["capacityType"]),
                                               until=from_epoch(plain["until"]), reason=str(plain.get("reason", ""))))
        return out


class CapacityUpdateConflict(RuntimeError):
    """`observe` lost the optimistic-locking race `attempts` times in a row."""


class DynamoCapacityCache:
    """`carpool.state.ports.CapacityCache`: items `CAP` / `<type>#<image id>` with a `version`."""

    def __init__(
        self,
        table_name: str | None = None,
        client: Any | None = None,
        sleep: Callable[[float], None] = time.sleep,
        attempts: int = OBSERVE_ATTEMPTS,
    ) -> None:
        self._table = StateTable(table_name, client)
        self._sleep = sleep
        self._attempts = attempts

    def all(self, now: datetime) -> dict[tuple[str, str], CapacityRecord]:
        out = {}
        for item in self._table.query_partition(CAP):
            record, _ = record_from_item(item)
            if not capacity_rules.is_expired(record, now):
                out[record.key] = record
        return out

    def observe(self, record: CapacityRecord, now: datetime) -> CapacityRecord:
        """Read, merge (`carpool.capacity.merge`), write back only if nobody wrote in between."""
        key = serialize({"pk": CAP, "sk": f"{record.instance_type}#{record.image_id}"})
        for attempt in range(self._attempts):
            item = self._table.get(key)
            existing, version = record_from_item(item) if item is not None else (None, 0)
            if existing is not None and capacity_rules.is_expired(existing, now):
                existing = None  # an expired value is no evidence, but its version still guards the write
            merged = capacity_rules.merge(existing, record)
            if self._put_if_version(merged, version, item is not None):
                return merged
            self._sleep(random.random() * min(1.0, 0.02 * 2**attempt))
        raise CapacityUpdateConflict(f"capacity of {record.key} changed {self._attempts} times while merging")

    def _put_if_version(self, record: CapacityRecord, version: int, existed: bool) -> bool:
        condition: dict[str, Any] = (
            {
                "ConditionExpression": "#v = :v",
                "ExpressionAttributeNames": {"#v": "version"},
                "ExpressionAttributeValues": values(v=version),
            }
            if existed
            else {"ConditionExpression": "attribute_not_exists(pk)"}
        )
        try:
            self._table.client.put_item(
                TableName=self._table.name, Item=serialize(record_item(record, version + 1)), **condition
            )
            return True
        except ClientError as e:
            if error_code(e) == "ConditionalCheckFailedException":
                return False
            raise
