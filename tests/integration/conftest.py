"""Integration fixtures: one moto server per test module, clean state per test.

Each test module starts its own `LocalAws` on a free port of 127.0.0.1 (an AWS account of its own), with
its tables, bus, queues and network created once (module scope); tests get them emptied (function
scope). Module scope keeps local AWS to the integration modules: `make test` runs every suite in one
pytest process per xdist worker, and the variables LocalAws exports (`AWS_ENDPOINT_URL`, credentials,
table names) and its moto patches must be gone before another suite's module runs on that worker.
The fixtures that prepare local AWS for provisioning (`aws`, `make_deps`) live in carpool_env.py with the
other shared helpers; importing them here makes them available to every integration test.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from carpool_env import CLUSTER, aws, helper_client, make_deps  # noqa: F401  (fixtures, see the docstring)

from carpool.sim.localaws import motofast
from carpool.sim.localaws.server import EventPath, LocalAws, Network, StateTables


@pytest.fixture(scope="module")
def local_aws() -> Iterator[LocalAws]:
    """moto on 127.0.0.1 with carpool's tables, bus, rules and queues; environment restored after. The
    simulation's speed-ups of moto's own bookkeeping (`carpool.sim.localaws.motofast`) are on, as in a simulation."""
    with LocalAws(cluster=CLUSTER) as server, motofast.faster_moto():
        server.create_state()
        yield server


@pytest.fixture(scope="module")
def _event_path(local_aws: LocalAws) -> EventPath:
    return local_aws.create_event_path()


@pytest.fixture
def event_path(local_aws: LocalAws, _event_path: EventPath) -> EventPath:
    """The bus and queues, with every queue emptied before the test (received and deleted, as
    `LocalAws.drain` does, through one client: PurgeQueue may run only once a minute per queue)."""
    sqs = helper_client(local_aws, "sqs")
    for url in [*_event_path.queues.values(), *_event_path.dlqs.values()]:
        while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", []):
            for m in messages:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return _event_path


@pytest.fixture(scope="module")
def network(local_aws: LocalAws) -> Network:
    return local_aws.seed_network(zones=["us-east-1a", "us-east-1b"])


@pytest.fixture
def state_tables(local_aws: LocalAws) -> StateTables:
    """The state and idempotency tables, emptied before the test."""
    tables = local_aws.create_state()
    local_aws.clear_state()
    return tables


@pytest.fixture
def now() -> datetime:
    return datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
