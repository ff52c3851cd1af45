"""Local AWS for integration tests and the simulation: moto's server on 127.0.0.1, set up like the stack.

`LocalAws` starts `ThreadedMotoServer` on a free port of 127.0.0.1 (never 0.0.0.0: nothing outside the
machine may reach it), points `AWS_ENDPOINT_URL` and fake credentials at it, and creates what the CDK
stack creates (state and idempotency tables, the event bus, rules, queues and dead-letter queues) with the
same names, so the production adapters and handlers run unchanged against it. The variables it sets
(endpoint, credentials, region, table, bus and parameter names) are kept in `env`, the environment the
stack would give carpool's functions, and also exported to `os.environ` unless `export=False` (a
simulation installs `env` per function through `carpool.environment` instead, so several can run in one
process). `stop()` (or leaving the `with` block) shuts the server down and restores every variable it
exported.

Each LocalAws is an AWS account of its own: its server names the account on every request it serves
(moto's `x-moto-account-id` request header, which moto's responses read before the access key), so two
local AWS in one process never share EC2, SQS, DynamoDB or any other state in moto's process-wide
backends; seeding through the backends uses the same account, and `stop()` drops the account's state.
Unless asked for one, a LocalAws takes the first account no running LocalAws holds, starting with moto's
default `123456789012`.

What moto does not do like AWS is done here:
- Writes under `/aws/service/...` are refused by SSM's API, so AMI alias parameters are written through
  moto's backend (the server runs in this process, so it shares the backends).
- moto's DynamoDB is not safe under concurrent requests (a transaction snapshots and restores whole
  tables), while real DynamoDB serializes conflicting writes. DynamoDB requests are therefore served one
  at a time; other services (SQS long polls) stay concurrent. That also allows undoing a failed transaction from a
  journal of the items it names instead of copying whole tables (`_JournaledTransactions`), which keeps
  100-item transactions fast on large tables.
- EC2 answers spot prices from a documented model (`carpool.sim.localaws.spot_prices`) instead of moto's 0.00001
  for everything, and CreateFleet launches the override its allocation strategy picks (the cheapest)
  instead of the first one, tagging instances with their launch template as EC2 does.
- DescribeInstanceTypes, DescribeInstanceTypeOfferings and DescribeSpotPriceHistory page with `NextToken`
  within EC2's `MaxResults` bounds instead of answering everything at once (`carpool.sim.localaws.ec2_pages`).
- Connections stay open between requests, as AWS endpoints keep them for botocore's connection pool;
  Werkzeug's development server closes each one (`carpool.sim.localaws.persistent_http`).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import make_server

from carpool.sim.localaws import ec2_pages, moto_linear, moto_serialize, persistent_http
from carpool.sim.localaws.ec2_pages import PagedInstanceTypes
from carpool.sim.localaws.moto_patches import Internal, MotoPatch, Replaced
from carpool.sim.localaws.shared_models import LocalSession, SharedLoadersWhileImporting, SharedRegionsSession

FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}
#: The owner of the EKS-optimized AMIs in most regions; seeded images default to it (alias "amazon").
EKS_AMI_OWNER = "602401143452"
#: Redrive after this many receives, as the stack does.
MAX_RECEIVE_COUNT = 3
#: The attribute Powertools' idempotency utility expires records by.
IDEMPOTENCY_TTL_ATTR = "expiration"

# Event routing, mirroring infra/events.py (detail-types from `carpool.api.events`).
CLUSTER_SOURCE = "carpool.cluster"
POD_UNSCHEDULABLE = "Pod Unschedulable"
NODE_EVENTS = ("Node Registered", "Node Deleted")
SPOT_EVENTS = ("EC2 Spot Instance Interruption Warning", "EC2 Instance Rebalance Recommendation")
INSTANCE_STATE_CHANGE = "EC2 Instance State-change Notification"
LEAVING_STATES = ("stopping", "stopped", "shutting-down", "terminated")
HEALTH_EVENT = "AWS Health Event"
QUEUE_ROLES = ("provisioner", "registrar", "interruption")


class _AccountAndClock:
    """WSGI middleware: every request is served in this server's account, on its clock (see `_SqsClock`)."""

    def __init__(self, app: Callable[..., Any], account: str, clock: Callable[[], Callable[[], float] | None]) -> None:
        self._app = app
        self._account = account
        self._clock = clock

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        environ["HTTP_X_MOTO_ACCOUNT_ID"] = self._account
        before = getattr(_request, "clock", None)
        _request.clock = self._clock()
        try:
            # Materialise the body while the clock is set: the work happens while it is produced.
            return list(self._app(environ, start_response))
        finally:
            _request.clock = before


#: The request being served on this thread: `clock` is its server's clock (None: real time).
_request = threading.local()


class _Accounts:
    """The accounts of running LocalAws in this process (each runs in one of its own)."""

    FIRST = 123456789012  # moto's default account, which tests and ARNs commonly assume
    _lock = threading.Lock()
    _held: set[str] = set()

    @classmethod
    def take(cls, wanted: str | None) -> str:
        with cls._lock:
            account = wanted
            candidate = cls.FIRST
            while account is None:
                if str(candidate) not in cls._held:
                    account = str(candidate)
                candidate += 1
            cls._held.add(account)
            return account

    @classmethod
    def release(cls, account: str) -> None:
        """Drop the account's state from every moto backend, and let another LocalAws take it."""
        from moto.core.base_backend import BackendDict, backend_lock

        with backend_lock:
            for backends in list(BackendDict._instances):  # type: ignore[misc]  # moto's own registry
                backends.pop(account, None)
        with cls._lock:
            cls._held.discard(account)


class _SerializedDynamoDb:
    """WSGI middleware: one DynamoDB request at a time (see the module docstring); the rest concurrent."""

    def __init__(self, app: Callable[..., Any]) -> None:
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if str(environ.get("HTTP_X_AMZ_TARGET", "")).startswith("DynamoDB_"):
            with self._lock:
                # Materialise the body inside the lock: the work happens while it is produced.
                return list(self._app(environ, start_response))
        return self._app(environ, start_response)


class _JournaledTransactions(MotoPatch):
    """Makes moto's TransactWriteItems undo a failed transaction from a journal of the items it names
    instead of deep-copying every table it names once per action.

    moto copies the whole table for every action of a transaction (to roll back on failure): a
    100-action nomination against a table of 10,000 nominations copied a million items. While the patch
    is installed, tables are not copied inside moto's DynamoDB backend; before the transaction runs, the
    items it names are copied, and if it fails they are put back exactly (absent ones removed). Answers
    and stored items are unchanged. It is only safe because LocalAws serves DynamoDB requests one at a
    time (each LocalAws its own account's tables, so servers running at once never touch the same table).
    """

    replaces = (Internal("moto.dynamodb.models", "copy", "47ee7b6043b7c1e1"),
                Internal("moto.dynamodb.models", "DynamoDBBackend.transact_write_items", "81db2cb7d94e39c9"))

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.dynamodb import models
        from moto.dynamodb.models.table import Table

        original = models.DynamoDBBackend.transact_write_items

        def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
            journal = _journal(self, transact_items)
            try:
                original(self, transact_items)
            except Exception:
                _undo(journal)
                raise

        models.copy = _TablesKeptInPlace(Table)  # type: ignore[assignment]
        models.DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
        return [(models, "copy", copy), (models.DynamoDBBackend, "transact_write_items", original)]


class _NoDefaultAmis(MotoPatch):
    """Only seeded images exist (deterministic lookups): moto's EC2 backends skip loading its default AMIs.

    moto reads `MOTO_EC2_LOAD_DEFAULT_AMIS` from the process environment when it creates an account's
    EC2 backend; answering its setting here keeps that choice out of the environment other code shares.
    """

    replaces = (Internal("moto.settings", "ec2_load_default_amis", "026952cb3ca161d2"),)

    @classmethod
    def _apply(cls) -> Replaced:
        from moto import settings

        original = settings.__dict__["ec2_load_default_amis"]
        settings.ec2_load_default_amis = lambda: False  # type: ignore[attr-defined]
        return [(settings, "ec2_load_default_amis", original)]


class _SqsClock(MotoPatch):
    """moto's SQS reads the time through `unix_time`/`unix_time_millis` of its models module: answered
    from the clock of the server serving the request (`LocalAws.clock`, a simulation's clock: a message's
    `DelaySeconds`, visibility timeout and retention count simulated seconds, as they count real ones in
    AWS), else real time. The clock is chosen per request, so servers on different clocks share the patch."""

    replaces = (Internal("moto.sqs.models", "unix_time", "f0576ec9e5f586e5"), Internal("moto.sqs.models", "unix_time_millis", "7a37e1337d02962e"))

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.sqs import models

        seconds, millis = models.__dict__["unix_time"], models.__dict__["unix_time_millis"]

        def unix_time(dt: datetime | None = None) -> float:
            clock = getattr(_request, "clock", None)
            return float(seconds(dt)) if dt is not None or clock is None else float(clock())

        def unix_time_millis(dt: datetime | None = None) -> float:
            clock = getattr(_request, "clock", None)
            return float(millis(dt)) if dt is not None or clock is None else float(clock()) * 1000.0

        models.unix_time = unix_time  # type: ignore[attr-defined]
        models.unix_time_millis = unix_time_millis  # type: ignore[attr-defined]
        return [(models, "unix_time", seconds), (models, "unix_time_millis", millis)]


class _PagedLaunchTemplates(MotoPatch):
    """Makes moto's DescribeLaunchTemplates page with NextToken, as EC2 does.

    moto answers at most `MaxResults` (15 by default) templates and never a NextToken, so a listing of
    more templates silently loses the newest ones (and launch-template GC would never see them).
    """

    replaces = (Internal("moto.ec2.responses.launch_templates", "LaunchTemplates.describe_launch_templates", "4ecadb74dc239210"),)

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.core.responses import ActionResult
        from moto.ec2.responses.launch_templates import LaunchTemplates

        original = LaunchTemplates.__dict__["describe_launch_templates"]

        def describe_launch_templates(self: Any) -> Any:
            size = self._get_int_param("MaxResults", 15)
            start = int(self._get_param("NextToken") or 0)
            names, ids = self._get_param("LaunchTemplateNames", []), self._get_param("LaunchTemplateIds", [])
            filters = self._filters_from_querystring()
            self.error_on_dryrun()
            templates = self.ec2_backend.describe_launch_templates(template_names=names, template_ids=ids,
                                                                   filters=filters)
            result: dict[str, Any] = {"LaunchTemplates": [
                {"CreateTime": t.create_time, "CreatedBy": f"arn:{self.partition}:iam::{self.current_account}:root",
                 "DefaultVersionNumber": t.default_version_number, "LatestVersionNumber": t.latest_version_number,
                 "LaunchTemplateId": t.id, "LaunchTemplateName": t.name, "Tags": t.tags}
                for t in templates[start : start + size]]}
            if start + size < len(templates):
                result["NextToken"] = str(start + size)
            return ActionResult(result)

        LaunchTemplates.describe_launch_templates = describe_launch_templates  # type: ignore[method-assign]
        return [(LaunchTemplates, "describe_launch_templates", original)]


class _ModelledSpotPrices(MotoPatch):
    """Makes moto's DescribeSpotPriceHistory answer the prices of `carpool.sim.localaws.spot_prices`.

    moto answers 0.00001 for every offering. EC2 answers, per type and zone, the price in effect at
    `StartTime` for each requested product description (`Linux/UNIX` in a VPC-only account); offerings
    that do not exist in a zone have no price there. Pages of at most 1,000 prices, as EC2 answers them
    (`carpool.sim.localaws.ec2_pages`).
    """

    replaces = (Internal("moto.ec2.responses.spot_instances", "SpotInstances.describe_spot_price_history", "1102fb17a717aff3"),)
    relies_on = ec2_pages.RENDERING

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.ec2.responses.spot_instances import SpotInstances

        from carpool.sim.localaws import spot_prices

        original = SpotInstances.__dict__["describe_spot_price_history"]

        def describe_spot_price_history(self: Any) -> Any:
            size = ec2_pages.max_results(self, ec2_pages.SPOT_PRICE_HISTORY)
            types = self._get_param("InstanceTypes", [])
            wanted = self._get_param("ProductDescriptions", []) or ["Linux/UNIX"]
            products = [p for p in wanted if p.startswith("Linux/UNIX")]
            filters = {k: v for k, v in self._filters_from_querystring().items()
                       if k in ("availability-zone", "instance-type")}
            offerings = self.ec2_backend.describe_spot_price_history(types, filters)
            stamp = datetime.now(UTC).replace(minute=0, second=0, microsecond=0).isoformat()
            history = []
            for o in offerings:
                price = spot_prices.spot_price(self.region, o["InstanceType"], o["Location"])
                if price is None:
                    continue
                history += [{"InstanceType": o["InstanceType"], "ProductDescription": product,
                             "SpotPrice": f"{price:.{spot_prices.DIGITS}f}", "AvailabilityZone": o["Location"],
                             "Timestamp": stamp} for product in products[:1]]
            return ec2_pages.page(self, "SpotPriceHistory", history, size, cls)

        SpotInstances.describe_spot_price_history = describe_spot_price_history  # type: ignore[method-assign]
        return [(SpotInstances, "describe_spot_price_history", original)]


class _FleetAllocation(MotoPatch):
    """Makes moto's CreateFleet launch what EC2's allocation strategy would, and tag it as EC2 does.

    moto launches the first override of the first launch template config, whatever the strategy; EC2
    launches the cheapest override (`lowest-price` on-demand; for spot `price-capacity-optimized` weighs
    pool depth too, which local EC2 does not model, so the cheapest spot pool). The overrides are put in
    price order before moto picks (stable, so equal prices keep the request's order); spot prices are
    those DescribeSpotPriceHistory answers. Instances launched from a launch template carry EC2's
    `aws:ec2launchtemplate:id`/`version` and `aws:ec2:fleet-id` tags, which is how a node's bootstrap
    can be traced back to the template version it booted from.
    """

    replaces = (Internal("moto.ec2.models.fleets", "Fleet.create_spot_requests", "bf1de273f96eb9e2"),
                Internal("moto.ec2.models.fleets", "Fleet.create_on_demand_requests", "63fa0e87ba51c7a1"))

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.ec2.models.fleets import Fleet

        spot, on_demand = Fleet.__dict__["create_spot_requests"], Fleet.__dict__["create_on_demand_requests"]

        def create_spot_requests(self: Any, weight: float) -> Any:
            _prepare(self, spot=True)
            return spot(self, weight)

        def create_on_demand_requests(self: Any, weight: float) -> Any:
            _prepare(self, spot=False)
            return on_demand(self, weight)

        Fleet.create_spot_requests = create_spot_requests  # type: ignore[method-assign,assignment]
        Fleet.create_on_demand_requests = create_on_demand_requests  # type: ignore[method-assign,assignment]
        return [(Fleet, "create_spot_requests", spot), (Fleet, "create_on_demand_requests", on_demand)]


#: installed before the server starts: what its first requests already need
_BEFORE_SERVER: tuple[type[MotoPatch], ...] = (_NoDefaultAmis, _SqsClock, SharedRegionsSession)
#: installed once the server runs, removed (in reverse) when it stops
_WITH_SERVER: tuple[type[MotoPatch], ...] = (_JournaledTransactions, _PagedLaunchTemplates, PagedInstanceTypes,
                                             _ModelledSpotPrices, _FleetAllocation, *moto_linear.PATCHES,
                                             *moto_serialize.PATCHES)
#: every patch a running LocalAws holds installed (the first one from before moto's models are imported)
_PATCHES: tuple[type[MotoPatch], ...] = (SharedLoadersWhileImporting, *_BEFORE_SERVER, *_WITH_SERVER)
#: what an in-process moto installs for CreateFleet to launch as this server's does: the allocation
#: strategy's order and EC2's launch tags (`carpool.sim.localaws.in_process`)
FLEET_PATCHES: tuple[type[MotoPatch], ...] = (_FleetAllocation,)


def _prepare(fleet: Any, spot: bool) -> None:
    """Tag the fleet's launch specs' instances and order the specs by the strategy's price."""
    from carpool.sim.localaws import spot_prices

    region = fleet.ec2_backend.region_name
    for spec in fleet.launch_specs:
        lt = spec.launch_template_spec or {}
        tags = spec.tag_specifications.setdefault("instance", {})
        if lt.get("LaunchTemplateId"):
            tags["aws:ec2launchtemplate:id"] = lt["LaunchTemplateId"]
            tags["aws:ec2launchtemplate:version"] = str(lt.get("Version", ""))
        tags["aws:ec2:fleet-id"] = fleet.id
    options = (fleet.spot_options if spot else fleet.on_demand_options) or {}
    if str(options.get("AllocationStrategy", "")).lower() in ("diversified", "prioritized"):
        return

    def price(spec: Any) -> float:
        zone = (spec.overrides or {}).get("AvailabilityZone") or _subnet_zone(fleet.ec2_backend, spec.subnet_id)
        value = (spot_prices.spot_price(region, spec.instance_type, zone or "") if spot
                 else spot_prices.ondemand_price(region, spec.instance_type))
        return float("inf") if value is None else value

    fleet.launch_specs = sorted(fleet.launch_specs, key=price)


def _subnet_zone(backend: Any, subnet_id: str | None) -> str | None:
    if not subnet_id:
        return None
    try:
        return str(backend.get_subnet(subnet_id).availability_zone)
    except Exception:  # an unknown subnet: moto fails the launch itself
        return None


class _TablesKeptInPlace:
    """The `copy` module as moto's DynamoDB backend sees it: tables are not copied (the journal undoes
    a failed transaction), everything else is."""

    def __init__(self, table_type: type) -> None:
        self._table_type = table_type

    def deepcopy(self, value: Any, *args: Any) -> Any:
        return value if isinstance(value, self._table_type) else copy.deepcopy(value, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)


_JournalEntry = tuple[Any, Any, Any, Any]  # (table, hash key, range key, copy of the item or None)


def _journal(backend: Any, actions: list[dict[str, Any]]) -> list[_JournalEntry]:
    entries = []
    for action in actions:
        op = next(iter(action.values()), None)
        if not isinstance(op, dict) or op.get("TableName") not in backend.tables:
            continue
        table = backend.tables[op["TableName"]]
        try:
            hash_key, range_key = backend.get_keys_value(table, op.get("Key") or op.get("Item") or {})
        except Exception:  # malformed: moto rejects it before writing anything
            continue
        current = table.get_item(hash_key, range_key)
        # Put and Delete replace or drop the stored item object; only Update changes it in place
        entries.append((table, hash_key, range_key, copy.deepcopy(current) if "Update" in action else current))
    return entries


def _undo(entries: list[_JournalEntry]) -> None:
    for table, hash_key, range_key, item in reversed(entries):
        if item is None and range_key is not None:
            table.items.get(hash_key, {}).pop(range_key, None)
        elif item is None:
            table.items.pop(hash_key, None)
        elif range_key is not None:
            table.items[hash_key][range_key] = item
        else:
            table.items[hash_key] = item


class _QuietRequestHandler(persistent_http.PersistentConnectionHandler):
    """No access log line per request (thousands per test run)."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass


class _Server(ThreadedMotoServer):
    """ThreadedMotoServer whose app serves its own account on its own clock, serializes DynamoDB requests,
    keeps connections open between requests as AWS endpoints do (`carpool.sim.localaws.persistent_http`), and logs
    requests only when verbose."""

    account = str(_Accounts.FIRST)
    clock: Callable[[], Callable[[], float] | None] = staticmethod(lambda: None)  # type: ignore[assignment]

    def _server_entry(self) -> None:
        app = _AccountAndClock(_SerializedDynamoDb(DomainDispatcherApplication(create_backend_app)),
                               self.account, self.clock)
        handler = persistent_http.PersistentConnectionHandler if self._verbose else _QuietRequestHandler
        self._server = make_server(self._ip_address, self._port, app, True, request_handler=handler)
        self._server_ready_event.set()
        self._server.serve_forever()

    def stop(self) -> None:
        server = self._server
        super().stop()
        if server is not None:  # the clients' pooled connections, each waited on by a thread of its own
            persistent_http.close_connections(server)


@dataclass(frozen=True)
class StateTables:
    table: str
    idempotency_table: str


@dataclass(frozen=True)
class EventPath:
    """The custom bus and the queues behind the rules (role -> URL: provisioner, registrar, interruption)."""

    bus_name: str
    bus_arn: str
    queues: dict[str, str]
    dlqs: dict[str, str]
    rules: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Network:
    vpc_id: str
    subnets: dict[str, list[str]]  # zone -> subnet ids
    security_group_id: str

    @property
    def subnet_ids(self) -> list[str]:
        return [s for ids in self.subnets.values() for s in ids]


_client_sessions: list[LocalSession] = []
_client_sessions_lock = threading.Lock()


def _client_session() -> LocalSession:
    """The session of every LocalAws's own clients (one per process, as boto3's default session is)."""
    with _client_sessions_lock:
        if not _client_sessions:
            _client_sessions.append(LocalSession())
        return _client_sessions[0]


def table_names(cluster: str) -> StateTables:
    return StateTables(f"carpool-{cluster}-state", f"carpool-{cluster}-idempotency")


def queue_name(cluster: str, role: str) -> str:
    return f"carpool-{cluster}-{role}"


class LocalAws:
    """moto on 127.0.0.1 with carpool's resources. Usable as a context manager."""

    def __init__(
        self, cluster: str = "carpool-test", region: str = "us-east-1", verbose: bool = False, *,
        account: str | None = None, export: bool = True,
    ) -> None:
        self.cluster = cluster
        self.region = region
        self._verbose = verbose
        self._server: _Server | None = None
        self._saved_env: dict[str, str | None] = {}
        self._wanted_account = account
        self.account = ""
        self.endpoint = ""
        #: the environment the stack would give carpool's functions on this local AWS
        self.env: dict[str, str] = {}
        #: exported to `os.environ` too (tests); a simulation installs `env` per function instead
        self.export = export
        #: seconds since the epoch for the requests this server serves (a simulated clock); None: real time
        self.clock: Callable[[], float] | None = None

    # -- lifecycle --------------------------------------------------------------------------------------
    def start(self) -> LocalAws:
        if self._server is not None:
            return self
        SharedLoadersWhileImporting.install()  # moto's models, imported to be verified, read botocore's data once
        try:
            with SharedLoadersWhileImporting.importing():
                for patch in _PATCHES:  # before anything else is applied: a changed moto internal fails here, whole
                    patch.verify()
        except BaseException:
            SharedLoadersWhileImporting.uninstall()
            raise
        self.account = _Accounts.take(self._wanted_account)
        for patch in _BEFORE_SERVER:
            patch.install()
        server = _Server(ip_address="127.0.0.1", port=0, verbose=self._verbose)
        server.account, server.clock = self.account, lambda: self.clock
        server.start()
        for patch in _WITH_SERVER:
            patch.install()
        self._server = server
        host, port = server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        self._setenv("AWS_ENDPOINT_URL", self.endpoint)
        for key, value in FAKE_CREDENTIALS.items():
            self._setenv(key, value)
        self._setenv("AWS_DEFAULT_REGION", self.region)
        self._setenv("AWS_REGION", self.region)
        self._setenv("AWS_PROFILE", None)  # a developer's profile must not leak into local runs
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
            for patch in reversed(_PATCHES):
                patch.uninstall()
            _Accounts.release(self.account)
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()
        self._forget_cached_clients()

    def __enter__(self) -> LocalAws:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _setenv(self, key: str, value: str | None) -> None:
        """Set (or with None, unset) a variable of `env`; when exporting, in `os.environ` too, remembering
        its first original value for `stop()`."""
        if value is None:
            self.env.pop(key, None)
        else:
            self.env[key] = value
        if not self.export:
            return
        self._saved_env.setdefault(key, os.environ.get(key))
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value

    def _forget_cached_clients(self) -> None:
        """Drop the clients carpool's session built for this endpoint (they would talk to nothing)."""
        from carpool.adapters.aws import session

        session.reset(self.env)

    def client(self, service: str) -> Any:
        """A plain boto3 client on the local server (for tests' own setup and assertions)."""
        if not self.endpoint:
            raise RuntimeError("LocalAws is not started")
        return _client_session().client(
            service,  # type: ignore[call-overload]
            region_name=self.region,
            endpoint_url=self.endpoint,
            aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            aws_session_token=FAKE_CREDENTIALS["AWS_SESSION_TOKEN"],
        )

    @property
    def account_id(self) -> str:
        """The account this local AWS serves (what STS GetCallerIdentity answers on it)."""
        if not self.account:
            raise RuntimeError("LocalAws is not started")
        return self.account

    # -- state ------------------------------------------------------------------------------------------
    def create_state(self, cluster: str | None = None) -> StateTables:
        """The state table (pk/sk, GSI gsi1 projecting all, TTL `expiresAt`) and the idempotency table
        (pk `id`, TTL `expiration`); sets CARPOOL_TABLE and CARPOOL_IDEMPOTENCY_TABLE."""
        names = table_names(cluster or self.cluster)
        ddb = self.client("dynamodb")
        existing = set(ddb.list_tables()["TableNames"])
        if names.table not in existing:
            ddb.create_table(
                TableName=names.table,
                BillingMode="PAY_PER_REQUEST",
                AttributeDefinitions=[
                    {"AttributeName": a, "AttributeType": "S"} for a in ("pk", "sk", "gsi1pk", "gsi1sk")
                ],
                KeySchema=[
                    {"AttributeName": "pk", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                GlobalSecondaryIndexes=[
                    {
                        "IndexName": "gsi1",
                        "KeySchema": [
                            {"AttributeName": "gsi1pk", "KeyType": "HASH"},
                            {"AttributeName": "gsi1sk", "KeyType": "RANGE"},
                        ],
                        "Projection": {"ProjectionType": "ALL"},
                    }
                ],
            )
            ddb.update_time_to_live(
                TableName=names.table, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiresAt"}
            )
        if names.idempotency_table not in existing:
            ddb.create_table(
                TableName=names.idempotency_table,
                BillingMode="PAY_PER_REQUEST",
                AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
                KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            )
            ddb.update_time_to_live(
                TableName=names.idempotency_table,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": IDEMPOTENCY_TTL_ATTR},
            )
        self._setenv("CARPOOL_TABLE", names.table)
        self._setenv("CARPOOL_IDEMPOTENCY_TABLE", names.idempotency_table)
        return names

    def clear_state(self, cluster: str | None = None) -> None:
        """Delete every item of both tables (cheaper than recreating them between tests): each scanned page
        of keys goes back as BatchWriteItem deletes of 25, DynamoDB's most per request."""
        names = table_names(cluster or self.cluster)
        ddb = self.client("dynamodb")
        for table, keys in ((names.table, ("pk", "sk")), (names.idempotency_table, ("id",))):
            for page in ddb.get_paginator("scan").paginate(
                TableName=table, ProjectionExpression=", ".join(keys)
            ):
                deletes = [{"DeleteRequest": {"Key": {k: item[k] for k in keys}}} for item in page.get("Items", [])]
                for start in range(0, len(deletes), 25):
                    self._write_all(ddb, table, deletes[start : start + 25])

    @staticmethod
    def _write_all(ddb: Any, table: str, requests: list[dict[str, Any]]) -> None:
        """One BatchWriteItem, resending what DynamoDB answers as unprocessed (it may, under load)."""
        pending = {table: requests}
        while pending:
            pending = ddb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}

    # -- events -----------------------------------------------------------------------------------------
    def create_event_path(self, cluster: str | None = None,
                          visibility_timeout: int | Mapping[str, int] = 30) -> EventPath:
        """Bus `carpool-<cluster>`, queues `carpool-<cluster>-<role>` each with `-dlq` (maxReceiveCount 3),
        a delivery DLQ for events EventBridge cannot deliver (`dlqs["delivery"]`), and the rules: cluster
        events on the bus; spot warnings, instances leaving and scheduled EC2 maintenance on the default
        bus. Sets CARPOOL_EVENT_BUS. `visibility_timeout`: one for every queue, or by queue role."""
        cluster = cluster or self.cluster
        events, sqs = self.client("events"), self.client("sqs")
        bus_name = f"carpool-{cluster}"
        try:
            bus_arn = events.create_event_bus(Name=bus_name)["EventBusArn"]
        except events.exceptions.ResourceAlreadyExistsException:
            bus_arn = events.describe_event_bus(Name=bus_name)["Arn"]
        queues, dlqs, arns = {}, {}, {}
        for role in QUEUE_ROLES:
            dlq_url = sqs.create_queue(QueueName=f"{queue_name(cluster, role)}-dlq")["QueueUrl"]
            dlq_arn = _queue_arn(sqs, dlq_url)
            redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(MAX_RECEIVE_COUNT)})
            url = sqs.create_queue(
                QueueName=queue_name(cluster, role),
                Attributes={"RedrivePolicy": redrive, "VisibilityTimeout": str(
                    visibility_timeout if isinstance(visibility_timeout, int) else visibility_timeout[role])},
            )["QueueUrl"]
            queues[role], dlqs[role], arns[role] = url, dlq_url, _queue_arn(sqs, url)
        rules = {}
        for rule, bus, pattern, role in _routes(cluster, bus_name):
            rule_arn = events.put_rule(Name=rule, EventBusName=bus, EventPattern=json.dumps(pattern))[
                "RuleArn"
            ]
            events.put_targets(Rule=rule, EventBusName=bus, Targets=[{"Id": role, "Arn": arns[role]}])
            _allow_eventbridge(sqs, queues[role], arns[role], rule_arn)
            rules[rule] = rule_arn
        self._setenv("CARPOOL_EVENT_BUS", bus_name)
        return EventPath(bus_name, bus_arn, queues, dlqs, rules)

    # -- network ----------------------------------------------------------------------------------------
    def seed_network(
        self, cluster: str | None = None, zones: Iterable[str] | None = None, subnets_per_zone: int = 1
    ) -> Network:
        """A VPC with `subnets_per_zone` /20 subnets per zone and a security group, all tagged
        `karpenter.sh/discovery=<cluster>` like the default EC2NodeClass selects them."""
        cluster = cluster or self.cluster
        zones = list(zones or (f"{self.region}{z}" for z in "abc"))
        if len(zones) * subnets_per_zone > 16:
            raise ValueError("at most 16 subnets fit the seeded /16 VPC")
        ec2 = self.client("ec2")
        discovery = [{"Key": "karpenter.sh/discovery", "Value": cluster}]
        vpc_id = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        ec2.create_tags(Resources=[vpc_id], Tags=[{"Key": "Name", "Value": f"{cluster}-vpc"}])
        subnets: dict[str, list[str]] = {z: [] for z in zones}
        for index, zone in enumerate(z for z in zones for _ in range(subnets_per_zone)):
            subnet = ec2.create_subnet(
                VpcId=vpc_id,
                CidrBlock=f"10.0.{index * 16}.0/20",
                AvailabilityZone=zone,
                TagSpecifications=[
                    {
                        "ResourceType": "subnet",
                        "Tags": [*discovery, {"Key": "Name", "Value": f"{cluster}-{zone}"}],
                    }
                ],
            )["Subnet"]
            subnets[zone].append(subnet["SubnetId"])
        sg_id = ec2.create_security_group(
            GroupName=f"{cluster}-nodes",
            Description=f"carpool nodes of {cluster}",
            VpcId=vpc_id,
            TagSpecifications=[{"ResourceType": "security-group", "Tags": discovery}],
        )["GroupId"]
        return Network(vpc_id, subnets, sg_id)

    # -- AMIs and parameters ----------------------------------------------------------------------------
    def seed_amis(self, images: Iterable[Mapping[str, Any]]) -> list[str]:
        """Register images and their `/aws/service/...` parameters; returns the image ids in order.

        Each dict: `name`, `architecture` (x86_64|arm64), optional `id`, `creationDate` (ISO text or
        datetime), `deprecated` (True, or the ISO deprecation time), `parameter` (SSM path whose value
        becomes the image id), `owner` (default the EKS AMI account, alias "amazon"), `tags`, `platform`.
        """
        from moto.ec2.models import ec2_backends
        from moto.ec2.models.amis import Ami

        backend = ec2_backends[self.account_id][self.region]
        ids = []
        for spec in images:
            image_id = str(spec.get("id") or _image_id(spec["name"]))
            ami = Ami(
                backend,
                image_id,
                name=spec["name"],
                description=spec.get("description", spec["name"]),
                architecture=spec["architecture"],
                owner_id=spec.get("owner", EKS_AMI_OWNER),
                owner_alias=spec.get("ownerAlias", "amazon"),
                public=True,
                virtualization_type="hvm",
                hypervisor="xen",
                platform=spec.get("platform"),
                creation_date=_datetime(spec.get("creationDate")),
                region_name=f"{self.region}a",
                tags=dict(spec.get("tags", {})) or None,
                boot_mode="uefi-preferred" if spec["architecture"] == "x86_64" else "uefi",
            )
            deprecated = spec.get("deprecated")
            if deprecated:
                when = datetime(2020, 1, 1, tzinfo=UTC) if deprecated is True else _datetime(deprecated)
                ami.deprecation_time = _iso(when)  # type: ignore[attr-defined]
            backend.amis[image_id] = ami
            if spec.get("parameter"):
                self.put_service_parameter(str(spec["parameter"]), image_id)
            ids.append(image_id)
        return ids

    def put_service_parameter(self, path: str, value: str) -> None:
        """Write an `/aws/service/...` parameter through moto's backend (the API refuses that prefix)."""
        from moto.ssm.models import Parameter, ssm_backends

        backend = ssm_backends[self.account_id][self.region]
        versions = backend._parameters[path]
        versions.append(
            Parameter(  # type: ignore[abstract]  # moto's CloudFormation mixin, instantiated by moto itself
                account_id=self.account_id,
                name=path,
                value=value,
                parameter_type="String",
                description=None,
                allowed_pattern=None,
                keyid=None,
                last_modified_date=datetime.now(UTC),
                version=(versions[-1].version + 1) if versions else 1,
                data_type="text",
            )
        )

    # -- queues -----------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def sqs_backend(self) -> Iterator[Any]:
        """This account's SQS backend in moto, used on this local AWS's clock as its server serves requests.

        For what AWS runs inside its own services rather than over the public API (the Lambda service's SQS
        event source mapping, `carpool.sim.localaws.event_source`): the backend holds exactly the queues and
        messages the server answers for, and time read inside the block is the server's (`_SqsClock`).
        Calls must come from one thread at a time per account, as the server's requests for one
        simulation do."""
        from moto.sqs.models import sqs_backends

        before = getattr(_request, "clock", None)
        _request.clock = self.clock
        try:
            yield sqs_backends[self.account_id][self.region]
        finally:
            _request.clock = before

    def update_eks_network_config(self, cluster: str, config: Mapping[str, Any]) -> None:
        """Add to a cluster's `kubernetesNetworkConfig`, as DescribeCluster answers it, what EKS assigns by
        itself and moto leaves out (an IPv6 cluster's service range: the request cannot name one)."""
        from moto.eks.models import eks_backends

        eks_backends[self.account_id][self.region].clusters[cluster].kubernetes_network_config.update(config)

    def receive(self, queue_url: str, max_messages: int = 10, wait_seconds: int = 1) -> list[dict[str, Any]]:
        """Receive and delete up to `max_messages` (tests read what a rule delivered)."""
        sqs = self.client("sqs")
        out = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=max_messages, WaitTimeSeconds=wait_seconds
        )
        messages = out.get("Messages", [])
        for m in messages:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
        return messages

    def drain(self, queue_urls: Iterable[str]) -> None:
        """Empty queues by receiving and deleting (PurgeQueue may run only once a minute per queue)."""
        for url in queue_urls:
            while self.receive(url, wait_seconds=0):
                pass


def _routes(cluster: str, bus_name: str) -> Iterator[tuple[str, str, dict[str, Any], str]]:
    """(rule name, bus, pattern, queue role), the same patterns as the stack's `EventRouting`."""
    prefix = f"carpool-{cluster}"
    cluster_events = {"source": [CLUSTER_SOURCE]}
    yield (
        f"{prefix}-pod-unschedulable",
        bus_name,
        {**cluster_events, "detail-type": [POD_UNSCHEDULABLE]},
        "provisioner",
    )
    yield (
        f"{prefix}-node-lifecycle",
        bus_name,
        {**cluster_events, "detail-type": list(NODE_EVENTS)},
        "registrar",
    )
    # AWS service events only arrive on the default bus.
    yield (
        f"{prefix}-spot-interruption",
        "default",
        {"source": ["aws.ec2"], "detail-type": list(SPOT_EVENTS)},
        "interruption",
    )
    state_change = {
        "source": ["aws.ec2"],
        "detail-type": [INSTANCE_STATE_CHANGE],
        "detail": {"state": list(LEAVING_STATES)},
    }
    yield f"{prefix}-instance-state-change", "default", state_change, "interruption"
    scheduled = {
        "source": ["aws.health"],
        "detail-type": [HEALTH_EVENT],
        "detail": {"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]},
    }
    yield f"{prefix}-scheduled-change", "default", scheduled, "interruption"


def _queue_arn(sqs: Any, url: str) -> str:
    return str(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"])


def _allow_eventbridge(sqs: Any, url: str, queue_arn: str, rule_arn: str) -> None:
    """Add `rule_arn` to the queue policy, as the stack's `SqsQueue` targets do."""
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"]).get("Attributes", {})
    policy: dict[str, Any] = (
        json.loads(attrs["Policy"]) if attrs.get("Policy") else {"Version": "2012-10-17", "Statement": []}
    )
    policy["Statement"].append(
        {
            "Sid": f"events-{len(policy['Statement'])}",
            "Effect": "Allow",
            "Principal": {"Service": "events.amazonaws.com"},
            "Action": "sqs:SendMessage",
            "Resource": queue_arn,
            "Condition": {"ArnEquals": {"aws:SourceArn": rule_arn}},
        }
    )
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(policy)})


def _image_id(name: str) -> str:
    """A stable id per image name, so seeded scenarios are reproducible."""
    return "ami-" + hashlib.sha256(name.encode()).hexdigest()[:17]


def _datetime(value: str | datetime | None) -> datetime | None:
    """ISO text (`2025-01-01`, `...T00:00:00.000Z`) or a datetime, as an aware UTC datetime."""
    if value is None:
        return None
    parsed = value if isinstance(value, datetime) else datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _iso(value: datetime | None) -> str:
    value = value or datetime.now(UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


__all__ = ["EventPath", "LocalAws", "Network", "StateTables", "queue_name", "table_names"]
