"""Production wiring: every port backed by boto3 (and lightkube for the cluster).

Also used by the simulation, which passes its own simulated cluster and clock but keeps these adapters
pointed at the local AWS endpoint, so the handlers it drives run the same code as in Lambda.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from carpool.amis import CachedAmiSource
from carpool.app.settings import Settings
from carpool.app.sources import Ec2CatalogSource, TextConfigSource
from carpool.app.wiring import Dependencies, utc_now
from carpool.ports import Cluster

AMI_TTL_SECONDS = 300


def build(
    settings: Settings,
    cluster: Cluster | None = None,
    clock: Callable[[], datetime] = utc_now,
    config_text: Callable[[], str] | None = None,
) -> Dependencies:
    from carpool.adapters.aws.catalog import fetch_catalog_inputs
    from carpool.adapters.aws.config import SsmConfigText
    from carpool.adapters.aws.dynamodb_state import DynamoCapacityCache, DynamoLedger, DynamoOfferings
    from carpool.adapters.aws.ec2 import Ec2Compute
    from carpool.adapters.aws.events import EventBridgePublisher
    from carpool.adapters.aws.images import AwsAmiSource

    if cluster is None:
        from carpool.adapters.aws.eks import complete
        from carpool.adapters.k8s.cluster import LightkubeCluster

        settings = complete(settings)
        cluster = LightkubeCluster.from_settings(settings)
    read: Any = config_text or SsmConfigText(settings.config_parameter or None)
    return Dependencies(
        settings=settings,
        cluster=cluster,
        compute=Ec2Compute(fleet_attempts=1),  # botocore's retries are the only layer (see session.py)
        ledger=DynamoLedger(settings.table),
        offerings=DynamoOfferings(settings.table),
        capacity=DynamoCapacityCache(settings.table),
        publisher=EventBridgePublisher(settings.event_bus),
        ami_source=CachedAmiSource(AwsAmiSource(), AMI_TTL_SECONDS, clock=lambda: clock().timestamp()),
        config=TextConfigSource(read),
        catalog=Ec2CatalogSource(lambda: fetch_catalog_inputs(clock())),
        clock=clock,
    )
