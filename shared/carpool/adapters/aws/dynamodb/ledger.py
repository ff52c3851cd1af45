"""The claim ledger on the state table: `DynamoLedger`, implementing `carpool.state.ports.ClaimLedger`.

It writes three kinds of item, each shaped by its own module (`claims`, `nominations`, `pool_usage`), and
writes them together so that the ledger's guarantees hold across concurrent Lambdas:

- `DynamoLedger.reserve` is one TransactWriteItems: the claim Put (`attribute_not_exists`), one Put per pod
  nomination (free, or the previous nomination expired), and the pool-usage Update whose condition keeps
  every limited resource within its limit. Two provisioners racing on the same pods or the same limit
  cannot both succeed; the loser gets `ReservationRefused` naming the pod or the resource (`refusals`).
- Whether a nomination holds also depends on its claim (gone, or registered past
  `NOMINATION_HOLD_AFTER_REGISTRATION`: `carpool.state.models.holds_nominations`), which a nomination's
  condition cannot read. So registering a claim is one UpdateItem of the claim, not a write per pod;
  readers check the claims named (`nominated`); and a reservation cancelled on nominations of such claims
  is sent once more taking those over by name (`#claim IN (...)`), which keeps DynamoDB the judge of
  races for them (`DynamoLedger._transact_nominating`).
- A claim is saved whole only at the version read (`save`), so two functions saving one claim cannot
  overwrite each other; the loser reads it again.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from carpool.adapters.aws.dynamodb.claims import (
    CLAIM_HOLD,
    CLAIMS,
    claim_from_item,
    claim_key,
    grow_claim,
    new_claim_put,
    versioned_delete,
    versioned_put,
)
from carpool.adapters.aws.dynamodb.codec import deserialize, epoch, utc, values
from carpool.adapters.aws.dynamodb.nominations import (
    NOMINATIONS,
    Nominations,
    nomination_key,
    takeover,
    unnominate,
)
from carpool.adapters.aws.dynamodb.pool_usage import (
    PoolUsage,
    adjust_usage,
    release_usage,
    reserve_usage,
    summed,
)
from carpool.adapters.aws.dynamodb.refusals import (
    exceeds,
    nominate_refusal,
    refusal_reason,
    refuse_impossible,
    refused_claims,
)
from carpool.adapters.aws.dynamodb.table import (
    BATCH_WRITE_ITEMS,
    GSI,
    MAX_TRANSACTION_ITEMS,
    StateTable,
    TransactionCancelled,
    TransactionOp,
    error_code,
    transact,
)
from carpool.state.charges import difference
from carpool.state.models import ACTIVE_STATUSES, Claim, ClaimStatus, holds_nominations
from carpool.state.ports import ReservationRefused
from carpool.state.saving import ClaimChanged, ClaimGone, with_launch

log = logging.getLogger(__name__)

#: how often a claim write that lost its condition to another writer reads the claim again
SAVE_ATTEMPTS = 5
#: `reserve` puts the claim and the usage update in its first transaction, so it has room for 98 pods.
FIRST_CHUNK_PODS = MAX_TRANSACTION_ITEMS - 2


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
        self._pools = PoolUsage(self._table)
        self._sleep = sleep

    # -- reserve --------------------------------------------------------------------------------------
    def reserve(
        self, claim: Claim, limits: Mapping[str, int] | None, now: datetime, ttl_seconds: int,
        replacing: Collection[str] = (),
    ) -> None:
        """Sets `claim.nominated_until` on the caller's claim, which the claim item carries: the caller
        stores that object whole later (`mark_launched`), which must not drop it."""
        refuse_impossible(claim, limits)
        pods = list(dict.fromkeys(claim.pods))
        until = now + timedelta(seconds=ttl_seconds)
        claim.nominated_until = until
        first, rest = pods[:FIRST_CHUNK_PODS], pods[FIRST_CHUNK_PODS:]
        head = [new_claim_put(self._table.name, claim), reserve_usage(self._table.name, claim, limits)]
        try:
            self._transact_nominating(head, first, claim.name, now, until, replacing)
        except TransactionCancelled as c:
            raise ReservationRefused(*refusal_reason(c, claim, limits)) from c
        for start in range(0, len(rest), MAX_TRANSACTION_ITEMS):
            chunk = rest[start : start + MAX_TRANSACTION_ITEMS]
            try:
                self._transact_nominating([], chunk, claim.name, now, until, replacing)
            except TransactionCancelled as c:
                self.release(claim)
                raise ReservationRefused(*refusal_reason(c, claim, limits)) from c
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
        while len(chunk) > 1 and not exceeds(chunk, limits):
            total = chunk[0].model_copy(update={"reserved": summed(c.reserved for c in chunk)})
            ops = [reserve_usage(self._table.name, total, limits)]
            for claim in chunk:
                ops.append(new_claim_put(self._table.name, claim))
                nominations = Nominations(self._table.name, claim.name, now, until)
                ops += [nominations.op(p, takeover(replacing, (lapsed or {}).get(p))) for p in dict.fromkeys(claim.pods)]
            try:
                transact(self._table, ops, self._sleep)
                return
            except TransactionCancelled as c:
                if lapsed is None:
                    lapsed = self._lapsed(c, now)
                    c = c.without_pods(lapsed)
                    if not c.failures:
                        continue
                refused = refused_claims(c, chunk)
                if refused is None:
                    break
            except Exception:
                log.warning("reserving %d claims together failed; reserving them one by one", len(chunk))
                break
            for claim in chunk:
                if claim.name in refused:
                    failed[claim.name] = ReservationRefused(*refusal_reason(refused[claim.name], claim, limits))
            chunk = [c for c in chunk if c.name not in refused]
        for claim in chunk:
            self._reserve_alone(claim, limits, now, ttl_seconds, replacing, failed)

    def nominate(self, claim_name: str, pods: list[str], requests: Mapping[str, int], now: datetime,
                 ttl_seconds: int, replacing: Collection[str] = ()) -> None:
        """One transaction per chunk: the pods' nominations (each conditional on being free, or held by a
        claim in `replacing`) and the claim's `pods`/`requested` grown in place (conditional on the claim
        still being in flight). A refused chunk leaves earlier chunks in place: those pods are on the
        claim, which is consistent."""
        until = now + timedelta(seconds=ttl_seconds)
        unique = list(dict.fromkeys(pods))
        for start in range(0, len(unique), MAX_TRANSACTION_ITEMS - 1):
            chunk = unique[start : start + MAX_TRANSACTION_ITEMS - 1]
            grow = grow_claim(self._table.name, claim_name, chunk, requests if start == 0 else {})
            try:
                self._transact_nominating([grow], chunk, claim_name, now, until, replacing)
            except TransactionCancelled as c:
                raise ReservationRefused(*nominate_refusal(c, claim_name)) from c

    def _transact_nominating(self, head: list[TransactionOp], pods: list[str], claim_name: str, now: datetime,
                             until: datetime, replacing: Collection[str] = ()) -> None:
        """`head` and the nominations of `pods` to `claim_name` in one transaction.

        A nomination's condition can only compare the nomination itself (free, expired, or held by a claim
        in `replacing`); whether its claim still holds it (`carpool.state.models.holds_nominations`) is
        on the claim. So a transaction cancelled on nominations held by other claims reads those claims
        (the cancellation returns each nomination as it was), and when every other cause is gone with the
        lapsed ones (claims deleted, or registered past their hold) it is sent once more, taking those
        nominations over with the same `#claim IN (...)` condition as `replacing`. A concurrent
        provisioner that took such a pod meanwhile rewrote its `claim`, so the retry's condition fails and
        DynamoDB still decides the race. Raises `TransactionCancelled`."""
        lapsed: dict[str, str] = {}
        nominations = Nominations(self._table.name, claim_name, now, until)
        for lookup in (True, False):
            ops = head + [nominations.op(p, takeover(replacing, lapsed.get(p))) for p in pods]
            try:
                transact(self._table, ops, self._sleep)
                return
            except TransactionCancelled as c:
                found = self._lapsed(c, now) if lookup else {}
                rest = c.without_pods(found)
                if not found or (rest.failures and not rest.conflict_only):
                    raise
                lapsed = found

    def _lapsed(self, cancelled: TransactionCancelled, now: datetime) -> dict[str, str]:
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
            if holds_nominations(str(plain.get("status", "")), since, utc(now)):
                out.add(str(plain["pk"]).removeprefix("CLAIM#"))
        return out

    # -- lifecycle ------------------------------------------------------------------------------------
    def mark_launched(self, claim: Claim, charge: Mapping[str, int] | None = None) -> None:
        """The launch facts onto the claim as stored now (`saving.with_launch`), written only while it
        exists and records no other instance (a read, then a write conditional on the version read; a
        lost race reads again). With `charge`, a claim in flight holds it from now on and its pool's
        usage changes by the difference in the same transaction (`_write_charged`). Already registered
        with this instance (the registrar repaired it first): nothing to write. Never brings back a
        released claim."""
        for _ in range(SAVE_ATTEMPTS):
            item = self._table.get(claim_key(claim.name))
            if item is None:
                raise ClaimGone(claim.name)
            stored = claim_from_item(item)
            fresh = with_launch(stored, claim, charge)
            if fresh is None:
                return
            try:
                self._write_charged([(fresh, stored.reserved)])
            except ClaimChanged:
                continue
            claim.version, claim.reserved = fresh.version, dict(fresh.reserved)
            return
        raise ClaimChanged(claim.name)

    def mark_launched_many(self, claims: Sequence[Claim],
                           charges: Mapping[str, Mapping[str, int]] | None = None) -> dict[str, Exception]:
        """Claims just reserved by this caller, their launches recorded: one transaction per 25 claims,
        each Put conditional on the claim still being the version reserved (nobody else wrote it, so the
        claim is the stored one plus its launch, and what it holds is what it was reserved with), beside
        one usage update per pool for the change of its claims' charges. A transaction refused or failed
        is done again claim by claim (`mark_launched`, which reads what is stored), so only a claim whose
        own write fails fails."""
        failed: dict[str, Exception] = {}
        given = charges or {}
        for start in range(0, len(claims), BATCH_WRITE_ITEMS):
            chunk = claims[start : start + BATCH_WRITE_ITEMS]
            if self._saved_together(chunk, given):
                continue
            for claim in chunk:
                try:
                    self.mark_launched(claim, given.get(claim.name))
                except Exception as exc:  # noqa: BLE001 - reported as this claim's failure
                    failed[claim.name] = exc
        return failed

    def _saved_together(self, chunk: Sequence[Claim], charges: Mapping[str, Mapping[str, int]]) -> bool:
        """The claims of `chunk` written at their version, each charged its `charges` entry (one
        PutItem, or one transaction); False when it was refused or failed."""
        pairs = [(c.model_copy(update={"reserved": dict(charges.get(c.name, c.reserved))}), c.reserved) for c in chunk]
        try:
            self._write_charged(pairs)
        except Exception:  # noqa: BLE001 - the caller writes them one by one
            log.info("recording %d launches together failed; recording them one by one", len(chunk))
            return False
        for claim, (fresh, _) in zip(chunk, pairs, strict=True):
            claim.version, claim.reserved = fresh.version, fresh.reserved
        return True

    def _write_charged(self, pairs: Sequence[tuple[Claim, Mapping[str, int]]]) -> None:
        """Each claim written whole at its version (`save`), given with what the stored version holds; the
        pools' usage changed by the difference to what the claims hold now, in the same transaction (one
        update per pool), so a charge replaced is counted once. Bumps each claim's version. Raises
        ClaimGone or ClaimChanged for a single claim; a transaction of several raises what it raised."""
        deltas: dict[str, dict[str, int]] = {}
        for fresh, held in pairs:
            change = difference(fresh.reserved, held)
            if change:
                deltas[fresh.nodepool] = summed([deltas.get(fresh.nodepool, {}), change])
        if len(pairs) == 1 and not any(deltas.values()):
            self.save(pairs[0][0])
            return
        ops = [versioned_put(self._table.name, fresh) for fresh, _ in pairs]
        ops += [adjust_usage(self._table.name, pool, delta) for pool, delta in sorted(deltas.items()) if delta]
        try:
            transact(self._table, ops, self._sleep)
        except TransactionCancelled as c:
            if len(pairs) == 1:
                raise self._conflict(pairs[0][0].name) from c
            raise
        for fresh, _ in pairs:
            fresh.version += 1

    def _conflict(self, name: str) -> ClaimGone | ClaimChanged:
        """Why a write conditional on a claim's version failed: the claim is gone, or it changed."""
        return ClaimGone(name) if self._table.get(claim_key(name)) is None else ClaimChanged(name)

    def recharge(self, claim: Claim, reserved: Mapping[str, int]) -> None:
        """The claim's `reserved` made `reserved` and its pool's usage changed by the difference in one
        transaction, conditional on the claim's version (see `ClaimLedger.recharge`)."""
        fresh = claim.model_copy(update={"reserved": dict(reserved)})
        self._write_charged([(fresh, claim.reserved)])
        claim.reserved, claim.version = fresh.reserved, fresh.version

    def save(self, claim: Claim) -> None:
        """The whole claim, conditional on the stored one existing at `claim.version` (bumped on success,
        on `claim` too). Raises ClaimGone or ClaimChanged (see `carpool.state.saving`)."""
        op = versioned_put(self._table.name, claim)
        try:
            self._table.client.put_item(**op.request["Put"])
        except ClientError as e:
            if error_code(e) != "ConditionalCheckFailedException":
                raise
            if self._table.get(claim_key(claim.name)) is None:
                raise ClaimGone(claim.name) from e
            raise ClaimChanged(claim.name) from e
        claim.version += 1

    def mark_registered(self, claim_name: str, node_name: str, now: datetime,
                        charge: Mapping[str, int] | None = None) -> Claim | None:
        """One UpdateItem of the claim; its nominations are not written (their hold follows the claim's
        `registeredAt`, which keeps the first registration's time so a repeat never lengthens it). With
        `charge`, the claim is read and written at its version with its pool's usage changed by the
        difference, in one transaction (`_register_charged`)."""
        if charge is not None:
            return self._register_charged(claim_name, node_name, now, charge)
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
                    r=utc(now).isoformat(),
                    gsk=f"{ClaimStatus.REGISTERED.value}#{claim_name}",
                ),
                ReturnValues="ALL_NEW",
            )
        except ClientError as e:
            if error_code(e) == "ConditionalCheckFailedException":
                return None
            raise
        return claim_from_item(out["Attributes"])

    def _register_charged(self, claim_name: str, node_name: str, now: datetime,
                          charge: Mapping[str, int]) -> Claim | None:
        """`mark_registered` that also makes `charge` what the claim holds: read, then written at the
        version read beside its pool's usage update (`_write_charged`); a lost race reads again."""
        for _ in range(SAVE_ATTEMPTS):
            stored = self.get(claim_name)
            if stored is None:
                return None
            fresh = stored.model_copy(update={"status": ClaimStatus.REGISTERED, "node_name": node_name,
                                              "registered_at": stored.registered_at or utc(now),
                                              "reserved": dict(charge)}, deep=True)
            try:
                self._write_charged([(fresh, stored.reserved)])
            except ClaimGone:
                return None
            except ClaimChanged:
                continue
            return fresh
        raise ClaimChanged(claim_name)

    def release(self, claim: Claim) -> None:
        """Delete the stored claim and give back the usage it holds in one transaction, conditional on
        the version read (so two releases cannot both subtract, and a claim written meanwhile gives back
        what it holds now: the claim is read again), then free the nominations it still holds."""
        for _ in range(SAVE_ATTEMPTS):
            item = self._table.get(claim_key(claim.name))
            if item is None:
                return
            stored = claim_from_item(item)
            ops = [versioned_delete(self._table.name, stored)]
            if stored.reserved:
                ops.append(release_usage(self._table.name, stored))
            try:
                transact(self._table, ops, self._sleep)
            except TransactionCancelled:
                log.info("claim %s changed or was released while being released; reading it again", stored.name)
                continue
            self._release_nominations(stored.name, stored.pods)
            return
        raise ClaimChanged(claim.name)

    def _release_nominations(self, claim_name: str, pods: Iterable[str]) -> None:
        """Delete the nominations of `pods` that `claim_name` still holds."""
        self._for_held_nominations(claim_name, pods, lambda pod: unnominate(self._table.name, pod, claim_name))

    def _for_held_nominations(self, claim_name: str, pods: Iterable[str], op: Callable[[str], TransactionOp]) -> None:
        """Apply `op` to the nominations of `pods` that `claim_name` still holds, 100 per transaction. A
        pod whose nomination expired and went to another claim fails its condition; it is dropped and the
        rest of the chunk retried, so another claim's nomination is never touched."""
        pending = list(dict.fromkeys(pods))
        while pending:
            chunk, pending = pending[:MAX_TRANSACTION_ITEMS], pending[MAX_TRANSACTION_ITEMS:]
            while chunk:
                try:
                    transact(self._table, [op(p) for p in chunk], self._sleep)
                    break
                except TransactionCancelled as c:
                    failed = {op.subject for op, code, _ in c.failures if code == "ConditionalCheckFailed"}
                    if not failed:
                        raise
                    chunk = [p for p in chunk if p not in failed]

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
        return self._pools.read(pools)

    def reconcile_usage(self) -> dict[str, dict[str, int]]:
        """Make each pool's usage what its claims hold (`ClaimLedger.reconcile_usage`), once it has stayed
        unchanged since the previous call (`PoolUsage.reconcile`)."""
        return self._pools.reconcile(self._claims())


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
